"""Evaluation of a matching against known truth (docs/design.md §9.1) and the Appendix A setting.

"Correct matching recovered": give each local cluster (s, l) the identity ``tau(s, l)``, the majority true
label of its members; the matching is correct iff two local clusters share a global cluster exactly when
they share an identity (same silo included) and the number of global clusters equals the true number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sklearn.metrics import adjusted_rand_score

from vcmc._rng import spawn_generators
from vcmc.config import PriorConfig
from vcmc.exceptions import DataError
from vcmc.matching.types import Matching
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.protocol import DivergenceReply, DivergenceRequest, SiloSummary
from vcmc.research.study.oracle import oracle_posterior_and_summary

__all__ = ["in_process_divergence", "local_cluster_identity", "correct_matching", "propagated_partition",
           "evaluate_matching", "appendix_a_silos", "propagate_in_silo"]


def _as_label_lists(local_labels, true_labels):
    local = [np.asarray(a, dtype=np.int64) for a in local_labels]
    true = [np.asarray(a, dtype=np.int64) for a in true_labels]
    if len(local) != len(true):
        raise DataError(f"local_labels has {len(local)} silos but true_labels has {len(true)}")
    for s, (a, b) in enumerate(zip(local, true, strict=True)):
        if a.shape != b.shape or a.ndim != 1:
            raise DataError(f"silo {s}: local and true labels must be 1-D of equal length; got {a.shape} and "
                            f"{b.shape}")
        if a.size and a.min() < 0:
            raise DataError(f"silo {s}: local labels must be non-negative")
    return local, true


def local_cluster_identity(labels_local: Sequence[np.ndarray], labels_true: Sequence[np.ndarray], *,
                           n_clusters: Sequence[int] | None = None) -> list[np.ndarray]:
    """Majority true label of every local cluster of every silo (docs/design.md §9.1).

    Parameters
    ----------
    labels_local, labels_true : sequence of ndarray of shape (n_s,)
        Local and true labels of each silo's rows.
    n_clusters : sequence of int, optional
        Local clusters per silo (default: largest local label + 1).

    Returns
    -------
    list of ndarray of shape (K_s,)
        ``tau(s, l)``; ties go to the smallest true label; -1 for a local cluster without members.
    """
    local, true = _as_label_lists(labels_local, labels_true)
    out = []
    for s, (a, b) in enumerate(zip(local, true, strict=True)):
        k = int(n_clusters[s]) if n_clusters is not None else (int(a.max()) + 1 if a.size else 0)
        if a.size and a.max() >= k:
            raise DataError(f"silo {s}: local label {int(a.max())} exceeds its {k} local clusters")
        values, tcode = np.unique(b, return_inverse=True)
        table = np.zeros((k, max(values.size, 1)), dtype=np.int64)
        np.add.at(table, (a, tcode), 1)
        ident = np.where(table.sum(axis=1) > 0, values[np.argmax(table, axis=1)] if values.size else -1, -1)
        out.append(ident.astype(np.int64))
    return out


def correct_matching(matching: Matching, local_labels: Sequence[np.ndarray],
                     true_labels: Sequence[np.ndarray], n_true: int) -> bool:
    """Whether ``matching`` is the correct matching of docs/design.md §9.1.

    Correct iff (1) two local clusters (any silos, same silo included) share a global cluster exactly when
    they share their majority true label, and (2) ``matching.n_global == n_true``. Local clusters without
    members carry no identity and make the matching incorrect only through (2).
    """
    k = [a.size for a in matching.assignment]
    tau = np.concatenate(local_cluster_identity(local_labels, true_labels, n_clusters=k))
    glob = np.concatenate(matching.assignment)
    if matching.n_global != int(n_true):
        return False
    keep = tau >= 0
    tau, glob = tau[keep], glob[keep]
    # same global <=> same identity: the pairs (global, identity) form a bijection
    pairs = np.unique(np.stack([glob, tau], axis=1), axis=0)
    return bool(np.unique(pairs[:, 0]).size == pairs.shape[0] == np.unique(pairs[:, 1]).size)


def propagated_partition(matching: Matching, local_labels: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Global label of every row: each silo relabels its own rows through the matching (docs/design.md §5)."""
    if len(local_labels) != len(matching.assignment):
        raise DataError(f"local_labels has {len(local_labels)} silos but the matching has "
                        f"{len(matching.assignment)}")
    out = []
    for s, lab in enumerate(local_labels):
        lab = np.asarray(lab, dtype=np.int64)
        k = matching.assignment[s].size
        if lab.size and (lab.min() < 0 or lab.max() >= k):
            raise DataError(f"silo {matching.silos[s]!r}: local labels must lie in 0..{k - 1}")
        out.append(matching.relabel(s, lab))
    return out


