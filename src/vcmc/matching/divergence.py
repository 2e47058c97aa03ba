"""Minimum-divergence matching, fully federated (docs/design.md §5.3 and §5.3.1).

Server side (``match_min_divergence``): silos are visited one at a time in an order starting from a
reference silo. The server sends the current reference point estimate ``(pi^R, p^R)`` to the silo, which
computes on its own rows a small cost matrix ``(K_s, C + K_s)`` (``divergence_cost``) and returns only
that. A rectangular assignment sends each local cluster to a distinct reference cluster or to its own
"new cluster" column; the reference is then updated by averaging the matched profiles (weighted by cluster
sizes) and appending the new clusters. Several references/orders are tried and the run with the smallest
summed cost is kept (paper section 7.3.1).

Silo side (``divergence_cost``): two rules to open a new cluster (docs/design.md §5.3.1).

- ``"penalised"`` (default): matching l to j costs ``sum_i w_il [log f(X_i | p^s_l) - log f(X_i | p^R_j)]``
  (the log-likelihood lost by describing l's members with j's profile, a KL divergence between the two
  profiles weighted by l's members); opening a new cluster costs ``(D/2) log n_l`` (BIC price of one more
  profile) times ``penalty_multiplier``.
- ``"augmented"``: Stephens-type KL between the silo's membership probabilities under its own draws and
  those under the reference; the new-cluster cost is the KL against the reference augmented with l itself.
  It over-splits when clusters overlap (docs/design.md §5.3.1), hence not the default.

Minimum-divergence matching is one-to-one within a silo: it never merges two local clusters of one silo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from vcmc._rng import as_generator
from vcmc.config.options import NewClusterRule, check_new_cluster_rule, choices
from vcmc.exceptions import ConfigError, SiloFailure
from vcmc.matching.coordinates import check_summaries, default_reference, matching_from_groups
from vcmc.matching.types import Matching
from vcmc.model import profile_offsets
from vcmc.protocol import DivergenceReply, DivergenceRequest, SiloSummary

__all__ = ["match_min_divergence", "RULES"]

RULES = choices(NewClusterRule)
_TINY = 1e-300   # floor of probabilities before a log: keeps costs finite when a modality has p = 0


def _normalise_blocks(profiles: np.ndarray, n_modalities) -> np.ndarray:
    """Rescale each variable block to sum to 1 (per-coordinate medians need not)."""
    offsets = profile_offsets(n_modalities)
    prof = np.maximum(np.asarray(profiles, dtype=np.float64), 0.0)
    sums = np.add.reduceat(prof, offsets[:-1], axis=-1)
    sums = np.where(sums > 0, sums, 1.0)
    return prof / np.repeat(sums, np.diff(offsets), axis=-1)


def _cluster_weights(summ: SiloSummary) -> np.ndarray:
    """Sizes used to average matched profiles: member counts, or ``pi_estimate * n_rows`` if withheld."""
    sizes = np.asarray(summ.cluster_sizes, dtype=np.float64)
    if sizes.sum() <= 0:
        sizes = np.asarray(summ.pi_estimate, dtype=np.float64) * summ.n_rows
    return np.maximum(sizes, 1e-9)


def _check_reply(reply, summ: SiloSummary, n_ref: int) -> np.ndarray:
    if not isinstance(reply, DivergenceReply):
        raise SiloFailure(summ.silo, "divergence reply must be a DivergenceReply; got "
                                     f"{type(reply).__name__}")
    cost = np.asarray(reply.cost, dtype=np.float64)
    k = summ.n_clusters
    if cost.shape != (k, n_ref + k):
        raise SiloFailure(summ.silo, f"divergence cost matrix has shape {cost.shape}, expected "
                                     f"({k}, {n_ref + k})")
    if np.any(np.isnan(cost)) or np.any(cost == -np.inf):
        raise SiloFailure(summ.silo, "divergence cost matrix contains NaN or -inf")
    if not np.all(np.isfinite(cost[np.arange(k), n_ref + np.arange(k)])):
        raise SiloFailure(summ.silo, "divergence cost matrix has a non-finite 'new cluster' cost")
    return cost


def _run_order(summaries, order, divergence, rule, penalty_multiplier, n_mod, cache):
    """One sequential pass; returns (group per silo, total cost). ``cache`` maps (prefix, silo) -> cost."""
    ref = order[0]
    prof0 = _normalise_blocks(summaries[ref].profile_estimate, n_mod)
    w0 = _cluster_weights(summaries[ref])
    prof_sum = prof0 * w0[:, None]
    size_acc = w0.copy()
    groups = {ref: np.arange(summaries[ref].n_clusters, dtype=np.int64)}
    total = 0.0
    for pos, s in enumerate(order[1:], start=1):
        summ = summaries[s]
        c = size_acc.size
        key = (tuple(order[:pos]), s)
        if key not in cache:
            request = DivergenceRequest(reference_pi=size_acc / size_acc.sum(),
                                        reference_profiles=prof_sum / size_acc[:, None],
                                        rule=rule, penalty_multiplier=float(penalty_multiplier))
            cache[key] = _check_reply(divergence(s, request), summ, c)
        cost = cache[key]
        rows, cols = linear_sum_assignment(cost)
        total += float(cost[rows, cols].sum())
        g = np.empty(summ.n_clusters, dtype=np.int64)
        matched = cols < c
        g[rows[matched]] = cols[matched]
        new_rows = rows[~matched]
        g[new_rows] = c + np.arange(new_rows.size)
        # reference update: size-weighted average of matched profiles; new clusters appended
        prof = _normalise_blocks(summ.profile_estimate, n_mod)
        w = _cluster_weights(summ)
        prof_sum = np.concatenate([prof_sum, np.zeros((new_rows.size, prof_sum.shape[1]))])
        size_acc = np.concatenate([size_acc, np.zeros(new_rows.size)])
        np.add.at(prof_sum, g, prof * w[:, None])
        np.add.at(size_acc, g, w)
        groups[s] = g
    return groups, total


def match_min_divergence(summaries: Sequence[SiloSummary],
                         divergence: Callable[[int, DivergenceRequest], DivergenceReply], *,
                         rule: str = "penalised", penalty_multiplier: float = 1.0, n_starts: int = 4,
                         reference: str | None = None, rng=None) -> Matching:
    """Sequential, federated minimum-divergence matching with multi-start (docs/design.md §5.3).

    Parameters
    ----------
    summaries : sequence of SiloSummary
    divergence : callable (silo_index, DivergenceRequest) -> DivergenceReply
        Routes a request to silo ``silo_index`` (index into ``summaries``), which answers with
        ``divergence_cost`` on its own rows (see ``in_process_divergence`` and the ``Silo`` protocol).
    rule : {"penalised", "augmented"}, default "penalised"
    penalty_multiplier : float, default 1
    n_starts : int, default 4
        Number of distinct (reference, order) sequences tried. The first is deterministic: the reference
        (named, or most local clusters, ties by most rows then name) followed by the other silos by
        decreasing number of clusters, then rows, then name. Further ones are random (``rng``); with a named
        reference only the order is random. The run of smallest summed cost is kept.
    reference : str or None
        Name of the reference silo of every start (default: free).
    rng : int, Generator or None

    Returns
    -------
    Matching
        ``total_cost`` is the summed assignment cost of the kept run; ``details`` holds ``reference``,
        ``order`` (silo names), ``start_costs`` and ``n_requests`` (silo round trips).
    """
    n_mod = check_summaries(summaries)
    check_new_cluster_rule(rule, penalty_multiplier, "match_min_divergence")
    if isinstance(n_starts, bool) or not isinstance(n_starts, int | np.integer) or n_starts < 1:
        raise ConfigError(f"The 'n_starts' parameter of match_min_divergence must be an int >= 1. "
                          f"Got {n_starts!r} instead.")
    if divergence is None or not callable(divergence):
        raise ConfigError("match_min_divergence needs a 'divergence' callable (silo_index, DivergenceRequest)"
                          " -> DivergenceReply that routes requests to the silos; got "
                          f"{type(divergence).__name__}")
    names = [s.silo for s in summaries]
    if reference is not None and reference not in names:
        raise ConfigError(f"The 'reference' parameter of match_min_divergence must be one of the silo names "
                          f"{names}. Got {reference!r} instead.")
    gen = as_generator(rng)
    n = len(summaries)
    ref0 = names.index(reference) if reference is not None else default_reference(summaries)
    informative = sorted(range(n), key=lambda i: (-summaries[i].n_clusters, -summaries[i].n_rows, names[i]))
    orders = [tuple([ref0] + [i for i in informative if i != ref0])]
    # random starts permute silos in name order, so that a given rng gives the same sequences whatever the
    # order in which the silos are listed
    by_name = sorted(range(n), key=names.__getitem__)
    n_distinct = int(np.prod(np.arange(1, n))) if reference is not None else int(np.prod(np.arange(1, n + 1)))
    attempts = 0
    while len(orders) < min(n_starts, n_distinct) and attempts < 100 * n_starts:
        attempts += 1
        perm = [by_name[i] for i in gen.permutation(n)]
        if reference is not None:
            perm = [ref0] + [i for i in perm if i != ref0]
        if tuple(perm) not in orders:
            orders.append(tuple(perm))

    cache: dict = {}
    best = None
    start_costs = []
    for order in orders:
        groups, total = _run_order(summaries, order, divergence, rule, penalty_multiplier, n_mod, cache)
        start_costs.append(total)
        if best is None or total < best[1]:
            best = (groups, total, order)
    groups, total, order = best
    group = np.concatenate([groups[i] for i in range(n)])
    silo_index = np.concatenate([np.full(s.n_clusters, i) for i, s in enumerate(summaries)])
    local_index = np.concatenate([np.arange(s.n_clusters) for s in summaries])
    details = {"reference": names[order[0]], "order": [names[i] for i in order], "rule": rule,
               "start_costs": start_costs, "n_requests": len(cache)}
    return matching_from_groups(summaries, group, silo_index, local_index, method="min-divergence",
                                total_cost=float(total), details=details)
