"""Posterior closeness of two clusters: the statistic shared by the silo's post-processing and the matching.

Two local clusters ``a`` and ``b`` (of one silo or of two) are *close* when their profiles could be the same
given how well each posterior knows them. With ``m`` and ``v`` the posterior mean and variance of each
matching coordinate (every variable block of the profile without its last entry, ``D = sum_q (K^q - 1)``
coordinates, the coordinates of Ball matching), the statistic is

    T(a, b) = sum_d (m_a,d - m_b,d)^2 / (v_a,d + v_b,d)

Under the hypothesis that ``a`` and ``b`` describe one profile, with independent and approximately normal
posteriors (the Bernstein-von Mises regime of the exact conjugate posterior of a cluster given its
members), ``E[T] = D`` and ``T`` is approximately chi-square with ``D`` degrees of freedom, so the pair is
linked when ``T <= chi2_D.ppf(level)``. Unlike the paper's radius ``(log n / n)^(1/4)`` (a rate that does
not grow with ``D``, while the distance between two noisy estimates of one profile grows like sqrt(D)),
this rule scales with the dimension and with each cluster's own uncertainty: a cluster of 30 people is
close to more clusters than one of 3,000, a wide profile needs a larger distance than a short one.

Linked pairs are grouped by ``constrained_groups``: single linkage in increasing order of ``T`` with a
cannot-link constraint, so two clusters of one silo end up in one group only if they are themselves
linked. A silo's own posterior keeping two of its clusters apart is evidence that they differ; without the
constraint a poorly known cluster close to two distinct ones would chain them together (measured in
docs/results/generalisation/README.md).

This module is a leaf shared by both sides of the silo boundary: it imports nothing of either.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vcmc.model import profile_offsets

__all__ = ["DEFAULT_LEVEL", "closeness_statistic", "closeness_threshold", "constrained_groups",
           "coordinate_columns", "posterior_moments"]

#: Default quantile of the chi-square closeness test (matching and the silo's resolution rule). Two estimates
#: of one profile are left apart with probability 1 - level per pair; with up to ~10^5 pairs of local
#: clusters (30 silos x 10 clusters) 1e-6 keeps the expected number of such false splits below 0.1, and it
#: absorbs the small systematic differences between two silos' estimates of a large cluster (each silo's
#: estimate is biased a little by its own other clusters), which a sampling-only variance does not cover.
#: Higher levels gave the same or better ARI and K on every design of the generalisation suite and the
#: paper's scenarios (docs/results/generalisation/README.md, "level").
DEFAULT_LEVEL = 0.999999
# Variance floor: a coordinate that both posteriors pin to the same value (a modality never observed in
# two huge clusters) contributes 0/0; the floor turns it into 0 instead of NaN.
_VAR_FLOOR = 1e-12
# Elements of one (rows x columns x D) block of the pairwise computation: bounds memory to ~32 MB.
_BLOCK_ELEMENTS = 4_000_000


def coordinate_columns(n_modalities) -> np.ndarray:
    """Boolean mask of the profile columns used as coordinates: each variable block without its last entry."""
    offsets = profile_offsets(n_modalities)
    keep = np.ones(int(offsets[-1]), dtype=bool)
    keep[offsets[1:] - 1] = False
    return keep


def posterior_moments(profile_draws: np.ndarray, n_modalities) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of every cluster's matching coordinates.

    Parameters
    ----------
    profile_draws : ndarray of shape (T, K, P)
        Label-consistent profile draws of K clusters (T >= 2).
    n_modalities : sequence of int

    Returns
    -------
    mean, var : ndarray of shape (K, D)
    """
    draws = np.asarray(profile_draws)
    keep = coordinate_columns(n_modalities)
    # moments over the draws first, then the column selection: no (T, K, D) copy of the draws
    mean = draws.mean(axis=0)[:, keep]
    var = draws.var(axis=0, ddof=1)[:, keep] if draws.shape[0] > 1 else np.zeros_like(mean)
    return mean, var


