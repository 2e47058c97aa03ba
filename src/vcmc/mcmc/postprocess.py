"""Post-processing of the relabelled local chains inside a silo (docs/design.md §4.2).

From the relabelled chains (``vcmc.mcmc.relabel``) this builds the ``LocalPosterior``:

* the local number of clusters ``K_s`` = posterior mode of the number of occupied components;
* the local partition: the modal relabelled allocation of every row (memory O(n C+)), or, for small
  silos, average linkage on ``1 - PSM`` cut at ``K_s`` (``partition="psm"``);
* the local clusters = components that own rows, renumbered ``0..K-1`` by decreasing size;
* label-consistent draws of (pi, p) of those clusters = the relabelled component draws;
* unresolved clusters: local clusters that the silo's own posterior cannot tell apart (the closeness test
  of ``vcmc.closeness``) are merged into one (``unresolved_groups``, ``merge_clusters``); this is the
  minimum local cluster size tied to what the silo's data can resolve;
* optionally a fixed minimum local cluster size: members of clusters below
  ``PostprocessConfig.threshold(n)`` are reallocated to their most probable remaining cluster
  (``reallocate_small_clusters``; off by default).

Weights of components that are not kept (they own no row under the partition, or were reallocated) are
handed to the kept clusters that received their members, in proportion to where those members went, and
the weights are then renormalised over the kept clusters. Why: the weight of a component estimates the
share of the population it explains; when its members are declared to belong to other clusters, that
share belongs to those clusters too, which keeps ``sum(pi) = 1`` without inflating every cluster equally.
Components that never held a row carry only prior mass and are dropped by the renormalisation.
The profiles of the kept clusters are not blended with those of merged components: the recipients'
profiles are estimated from many more members, and a blend would mix two different distributions.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.optimize import linear_sum_assignment

from vcmc.closeness import (
    DEFAULT_LEVEL,
    closeness_statistic,
    closeness_threshold,
    constrained_groups,
)
from vcmc.config import PostprocessConfig
from vcmc.exceptions import DataError
from vcmc.family import parameter_moments
from vcmc.mcmc.diagnostics import local_diagnostics
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.mcmc.relabel import RelabelledChain
from vcmc.model import log_likelihood_rows


def posterior_mode(values: np.ndarray) -> int:
    """Mode of an integer sample (ties go to the smaller value)."""
    values = np.asarray(values, dtype=np.int64).ravel()
    return int(np.argmax(np.bincount(values)))


def psm_partition(psm: np.ndarray, n_clusters: int) -> np.ndarray:
    """Partition from a posterior similarity matrix: average linkage on ``1 - PSM`` cut at ``n_clusters``.

    Parameters
    ----------
    psm : ndarray of shape (n, n)
        Posterior co-clustering probabilities (diagonal 1).
    n_clusters : int

    Returns
    -------
    ndarray of shape (n,), int
        Labels ``0..k-1`` (k <= n_clusters).
    """
    # Imported here: scipy.cluster is slow to import and only this optional estimator needs it.
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    n = psm.shape[0]
    if n == 1 or n_clusters <= 1:
        return np.zeros(n, dtype=np.int64)
    dist = 1.0 - np.asarray(psm, dtype=np.float64)
    np.fill_diagonal(dist, 0.0)
    dist = np.clip((dist + dist.T) / 2.0, 0.0, 1.0)
    tree = linkage(squareform(dist, checks=False), method="average")
    return fcluster(tree, t=n_clusters, criterion="maxclust").astype(np.int64) - 1


def _responsibilities(codes: np.ndarray, pi_draws: np.ndarray, profile_draws: np.ndarray,
                      n_modalities) -> np.ndarray:
    """Posterior allocation probabilities of rows under posterior-mean parameters, shape (n, K). With Gaussian
    items the parameter rows hold their means and variances after the profiles; the fallback weighs the
    categorical items alone (docs/design.md §17.8), so only the profiles' columns are read."""
    pi = pi_draws.mean(axis=0)
    pi = pi / pi.sum()
    p = int(np.sum(n_modalities))
    loglik = log_likelihood_rows(codes, pi, profile_draws[..., :p].mean(axis=0), n_modalities)
    loglik -= loglik.max(axis=1, keepdims=True)
    r = np.exp(loglik)
    return r / r.sum(axis=1, keepdims=True)


