"""Evaluation metrics of the simulation study (docs/design.md §9).

ARI (scikit-learn), variation of information (Meila 2003, base selectable), relative bias, 95% coverage,
alignment of estimated to true clusters by a Hungarian assignment on the confusion matrix (section 9.2),
the correct-matching criterion of Table 2 (section 9.1) and the true-value bins of Table 5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import entropy
from sklearn.metrics import adjusted_rand_score, mutual_info_score

from vcmc.exceptions import ConfigError, DataError

__all__ = ["P_BIN_EDGES", "P_BIN_LABELS", "adjusted_rand_index", "align_clusters", "best_f1", "confusion_matrix",
           "correct_matching", "coverage", "majority_pieces", "p_value_bins", "relative_bias",
           "variation_of_information"]

#: Table 5 bins of the true value of p^q_{k,c}: <1e-4, [1e-4,.1), [.1,.5), [.5,.9), [.9,.9999), >=.9999.
P_BIN_EDGES: tuple[float, ...] = (1e-4, 0.1, 0.5, 0.9, 0.9999)
P_BIN_LABELS: tuple[str, ...] = ("<1e-4", "[1e-4,0.1)", "[0.1,0.5)", "[0.5,0.9)", "[0.9,0.9999)", ">=0.9999")


def _two_partitions(a, b, where: str) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a).ravel()
    b = np.asarray(b).ravel()
    if a.shape != b.shape:
        raise DataError(f"{where}: the two partitions must label the same individuals; got {a.size} and "
                        f"{b.size} labels.")
    if a.size == 0:
        raise DataError(f"{where}: expected at least one labelled individual; got none.")
    return a, b


def adjusted_rand_index(a, b) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985) of two partitions of the same individuals.

    Thin wrapper of :func:`sklearn.metrics.adjusted_rand_score` (docs/design.md §9.1); label values are arbitrary.

    Parameters
    ----------
    a, b : array_like of shape (n,)
        Cluster labels.

    Returns
    -------
    float
        1 for identical partitions, about 0 for independent ones.
    """
    a, b = _two_partitions(a, b, "adjusted_rand_index")
    return float(adjusted_rand_score(a, b))


def variation_of_information(a, b, *, base=np.e) -> float:
    """Variation of information ``VI = H(U) + H(V) - 2 I(U; V)`` (Meila 2003; docs/design.md §9.1).

    Parameters
    ----------
    a, b : array_like of shape (n,)
        Cluster labels.
    base : float
        Logarithm base: ``e`` (nats, default) or ``2`` (bits, as ``mcclust::vi.dist``).

    Returns
    -------
    float
        In ``[0, log_base n]``; 0 exactly when the partitions are equal up to relabelling.
    """
    a, b = _two_partitions(a, b, "variation_of_information")
    base = float(base)
    if not np.isfinite(base) or base <= 0 or base == 1:
        raise ConfigError(f"The 'base' parameter of variation_of_information must be a positive number other "
                          f"than 1. Got {base!r} instead.")
    _, ca = np.unique(a, return_counts=True)
    _, cb = np.unique(b, return_counts=True)
    # entropy() normalises counts to proportions; mutual_info_score uses natural logs.
    vi = entropy(ca) + entropy(cb) - 2.0 * mutual_info_score(a, b)
    return float(max(vi, 0.0) / np.log(base))