def propagate_in_silo(partition: np.ndarray, assignment: np.ndarray,
                      n_global: int) -> tuple[np.ndarray, np.ndarray]:
    """Silo side of the global partition: relabel the silo's own rows, return (labels, counts).

    Only ``counts`` (members of each global cluster, shape (C,)) leaves the silo; the labels stay there.
    """
    partition = np.asarray(partition, dtype=np.int64)
    assignment = np.asarray(assignment, dtype=np.int64)
    if partition.size and (partition.min() < 0 or partition.max() >= assignment.size):
        raise DataError(f"the local partition uses labels outside 0..{assignment.size - 1}")
    if assignment.size and (assignment.min() < 0 or assignment.max() >= int(n_global)):
        raise DataError(f"the assignment maps to global clusters outside 0..{int(n_global) - 1}")
    labels = assignment[partition]
    return labels, np.bincount(labels, minlength=int(n_global)).astype(np.int64)


def evaluate_matching(matching: Matching, local_labels: Sequence[np.ndarray],
                      true_labels: Sequence[np.ndarray]) -> dict:
    """Correct matching (docs/design.md §9.1), ARI of the propagated partition on all silos pooled, and C.

    Returns
    -------
    dict
        ``{"correct": bool, "ari": float, "n_global": int}``; the true number of clusters is the number
        of distinct true labels over all silos.
    """
    local, true = _as_label_lists(local_labels, true_labels)
    n_true = int(np.unique(np.concatenate(true)).size)
    glob = np.concatenate(propagated_partition(matching, local))
    return {"correct": correct_matching(matching, local, true, n_true),
            "ari": float(adjusted_rand_score(np.concatenate(true), glob)),
            "n_global": int(matching.n_global)}


def appendix_a_silos(codes: Sequence[np.ndarray], labels: Sequence[np.ndarray], n_modalities, *,
                     prior: PriorConfig | None = None, n_draws: int = 200, names: Sequence[str] | None = None,
                     rng=None) -> tuple[list[SiloSummary], list[LocalPosterior], list[np.ndarray]]:
    """Oracle summaries with local partitions set to the truth (the paper's Appendix A setting).

    Parameters
    ----------
    codes, labels : sequence of ndarray
        Each silo's data and true labels.
    n_modalities : sequence of int
    prior : PriorConfig, optional
        Default ``PriorConfig()`` (fractionated over the number of silos).
    n_draws : int, default 200
    names : sequence of str, optional
        Silo names (default ``"silo_1"``, ``"silo_2"``, ...).
    rng : int, Generator or None
        One independent stream per silo is spawned from it.

    Returns
    -------
    summaries : list of SiloSummary
    locals : list of LocalPosterior
        Kept by the silos (for minimum-divergence requests).
    local_labels : list of ndarray
        Each silo's local partition (true labels renumbered 0..K_s-1).
    """
    prior = PriorConfig() if prior is None else prior
    n = len(codes)
    names = [f"silo_{i + 1}" for i in range(n)] if names is None else list(names)
    gens = spawn_generators(rng, n)
    summaries, locals_, local_labels = [], [], []
    for x, y, name, g in zip(codes, labels, names, gens, strict=True):
        local, summ = oracle_posterior_and_summary(x, n_modalities, y, silo=name, prior=prior, n_silos=n,
                                                   n_draws=n_draws, rng=g)
        summaries.append(summ)
        locals_.append(local)
        local_labels.append(local.partition)
    return summaries, locals_, local_labels


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
    from vcmc.rows.divergence import divergence_cost

    data = list(silos)

    def route(silo_index: int, request: DivergenceRequest) -> DivergenceReply:
        if encode:
            request = DivergenceRequest.from_arrays(request.to_arrays())
        codes, local = data[silo_index]
        reply = DivergenceReply(cost=divergence_cost(codes, n_modalities, local, request.reference_pi,
                                                     request.reference_profiles, rule=request.rule,
                                                     penalty_multiplier=float(request.penalty_multiplier)))
        return DivergenceReply.from_arrays(reply.to_arrays()) if encode else reply

    return route
