"""Profile estimates that the silos' fractionated priors dominate (docs/design.md §6.9).

VCMC combines the silos' draws by convex weights. The product of the silos' subposteriors is the full
posterior, but their weighted average is not: for a modality that is rare in a cluster with few members
per silo, every silo's draw carries its own fractionated prior, ``beta' = (beta - 1)/S + 1`` pseudo-counts
(about one person per silo for the default ``beta = 0.5``), so every draw sits near ``beta' / n_sc`` and no
convex combination can come down to the pooled posterior's ``(beta + N_c)/(n_c + K beta)``. Measured on
20 silos of 300 rows, a modality of prevalence 0.15% in a cluster of 32 people per silo is estimated at
3.9% by VCMC and 0.16% by full-data MCMC.

When the silos send their cluster-level counts (the ``contingency`` strategy), the server can tell where
this happens: the counts pooled over the local clusters matched to a global cluster give the conjugate
posterior of its profile *given the partition*, ``Beta(beta + N_ck, sum_k' (beta + N_ck') - beta - N_ck)``
for each modality, and the pooled counts of the whole population (every cluster together) give the
population's prevalence, known far better than any cluster's. An aggregated estimate (a cluster's
posterior mean, or the population's weight-averaged one) is flagged when it is more than ``FLAG_RATIO``
times that posterior's ``1 - FLAG_TAIL`` quantile: the data do not support it, by a margin that matters
(allocation uncertainty makes the partition-conditional posterior a little too narrow, and a modality at
0.3% instead of 0.05% in a few large silos is a small error; 3% instead of 0.08% in thirty small ones is
not). Only cluster-level counts are used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import beta as beta_dist

from vcmc.model import beta_per_column, profile_offsets

__all__ = ["FLAG_RATIO", "FLAG_TAIL", "describe_prior_dominated", "pooled_cluster_counts", "prior_dominated_profiles"]

FLAG_TAIL = 0.025     # the upper end of the partition-conditional posterior's equal-tailed 95% interval ...
FLAG_RATIO = 2.0      # ... which the aggregated estimate exceeds by more than this factor


def pooled_cluster_counts(summaries: Sequence, matching) -> np.ndarray | None:
    """(C, P) counts of every modality in every global cluster, summed over silos; None without counts."""
    if any(s.counts is None for s in summaries):
        return None
    p = summaries[0].counts.shape[1]
    out = np.zeros((matching.n_global, p))
    for s, assign in zip(summaries, matching.assignment, strict=True):
        np.add.at(out, np.asarray(assign, dtype=np.int64), np.asarray(s.counts, dtype=np.float64))
    return out


def prior_dominated_profiles(summaries: Sequence, matching, profile_draws: np.ndarray, *, beta,
                             n_modalities, pi_draws: np.ndarray | None = None) -> list[dict]:
    """The (cluster, variable, modality) estimates that the pooled counts cannot support (module docstring).

    Parameters
    ----------
    summaries : sequence of SiloSummary
        In the order of ``matching.silos``; without counts (``federated-gradient``) nothing is checked.
    matching : Matching
    profile_draws : ndarray of shape (T, C, P)
        The aggregated draws.
    pi_draws : ndarray of shape (T, C), optional
        The aggregated weights; with them the population's prevalences are checked too.
    beta : float or sequence of float
        The (unfractionated) profile prior of ``PriorConfig``.
    n_modalities : sequence of int

    Returns
    -------
    list of dict
        ``cluster`` (1-based; None for the whole population), ``variable``, ``modality`` (1-based),
        ``estimate`` (aggregated posterior mean),
        ``pooled_counts_mean`` and ``pooled_counts_upper`` (the partition-conditional posterior's mean and
        ``1 - FLAG_TAIL`` quantile), ``count`` and ``cluster_count`` (people with the modality / with the
        variable observed), sorted by decreasing ratio of estimate to pooled mean.
    """
    counts = pooled_cluster_counts(summaries, matching)
    if counts is None:
        return []
    k = np.asarray(n_modalities, dtype=np.int64)
    offsets = profile_offsets(k)
    b = beta_per_column(beta, k)
    a = counts + b[None, :]
    total = np.add.reduceat(a, offsets[:-1], axis=1)            # (C, Q): per variable
    rest = np.repeat(total, k, axis=1) - a
    mean0 = a / (a + rest)
    upper0 = beta_dist.ppf(1.0 - FLAG_TAIL, a, rest)
    estimate = np.asarray(profile_draws, dtype=np.float64).mean(axis=0)
    observed = np.add.reduceat(counts, offsets[:-1], axis=1)
    flag = (estimate > FLAG_RATIO * upper0) & (np.repeat(observed, k, axis=1) > 0)
    variable = np.repeat(np.arange(k.size), k)
    out = []
    for c, col in zip(*np.nonzero(flag), strict=True):
        out.append({"cluster": int(c) + 1, "variable": int(variable[col]) + 1,
                    "modality": int(col - offsets[variable[col]]) + 1, "column": int(col),
                    "estimate": float(estimate[c, col]), "pooled_counts_mean": float(mean0[c, col]),
                    "pooled_counts_upper": float(upper0[c, col]), "count": float(counts[c, col]),
                    "cluster_count": float(observed[c, variable[col]])})
    # the population: every cluster's counts together against the weight-averaged aggregated profile
    pi = None if pi_draws is None else np.asarray(pi_draws, dtype=np.float64)
    if pi is not None:
        pop_counts = counts.sum(axis=0)
        a_pop = pop_counts + b
        rest_pop = np.repeat(np.add.reduceat(a_pop, offsets[:-1]), k) - a_pop
        mean_pop = a_pop / (a_pop + rest_pop)
        upper_pop = beta_dist.ppf(1.0 - FLAG_TAIL, a_pop, rest_pop)
        est_pop = np.einsum("tc,tcp->p", pi, np.asarray(profile_draws, dtype=np.float64)) / pi.shape[0]
        obs_pop = np.repeat(np.add.reduceat(pop_counts, offsets[:-1]), k)
        for col in np.flatnonzero((est_pop > FLAG_RATIO * upper_pop) & (obs_pop > 0)):
            out.append({"cluster": None, "variable": int(variable[col]) + 1,
                        "modality": int(col - offsets[variable[col]]) + 1, "column": int(col),
                        "estimate": float(est_pop[col]), "pooled_counts_mean": float(mean_pop[col]),
                        "pooled_counts_upper": float(upper_pop[col]), "count": float(pop_counts[col]),
                        "cluster_count": float(obs_pop[col])})
    out.sort(key=lambda f: -f["estimate"] / max(f["pooled_counts_mean"], 1e-300))
    return out


def describe_prior_dominated(findings: list[dict], labels=None, shown: int = 3) -> list[str]:
    """One warning line summarising the flagged estimates (all of them are in result.json)."""
    if not findings:
        return []

    def name(f):
        if labels is not None:
            v, m = labels[f["column"]]
            return f"{v} = {m}"
        return f"variable {f['variable']}, modality {f['modality']}"

    def where(f):
        return "the population" if f["cluster"] is None else f"cluster {f['cluster']}"

    examples = "; ".join(f"{where(f)}, {name(f)}: {f['estimate']:.2%} from the aggregated draws, "
                         f"{f['pooled_counts_mean']:.2%} from the pooled counts ({f['count']:.0f} of "
                         f"{f['cluster_count']:.0f} people)" for f in findings[:shown])
    return [f"{len(findings)} profile estimate(s) of rare modalities are dominated by the silos' fractionated "
            f"priors (averaging the silos' draws cannot reach a probability near zero when each silo holds "
            f"few members of the cluster), e.g. {examples}. Read these probabilities from the pooled counts "
            f"(all of them in diagnostics.prior_dominated of result.json)"]