def relative_bias(estimate, truth) -> np.ndarray:
    """Elementwise relative error ``(estimate - truth) / truth`` (docs/design.md §9.1).

    Average it over datasets (axis 0) for the paper's empirical relative bias. A zero true value gives
    ``inf``/``nan``: the paper's Table 5 puts such entries in their own bin (:func:`p_value_bins`).

    Parameters
    ----------
    estimate, truth : array_like
        Broadcastable arrays.

    Returns
    -------
    numpy.ndarray of float
    """
    est = np.asarray(estimate, dtype=np.float64)
    tru = np.asarray(truth, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (est - tru) / tru


def coverage(lower, upper, truth) -> np.ndarray:
    """Elementwise ``lower <= truth <= upper`` (the 95% coverage indicator, docs/design.md §9.1).

    The coverage rate is the mean of this indicator over datasets. NaN bounds (e.g. a true cluster left
    unmatched) give False.

    Parameters
    ----------
    lower, upper, truth : array_like
        Broadcastable arrays: credible interval bounds and true values.

    Returns
    -------
    numpy.ndarray of bool
    """
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    t = np.asarray(truth, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        if np.any(lo > hi):
            raise DataError("coverage: every lower bound must be <= its upper bound; got lower > upper at "
                            f"{int(np.sum(lo > hi))} position(s).")
        return (lo <= t) & (t <= hi)


def confusion_matrix(estimated_labels, true_labels, n_estimated=None, n_true=None) -> np.ndarray:
    """Counts ``M[c, k]`` of individuals in true cluster ``c`` and estimated cluster ``k``.

    Labels are 0-based integers; rows with a negative label (unassigned) are left out.

    Returns
    -------
    numpy.ndarray of shape (n_true, n_estimated), int64
    """
    est, tru = _two_partitions(estimated_labels, true_labels, "confusion_matrix")
    if not (np.issubdtype(est.dtype, np.integer) and np.issubdtype(tru.dtype, np.integer)):
        raise DataError("confusion_matrix: labels must be integers 0..C-1 (negative = unassigned); "
                        f"got dtypes {est.dtype} and {tru.dtype}.")
    keep = (est >= 0) & (tru >= 0)
    est, tru = est[keep].astype(np.int64), tru[keep].astype(np.int64)
    ne = int(n_estimated) if n_estimated is not None else int(est.max(initial=-1)) + 1
    nt = int(n_true) if n_true is not None else int(tru.max(initial=-1)) + 1
    if est.size and est.max() >= ne:
        raise DataError(f"confusion_matrix: estimated labels reach {est.max()}; expected < n_estimated={ne}.")
    if tru.size and tru.max() >= nt:
        raise DataError(f"confusion_matrix: true labels reach {tru.max()}; expected < n_true={nt}.")
    return np.bincount(tru * ne + est, minlength=nt * ne).reshape(nt, ne)


def best_f1(estimated_labels, true_labels, n_estimated=None, n_true=None) -> np.ndarray:
    """Recovery of every true cluster: the best F1 score of its members against any estimated cluster.

    ``F1(t, g) = 2 |t & g| / (|t| + |g|)``; a true cluster is usually called recovered when its best F1 is
    at least 0.8. Unlike the ARI, which large clusters dominate, this scores each cluster on its own.

    Returns
    -------
    ndarray of shape (n_true,)
        0 for a true cluster without members.
    """
    m = confusion_matrix(estimated_labels, true_labels, n_estimated, n_true).T.astype(np.float64)  # (E, T)
    size_est = m.sum(axis=1)[:, None]
    size_true = m.sum(axis=0)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(size_est + size_true > 0, 2.0 * m / (size_est + size_true), 0.0)
    return f1.max(axis=0) if f1.shape[0] else np.zeros(m.shape[1])


def majority_pieces(estimated_labels, true_labels, n_estimated=None, n_true=None) -> np.ndarray:
    """For every true cluster, the number of estimated clusters whose members are mostly from it.

    More than one means the true cluster is cut into pieces (fragments); ties go to the smaller true label.

    Returns
    -------
    ndarray of shape (n_true,), int
    """
    m = confusion_matrix(estimated_labels, true_labels, n_estimated, n_true).T                    # (E, T)
    nonempty = m.sum(axis=1) > 0
    majority = np.argmax(m[nonempty], axis=1)
    return np.bincount(majority, minlength=m.shape[1]).astype(np.int64)


def align_clusters(estimated_labels, true_labels, n_estimated=None, n_true=None) -> np.ndarray:
    """Estimated cluster aligned to each true cluster (docs/design.md §9.2).

    A Hungarian assignment (:func:`scipy.optimize.linear_sum_assignment`) on the true x estimated confusion
    matrix maximises the number of individuals on matched pairs. Estimated clusters left over (more
    estimated than true clusters) are ignored; a true cluster matched to nothing, or only to an estimated
    cluster it shares no individual with, is unmatched (-1).

    Parameters
    ----------
    estimated_labels, true_labels : array_like of int, shape (n,)
        0-based labels; negative = unassigned (left out).
    n_estimated, n_true : int, optional
        Numbers of clusters (default: largest label + 1), so that empty clusters keep their index.

    Returns
    -------
    numpy.ndarray of shape (n_true,), int64
        ``out[c]`` = estimated cluster aligned to true cluster ``c``, or -1.
    """
    m = confusion_matrix(estimated_labels, true_labels, n_estimated, n_true)
    out = np.full(m.shape[0], -1, dtype=np.int64)
    if m.size == 0:
        return out
    rows, cols = linear_sum_assignment(m, maximize=True)
    ok = m[rows, cols] > 0
    out[rows[ok]] = cols[ok]
    return out


def correct_matching(local_labels: Sequence, true_labels: Sequence, assignment, n_true=None) -> bool:
    """Whether a matching of local clusters is correct (Table 2 criterion, docs/design.md §9.1).

    Each non-empty local cluster (s, l) gets the identity tau(s, l) = the majority true label of its
    members. The matching is correct iff (1) two local clusters, same silo included, share a global cluster
    exactly when they share an identity, and (2) the number of global clusters equals the true number.

    Parameters
    ----------
    local_labels : sequence of array_like of int
        Per silo, the local cluster (0-based) of each row.
    true_labels : sequence of array_like of int
        Per silo, the true cluster of each row.
    assignment : sequence of array_like of int, or a ``vcmc.matching.Matching``
        ``assignment[s][l]`` = global cluster of local cluster ``l`` of silo ``s``.
    n_true : int, optional
        True number of clusters (default: the number of distinct true labels over all silos).

    Returns
    -------
    bool
    """
    assign = getattr(assignment, "assignment", assignment)
    if not (len(local_labels) == len(true_labels) == len(assign)):
        raise DataError(f"correct_matching: expected one entry per silo in local_labels, true_labels and "
                        f"assignment; got {len(local_labels)}, {len(true_labels)} and {len(assign)}.")
    taus, globs = [], []
    for s, (loc, tru, a) in enumerate(zip(local_labels, true_labels, assign, strict=True)):
        loc, tru = _two_partitions(loc, tru, f"correct_matching (silo {s})")
        a = np.asarray(a, dtype=np.int64)
        m = confusion_matrix(loc, tru, n_estimated=max(a.size, int(np.max(loc)) + 1))
        present = np.flatnonzero(m.sum(axis=0) > 0)
        if present.size and present.max() >= a.size:
            raise DataError(f"correct_matching: silo {s} has local cluster {present.max()} but its "
                            f"assignment covers only {a.size} local clusters.")
        taus.append(np.argmax(m[:, present], axis=0))
        globs.append(a[present])
    tau = np.concatenate(taus)
    glob = np.concatenate(globs)
    same_tau = tau[:, None] == tau[None, :]
    same_glob = glob[:, None] == glob[None, :]
    if n_true is None:
        n_true = np.unique(np.concatenate([np.asarray(t).ravel() for t in true_labels])).size
    return bool(np.array_equal(same_tau, same_glob) and np.unique(glob).size == int(n_true))


def p_value_bins(values) -> np.ndarray:
    """Table 5 bin (0..5) of each true probability: <1e-4, [1e-4,.1), [.1,.5), [.5,.9), [.9,.9999), >=.9999.

    Parameters
    ----------
    values : array_like
        True values of p^q_{k,c}.

    Returns
    -------
    numpy.ndarray of int64, same shape
        Index into :data:`P_BIN_LABELS`.
    """
    return np.digitize(np.asarray(values, dtype=np.float64), P_BIN_EDGES, right=False).astype(np.int64)
