"""Counts a silo computes on its own rows for the federated-gradient strategy (docs/design.md §6.4-6.5, §7).

``soft_counts`` is the E-step of the latent class model at parameters chosen by the server: for each of the
M parameter draws it returns the responsibilities summed over rows (per cluster and per cluster-modality)
and the observed-data log-likelihood. ``hard_counts`` is the same table for a fixed partition (the
complete-data objective (a)). Both run INSIDE the silo; their outputs have no dimension equal to the
silo's row count, and their errors never contain data values.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vcmc.data.codes import check_codes
from vcmc.exceptions import DataError
from vcmc.model import one_hot_counts, profile_offsets


@njit(cache=True)
def _soft_counts_kernel(codes, offsets, log_pi, log_prof_t, cluster, modality_t, loglik):  # pragma: no cover
    # Hand-written because no library offers a fused E-step with summed responsibilities: one pass over
    # the rows per draw, O(M n C Q) time, O(C) scratch, and the (n, C) responsibility matrix is never
    # stored (a silo may hold 10^5-10^6 rows). Profiles come as (M, P, C) so the inner loop over
    # clusters is contiguous.
    m_draws, n_clusters = log_pi.shape
    n_rows, n_vars = codes.shape
    logs = np.empty(n_clusters)
    for m in range(m_draws):
        total = 0.0
        for i in range(n_rows):
            for c in range(n_clusters):
                logs[c] = log_pi[m, c]
            for q in range(n_vars):
                x = codes[i, q]
                if x != -1:
                    col = offsets[q] + x
                    for c in range(n_clusters):
                        logs[c] += log_prof_t[m, col, c]
            top = -np.inf
            for c in range(n_clusters):
                if logs[c] > top:
                    top = logs[c]
            if top == -np.inf:
                # the row is impossible under this draw: the likelihood is 0 and no count is defined
                total = -np.inf
                continue
            acc = 0.0
            for c in range(n_clusters):
                logs[c] = np.exp(logs[c] - top)
                acc += logs[c]
            total += top + np.log(acc)
            inv = 1.0 / acc
            for c in range(n_clusters):
                logs[c] *= inv
                cluster[m, c] += logs[c]
            for q in range(n_vars):
                x = codes[i, q]
                if x != -1:
                    col = offsets[q] + x
                    for c in range(n_clusters):
                        modality_t[m, col, c] += logs[c]
        loglik[m] = total


def soft_counts(codes, n_modalities, pi, profiles) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E-step soft counts and log-likelihood of a silo's rows at M parameter draws.

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        The silo's data, codes ``0..K^q-1`` and ``-1`` for a missing value (skipped).
    n_modalities : sequence of int
        ``K^q`` for each variable.
    pi : ndarray of shape (M, C)
        Mixture weights of each draw.
    profiles : ndarray of shape (M, C, P)
        Flat profiles of each draw (docs/design.md §1).

    Returns
    -------
    cluster : ndarray of shape (M, C)
        ``sum_i r_ic`` with ``r_ic = pi_c prod_q p^q_{x_iq,c} / sum_c' (same)``.
    modality : ndarray of shape (M, C, P)
        ``sum_i r_ic 1[x_iq = k]`` at column ``offsets[q] + k``.
    loglik : ndarray of shape (M,)
        Observed-data log-likelihood ``sum_i log sum_c pi_c prod_q p^q_{x_iq,c}`` (natural log).

    Notes
    -----
    Computed in log space with a log-sum-exp per row, so no product of Q probabilities can underflow.
    ``cluster[m].sum()`` equals the number of rows (every row's responsibilities sum to 1).
    """
    codes = check_codes(codes, n_modalities, dtype=np.int64)
    offsets = profile_offsets(n_modalities)
    pi = np.asarray(pi, dtype=np.float64)
    profiles = np.asarray(profiles, dtype=np.float64)
    if pi.ndim != 2 or profiles.ndim != 3 or profiles.shape[:2] != pi.shape \
            or profiles.shape[2] != offsets[-1]:
        raise DataError(f"pi must have shape (M, C) and profiles (M, C, {int(offsets[-1])}); "
                        f"got {pi.shape} and {profiles.shape}")
    m, c = pi.shape
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
        log_prof_t = np.ascontiguousarray(np.log(profiles).transpose(0, 2, 1))
    cluster = np.zeros((m, c))
    modality_t = np.zeros((m, int(offsets[-1]), c))
    loglik = np.zeros(m)
    _soft_counts_kernel(codes, offsets, np.ascontiguousarray(log_pi), log_prof_t, cluster, modality_t, loglik)
    return cluster, np.ascontiguousarray(modality_t.transpose(0, 2, 1)), loglik


def hard_counts(codes, n_modalities, labels, n_global: int) -> tuple[np.ndarray, np.ndarray]:
    """Cluster sizes and modality counts of a fixed partition (objective (a) of docs/design.md §6.4).

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
    n_modalities : sequence of int
    labels : ndarray of shape (n,), int
        Global cluster of each row, ``0..n_global-1`` (``-1``: row left out).
    n_global : int

    Returns
    -------
    cluster : ndarray of shape (C,), int
    modality : ndarray of shape (C, P), int
        Members of each cluster having each modality (missing values skipped).
    """
    codes = check_codes(codes, n_modalities, dtype=np.int64)
    labels = np.asarray(labels)
    if labels.shape != (codes.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"labels must be an integer array of shape ({codes.shape[0]},); "
                        f"got shape {labels.shape} and dtype {labels.dtype}")
    if labels.size and (labels.min() < -1 or labels.max() >= n_global):
        raise DataError(f"labels must lie in -1..{n_global - 1} (n_global={n_global})")
    kept = labels[labels >= 0]
    cluster = np.bincount(kept, minlength=n_global).astype(np.int64)
    modality = one_hot_counts(codes, labels, n_global, n_modalities)
    return cluster, modality