def _transfer_weights(pi_draws: np.ndarray, transfer: np.ndarray) -> np.ndarray:
    """``pi_draws @ transfer`` renormalised per draw (transfer rows: where a component's weight goes)."""
    out = pi_draws @ transfer
    total = out.sum(axis=1, keepdims=True)
    # A draw whose kept clusters carry no weight at all cannot happen with sampled Dirichlet weights
    # (every component has positive weight), but guard against 0/0.
    return out / np.where(total > 0, total, 1.0)


def _renumber_by_size(local: LocalPosterior) -> LocalPosterior:
    """Reorder local clusters by decreasing size (stable: ties keep their current order)."""
    sizes = np.bincount(local.partition, minlength=local.n_clusters)
    order = np.argsort(-sizes, kind="stable")
    if np.array_equal(order, np.arange(order.size)):
        return local
    new_label = np.empty_like(order)
    new_label[order] = np.arange(order.size)
    return dataclasses.replace(local, partition=new_label[local.partition],
                               membership=local.membership[:, order], pi_draws=local.pi_draws[:, order],
                               profile_draws=local.profile_draws[:, order])


def remove_clusters(local: LocalPosterior, codes: np.ndarray, remove: np.ndarray) -> LocalPosterior:
    """Remove the local clusters flagged in ``remove``; their members go to their most probable remaining one.

    A row's most probable remaining cluster is the largest share of kept iterations among the remaining
    clusters (``local.membership``); rows with no such share fall back to the likelihood under the
    posterior-mean parameters of the remaining clusters. The weights of removed clusters go to the clusters
    that received their members (in proportion to the members received) and are renormalised; remaining
    clusters are renumbered by decreasing size. When every cluster is flagged, the largest one is kept (a
    silo always has at least one cluster).

    Parameters
    ----------
    local : LocalPosterior
    codes : ndarray of shape (n, Q), int
        The silo's codes (row order of ``local.partition``); only used for the likelihood fallback.
    remove : ndarray of shape (K,), bool

    Returns
    -------
    LocalPosterior
        With ``n_reallocated`` increased by the number of rows moved.
    """
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[0] != local.partition.shape[0]:
        raise DataError(f"codes must have shape (n_rows, Q) with n_rows = {local.partition.shape[0]} "
                        f"(the rows of the local partition); got shape {codes.shape}")
    k = local.n_clusters
    sizes = np.bincount(local.partition, minlength=k)
    small = np.array(remove, dtype=bool, copy=True)
    if small.shape != (k,):
        raise DataError(f"remove must flag each of the {k} local clusters; got shape {small.shape}")
    if not small.any():
        return _renumber_by_size(local)
    if small.all():
        small[int(np.argmax(sizes))] = False   # keep the largest: a silo needs at least one cluster
    keep = np.flatnonzero(~small)
    new_index = np.full(k, -1, dtype=np.int64)
    new_index[keep] = np.arange(keep.size)

    partition = new_index[local.partition]
    membership = local.membership[:, keep]
    moved = partition < 0
    share = membership.sum(axis=1)
    need_lik = share <= 0
    if need_lik.any():
        resp = _responsibilities(codes[need_lik], local.pi_draws[:, keep], local.profile_draws[:, keep],
                                 local.n_modalities)
        membership = membership.copy()
        membership[need_lik] = resp
        share = membership.sum(axis=1)
    membership = membership / share[:, None]
    partition[moved] = np.argmax(membership[moved], axis=1)

    transfer = np.zeros((k, keep.size))
    transfer[keep, np.arange(keep.size)] = 1.0
    for l in np.flatnonzero(small):
        dest = np.bincount(partition[local.partition == l], minlength=keep.size)
        if dest.sum() > 0:
            transfer[l] = dest / dest.sum()
    pi_draws = _transfer_weights(local.pi_draws, transfer)
    out = dataclasses.replace(local, partition=partition, membership=membership, pi_draws=pi_draws,
                              profile_draws=local.profile_draws[:, keep],
                              n_reallocated=int(local.n_reallocated + np.count_nonzero(moved)))
    if local.diagnostics:
        # The weight diagnostics describe the clusters; refresh them for the remaining ones.
        out = dataclasses.replace(out, diagnostics={**local.diagnostics, **local_diagnostics(out)})
    return _renumber_by_size(out)