def closeness_statistic(mean_a: np.ndarray, var_a: np.ndarray, mean_b: np.ndarray | None = None,
                        var_b: np.ndarray | None = None) -> np.ndarray:
    """Pairwise ``T(a, b)`` between the rows of two sets of posterior moments (module docstring).

    Parameters
    ----------
    mean_a, var_a : ndarray of shape (N, D)
    mean_b, var_b : ndarray of shape (M, D), optional
        Default: the first set (a symmetric N x N matrix with a zero diagonal).

    Returns
    -------
    ndarray of shape (N, M)
    """
    ma, va = np.asarray(mean_a, dtype=np.float64), np.asarray(var_a, dtype=np.float64)
    mb = ma if mean_b is None else np.asarray(mean_b, dtype=np.float64)
    vb = va if var_b is None else np.asarray(var_b, dtype=np.float64)
    n, d = ma.shape
    out = np.empty((n, mb.shape[0]))
    step = max(1, _BLOCK_ELEMENTS // max(1, mb.shape[0] * d))
    for lo in range(0, n, step):          # blocks of rows: memory O(step x M x D), not O(N x M x D)
        hi = min(n, lo + step)
        diff2 = (ma[lo:hi, None, :] - mb[None, :, :]) ** 2
        out[lo:hi] = np.sum(diff2 / np.maximum(va[lo:hi, None, :] + vb[None, :, :], _VAR_FLOOR), axis=2)
    return out


def closeness_threshold(n_coordinates: int, level: float = DEFAULT_LEVEL) -> float:
    """``chi2.ppf(level, D)``: pairs with ``T`` at or below it are close."""
    # imported here: this module's DEFAULT_LEVEL is read by the config classes, which the command line
    # imports before it checks its arguments, and scipy.stats costs seconds to import on a busy machine
    from scipy.stats import chi2

    return float(chi2.ppf(level, max(int(n_coordinates), 1)))


def constrained_groups(statistic: np.ndarray, threshold: float, silo_index: Sequence[int],
                       tie_rank: Sequence[int] | None = None) -> np.ndarray:
    """Groups of close clusters: single linkage by increasing ``T``, never joining two unlinked clusters
    of one silo.

    Pairs with ``T <= threshold`` are taken in increasing order of ``T``; a pair joins the groups of its two
    clusters unless the union would hold two clusters of the same silo that are not themselves linked.

    Parameters
    ----------
    statistic : ndarray of shape (N, N)
        Symmetric ``T`` between the N clusters.
    threshold : float
    silo_index : sequence of int, length N
        Silo of each cluster (all equal inside one silo).
    tie_rank : sequence of int, length N, optional
        Rank of each cluster used to break ties between equal ``T`` (e.g. its rank by silo name and local
        index), so that the groups do not depend on the order in which clusters are listed.

    Returns
    -------
    ndarray of shape (N,), int
        Group id of each cluster (ids are arbitrary; ``vcmc.matching`` numbers them canonically).

    Notes
    -----
    Hand-written union-find: scipy's ``connected_components`` and hierarchical clustering have no
    cannot-link constraint. The loop runs over linked pairs only (about (copies per cluster)^2 per true
    cluster), and each union checks the linked status of the same-silo pairs it would create.
    """
    t = np.asarray(statistic, dtype=np.float64)
    silo = np.asarray(silo_index, dtype=np.int64)
    n = t.shape[0]
    linked = t <= threshold
    np.fill_diagonal(linked, True)
    rank = np.arange(n) if tie_rank is None else np.asarray(tie_rank, dtype=np.int64)
    iu, ju = np.nonzero(np.triu(linked, 1))
    lo, hi = np.minimum(rank[iu], rank[ju]), np.maximum(rank[iu], rank[ju])
    edges = np.lexsort((hi, lo, t[iu, ju]))
    parent = np.arange(n)
    members: dict[int, dict[int, list[int]]] = {i: {int(silo[i]): [i]} for i in range(n)}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    for e in edges:
        a, b = find(int(iu[e])), find(int(ju[e]))
        if a == b:
            continue
        ga, gb = members[a], members[b]
        if any(s in ga and not linked[np.ix_(ga[s], gb[s])].all() for s in gb):
            continue
        if sum(map(len, ga.values())) < sum(map(len, gb.values())):
            a, b, ga, gb = b, a, gb, ga
        parent[b] = a
        for s, idx in gb.items():
            ga.setdefault(s, []).extend(idx)
        del members[b]
    return np.array([find(i) for i in range(n)], dtype=np.int64)
