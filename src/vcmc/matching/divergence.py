"""Minimum-divergence matching, fully federated (method.md sections 5.3 and 5.3.1).

Server side (``match_min_divergence``): silos are visited one at a time in an order starting from a
reference silo. The server sends the current reference point estimate ``(pi^R, p^R)`` to the silo, which
computes on its own rows a small cost matrix ``(K_s, C + K_s)`` (``divergence_cost``) and returns only
that. A rectangular assignment sends each local cluster to a distinct reference cluster or to its own
"new cluster" column; the reference is then updated by averaging the matched profiles (weighted by cluster
sizes) and appending the new clusters. Several references/orders are tried and the run with the smallest
summed cost is kept (paper section 7.3.1).

Silo side (``divergence_cost``): two rules to open a new cluster (method.md 5.3.1).

- ``"penalised"`` (default): matching l to j costs ``sum_i w_il [log f(X_i | p^s_l) - log f(X_i | p^R_j)]``
  (the log-likelihood lost by describing l's members with j's profile, a KL divergence between the two
  profiles weighted by l's members); opening a new cluster costs ``(D/2) log n_l`` (BIC price of one more
  profile) times ``penalty_multiplier``.
- ``"augmented"``: Stephens-type KL between the silo's membership probabilities under its own draws and
  those under the reference; the new-cluster cost is the KL against the reference augmented with l itself.
  It over-splits when clusters overlap (method.md 5.3.1), hence not the default.

Minimum-divergence matching is one-to-one within a silo: it never merges two local clusters of one silo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.special import logsumexp

from vcmc._rng import as_generator
from vcmc.exceptions import ConfigError, DataError, SiloFailure
from vcmc.federation.protocol import DivergenceReply, DivergenceRequest
from vcmc.matching.coordinates import check_summaries, default_reference, matching_from_groups
from vcmc.matching.types import Matching
from vcmc.model import MISSING, intrinsic_dimension, profile_offsets
from vcmc.silo.summary import LocalPosterior, SiloSummary

__all__ = ["divergence_cost", "membership_divergence", "in_process_divergence", "match_min_divergence",
           "RULES"]

RULES = ("penalised", "augmented")
_TINY = 1e-300   # floor of probabilities before a log: keeps costs finite when a modality has p = 0


def _check_rule(rule: str, penalty_multiplier: float, owner: str) -> None:
    if rule not in RULES:
        raise ConfigError(f"The 'rule' parameter of {owner} must be one of {RULES}. Got {rule!r} instead.")
    if not (np.isfinite(penalty_multiplier) and penalty_multiplier >= 0):
        raise ConfigError(f"The 'penalty_multiplier' parameter of {owner} must be a finite float >= 0. "
                          f"Got {penalty_multiplier!r} instead.")


def _one_hot(codes: np.ndarray, n_modalities) -> csr_matrix:
    """Sparse (n, P) indicator of each row's modality per variable; missing values give no entry."""
    offsets = profile_offsets(n_modalities)
    n, q = codes.shape
    ok = codes != MISSING
    rows = np.broadcast_to(np.arange(n)[:, None], (n, q))[ok]
    cols = (codes + offsets[:-1][None, :])[ok]
    return csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, int(offsets[-1])))