def reallocate_small_clusters(local: LocalPosterior, codes: np.ndarray, threshold: int) -> LocalPosterior:
    """Move the members of local clusters smaller than ``threshold`` to their most probable remaining one.

    ``remove_clusters`` with the clusters under the threshold (0 or 1: nothing changes). Used both for the
    fixed minimum local cluster size and, with its own threshold, by disclosure control.
    """
    sizes = np.bincount(local.partition, minlength=local.n_clusters)
    return remove_clusters(local, codes, sizes < threshold)


def unresolved_groups(local: LocalPosterior, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """Groups of local clusters that the silo's own posterior cannot tell apart.

    Clusters are grouped by the closeness test of ``vcmc.closeness`` (chi-square quantile ``level``) with
    the constraint that every two clusters of a group are close to each other.

    Returns
    -------
    ndarray of shape (K,), int
        Group of each local cluster, numbered ``0..G-1`` in order of first appearance.
    """
    k = local.n_clusters
    if k < 2 or local.profile_draws.shape[0] < 2:
        return np.arange(k, dtype=np.int64)
    mean, var = parameter_moments(local.profile_draws, local.n_modalities, local.n_gaussian)
    group = constrained_groups(closeness_statistic(mean, var), closeness_threshold(mean.shape[1], level),
                               np.zeros(k, dtype=np.int64))
    _, first, dense = np.unique(group, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[dense]


def merge_clusters(local: LocalPosterior, group: np.ndarray) -> LocalPosterior:
    """Merge the local clusters of each group into one: members keep together, weights add up and each
    draw's profile is the weight-averaged profile of the merged clusters (the exact mixture-of-two
    profile, as matched draws combine clusters of one silo). Clusters are renumbered by decreasing size.
    """
    group = np.asarray(group, dtype=np.int64)
    k, g = local.n_clusters, int(group.max()) + 1
    if g == k:
        return _renumber_by_size(local)
    onehot = np.zeros((k, g))
    onehot[np.arange(k), group] = 1.0
    pi = local.pi_draws @ onehot                                              # (T, G)
    num = np.einsum("tk,tkp,kg->tgp", local.pi_draws, local.profile_draws, onehot)
    with np.errstate(invalid="ignore", divide="ignore"):
        prof = num / pi[:, :, None]
    if local.n_gaussian:
        # the Gaussian items' variances of the merged mixture: its second moment less its squared mean (§17.6)
        g = local.n_gaussian
        mu, var = local.profile_draws[:, :, -2 * g:-g], local.profile_draws[:, :, -g:]
        with np.errstate(invalid="ignore", divide="ignore"):
            second = np.einsum("tk,tkj,kg->tgj", local.pi_draws, var + mu * mu, onehot) / pi[:, :, None]
        prof[:, :, -g:] = second - prof[:, :, -2 * g:-g] ** 2
    zero = ~np.isfinite(prof).all(axis=2)                                     # a weight that underflowed to 0
    if zero.any():
        plain = np.einsum("tkp,kg->tgp", local.profile_draws, onehot) / onehot.sum(axis=0)[None, :, None]
        prof[zero] = plain[zero]
    out = dataclasses.replace(local, partition=group[local.partition], membership=local.membership @ onehot,
                              pi_draws=pi, profile_draws=prof)
    if local.diagnostics:
        out = dataclasses.replace(out, diagnostics={**local.diagnostics, **local_diagnostics(out)})
    return _renumber_by_size(out)


def build_local_posterior(chains: list[RelabelledChain], codes: np.ndarray, n_modalities, *,
                          n_components: int, postprocess: PostprocessConfig | None = None,
                          n_gaussian: int = 0) -> LocalPosterior:
    """Turn aligned relabelled chains into the silo's ``LocalPosterior`` (docs/design.md §4.2).

    Parameters
    ----------
    chains : list of RelabelledChain
        Chains already aligned to one another (``vcmc.mcmc.relabel.align_chains``), equal lengths.
    codes : ndarray of shape (n, Q), int
    n_modalities : sequence of int
    n_components : int
        C+.
    postprocess : PostprocessConfig
    n_gaussian : int
        G, the Gaussian items whose means and variances follow the profiles in every parameter row (§17.3). The
        likelihood fallback of a row no kept draw placed in a kept cluster uses the categorical items only.

    Returns
    -------
    LocalPosterior
        Without diagnostics (``vcmc.mcmc.apply.run_apply_step`` adds them).
    """
    postprocess = PostprocessConfig() if postprocess is None else postprocess
    codes = np.asarray(codes)
    n = codes.shape[0]
    counts = np.zeros((n, n_components), dtype=np.int64)
    for ch in chains:
        counts += ch.counts
    # one chain (the default): its draws as they are, not a copy of 190 MB at the paper's protocol
    pi_all = chains[0].pi if len(chains) == 1 else np.concatenate([ch.pi for ch in chains])
    prof_all = chains[0].profiles if len(chains) == 1 else np.concatenate([ch.profiles for ch in chains])
    n_occupied = np.stack([ch.n_occupied for ch in chains])
    log_posterior = np.stack([ch.log_posterior for ch in chains])
    k_hat = posterior_mode(n_occupied)

    if postprocess.partition == "psm":
        psm = sum(ch.psm for ch in chains if ch.psm is not None)
        if not isinstance(psm, np.ndarray):
            raise ValueError("partition='psm' needs chains relabelled with accumulate_psm=True")
        groups = psm_partition(psm / pi_all.shape[0], k_hat)
        # Each PSM cluster takes the component its members occupy most often (one component per
        # cluster, by linear assignment), so the label-consistent draws of that component describe it.
        n_groups = int(groups.max()) + 1
        overlap = np.zeros((n_groups, n_components))
        np.add.at(overlap, groups, counts)
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        comp_of_group = np.empty(n_groups, dtype=np.int64)
        comp_of_group[rows] = cols
        component = comp_of_group[groups]
    else:
        component = np.argmax(counts, axis=1)

    owned = np.unique(component)
    local_of_comp = np.full(n_components, -1, dtype=np.int64)
    local_of_comp[owned] = np.arange(owned.size)
    partition = local_of_comp[component]

    # Weight of components owning no row goes where their allocations went (module docstring).
    transfer = np.zeros((n_components, owned.size))
    transfer[owned, np.arange(owned.size)] = 1.0
    dropped = np.setdiff1d(np.arange(n_components), owned)
    if dropped.size:
        onehot = np.zeros((n, owned.size))
        onehot[np.arange(n), partition] = 1.0
        dest = counts[:, dropped].T.astype(np.float64) @ onehot     # (dropped, K): allocations landing in l
        tot = dest.sum(axis=1, keepdims=True)
        transfer[dropped] = np.where(tot > 0, dest / np.where(tot > 0, tot, 1.0), 0.0)
    pi_draws = _transfer_weights(pi_all, transfer)

    membership = counts[:, owned].astype(np.float64)
    share = membership.sum(axis=1)
    need_lik = share <= 0
    if need_lik.any():
        membership[need_lik] = _responsibilities(codes[need_lik], pi_draws, prof_all[:, owned], n_modalities)
        share = membership.sum(axis=1)
    membership /= share[:, None]

    local = LocalPosterior(partition=partition, membership=membership, pi_draws=pi_draws,
                           profile_draws=prof_all[:, owned], n_occupied=n_occupied,
                           log_posterior=log_posterior, n_modalities=tuple(int(k) for k in n_modalities),
                           n_components=int(n_components), n_gaussian=int(n_gaussian))
    threshold = postprocess.threshold(n)
    if threshold > 1:
        local = reallocate_small_clusters(local, codes, threshold)
    if postprocess.merge_unresolved:
        local = merge_clusters(local, unresolved_groups(local, postprocess.resolution_level))
    return _renumber_by_size(local)