def divergence_cost(codes, n_modalities, local: LocalPosterior, reference_pi, reference_profiles, *,
                    rule: str = "penalised", penalty_multiplier: float = 1.0,
                    n_draws: int = 20) -> np.ndarray:
    """Cost of matching each local cluster of a silo to each reference cluster, computed in the silo.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, Q), int
        The silo's own data (never leaves the silo).
    n_modalities : sequence of int
    local : LocalPosterior
        The silo's post-processed posterior: ``membership`` (n_rows, K_s) and the local draws.
    reference_pi : ndarray of shape (C,)
        Reference weights (used by the augmented rule).
    reference_profiles : ndarray of shape (C, P)
        Reference profiles.
    rule : {"penalised", "augmented"}, default "penalised"
        New-cluster rule of method.md 5.3.1.
    penalty_multiplier : float, default 1
        Multiplier of the BIC price ``(D/2) log n_l`` (penalised rule).
    n_draws : int, default 20
        Evenly thinned local draws over which the augmented rule averages its KL.

    Returns
    -------
    ndarray of shape (K_s, C + K_s)
        Columns ``0..C-1``: matching costs; column ``C + l``: cost of opening a new cluster for local
        cluster ``l`` (finite), other "new" entries ``+inf``. Only this matrix leaves the silo.
    """
    _check_rule(rule, penalty_multiplier, "divergence_cost")
    codes = np.asarray(codes)
    n_mod = tuple(int(k) for k in n_modalities)
    p = int(profile_offsets(n_mod)[-1])
    ref_pi = np.asarray(reference_pi, dtype=np.float64)
    ref_prof = np.asarray(reference_profiles, dtype=np.float64)
    # messages name shapes only: this runs inside the silo and must not echo data values
    if codes.ndim != 2 or codes.shape[1] != len(n_mod):
        raise DataError(f"codes must have shape (n_rows, {len(n_mod)}); got {codes.shape}")
    if local.membership.shape[0] != codes.shape[0]:
        raise DataError(f"the local posterior describes {local.membership.shape[0]} rows but codes has "
                        f"{codes.shape[0]}")
    if ref_prof.ndim != 2 or ref_prof.shape[1] != p or ref_pi.shape != (ref_prof.shape[0],):
        raise DataError(f"reference_profiles must have shape (C, {p}) and reference_pi shape (C,); got "
                        f"{ref_prof.shape} and {ref_pi.shape}")
    if not (np.all(np.isfinite(ref_prof)) and np.all(np.isfinite(ref_pi))):
        raise DataError("the reference parameters contain NaN or infinite values")
    c = ref_prof.shape[0]
    k = local.n_clusters
    x1 = _one_hot(codes, n_mod)                                            # (n, P) sparse
    log_ref = np.log(np.maximum(ref_prof, _TINY))                          # (C, P)
    cost = np.full((k, c + k), np.inf)

    if rule == "penalised":
        w = np.asarray(local.membership, dtype=np.float64)                 # (n, K)
        soft = np.asarray((x1.T @ w).T)                                    # (K, P) soft counts
        n_l = w.sum(axis=0)
        # local point estimate: posterior mean of the label-consistent draws (method.md 5.3.1)
        log_own = np.log(np.maximum(local.profile_draws.mean(axis=0), _TINY))
        own = np.sum(soft * log_own, axis=1)                               # sum_i w_il log f(X_i | p^s_l)
        cost[:, :c] = own[:, None] - soft @ log_ref.T
        dim = intrinsic_dimension(n_mod)
        cost[np.arange(k), c + np.arange(k)] = penalty_multiplier * 0.5 * dim * np.log(np.maximum(n_l, 1.0))
        return cost

    # augmented reference rule (method.md 5.3 pseudo-code)
    t_all = local.pi_draws.shape[0]
    idx = np.unique(np.linspace(0, t_all - 1, min(t_all, max(int(n_draws), 1))).round().astype(np.int64))
    t = idx.size
    log_prof_t = np.log(np.maximum(local.profile_draws[idx], _TINY))       # (T', K, P)
    ll_t = np.asarray(x1 @ log_prof_t.reshape(t * k, p).T).reshape(-1, t, k)   # (n, T', K)
    log_joint = ll_t + np.log(np.maximum(local.pi_draws[idx], _TINY))[None, :, :]
    log_p_t = log_joint - logsumexp(log_joint, axis=2, keepdims=True)       # log P_t[i, l]
    p_t = np.exp(log_p_t)
    ent = np.sum(np.where(p_t > 0, p_t * log_p_t, 0.0), axis=0).mean(axis=0)   # (K,) mean_t sum_i P log P
    p_bar = p_t.mean(axis=1)                                               # (n, K)
    log_ref_joint = np.asarray(x1 @ log_ref.T) + np.log(np.maximum(ref_pi, _TINY))[None, :]   # (n, C)
    ref_norm = logsumexp(log_ref_joint, axis=1)                             # (n,)
    log_q = log_ref_joint - ref_norm[:, None]
    cost[:, :c] = ent[:, None] - p_bar.T @ log_q
    # reference augmented with local cluster l (its posterior-mean weight and profile): the common
    # renormalisation 1 / (1 + pi_l) cancels in the membership ratio
    pi_mean = local.pi_draws.mean(axis=0)
    log_l = np.asarray(x1 @ np.log(np.maximum(local.profile_draws.mean(axis=0), _TINY)).T) + \
        np.log(np.maximum(pi_mean, _TINY))[None, :]                        # (n, K)
    log_q_new = log_l - np.logaddexp(ref_norm[:, None], log_l)
    cost[np.arange(k), c + np.arange(k)] = ent - np.sum(p_bar * log_q_new, axis=0)
    return cost


def membership_divergence(codes, n_modalities, local: LocalPosterior,
                          request: DivergenceRequest) -> DivergenceReply:
    """Silo-side handler of a ``DivergenceRequest``: the reply carries only the cost matrix."""
    cost = divergence_cost(codes, n_modalities, local, request.reference_pi, request.reference_profiles,
                           rule=request.rule, penalty_multiplier=float(request.penalty_multiplier))
    return DivergenceReply(cost=cost)


def in_process_divergence(silos: Sequence[tuple[np.ndarray, LocalPosterior]], n_modalities, *,
                          encode: bool = True) -> Callable[[int, DivergenceRequest], DivergenceReply]:
    """A ``divergence`` callable for silos held in this process (tests, simulations).

    Parameters
    ----------
    silos : sequence of (codes, LocalPosterior)
        In the order of the summaries given to ``match_min_divergence``.
    n_modalities : sequence of int
    encode : bool, default True
        Pass requests and replies through their plain-array encoding (``to_arrays``/``from_arrays``), as
        a remote transport would.
    """
    data = list(silos)

    def route(silo_index: int, request: DivergenceRequest) -> DivergenceReply:
        if encode:
            request = DivergenceRequest.from_arrays(request.to_arrays())
        codes, local = data[silo_index]
        reply = membership_divergence(codes, n_modalities, local, request)
        return DivergenceReply.from_arrays(reply.to_arrays()) if encode else reply

    return route


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
    """Sequential, federated minimum-divergence matching with multi-start (method.md 5.3).

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
    _check_rule(rule, penalty_multiplier, "match_min_divergence")
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
