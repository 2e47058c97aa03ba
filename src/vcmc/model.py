"""The over-fitted latent class model: layout of the parameters, priors and prior fractionation.

Parameters of one component ``c`` are stored as a flat row of ``P = sum_q K^q`` probabilities: the
columns ``offsets[q]:offsets[q + 1]`` hold ``p^q_{., c}`` (docs/design.md §1). Data are integer codes
``0..K^q - 1`` with ``MISSING`` (-1) for a missing value.
"""

from __future__ import annotations

import numpy as np

MISSING = -1


def profile_offsets(n_modalities) -> np.ndarray:
    """Column offsets of each variable's block in a flat profile row, shape (Q + 1,)."""
    k = np.asarray(n_modalities, dtype=np.int64)
    return np.concatenate([[0], np.cumsum(k)]).astype(np.int64)


def variable_of_column(n_modalities) -> np.ndarray:
    """Variable index of each of the P profile columns, shape (P,)."""
    k = np.asarray(n_modalities, dtype=np.int64)
    return np.repeat(np.arange(k.size), k)


def intrinsic_dimension(n_modalities) -> int:
    """D = sum_q (K^q - 1), the dimension of one cluster's profile."""
    return int(np.sum(np.asarray(n_modalities) - 1))


def fractionate(a, n_silos: int, enabled: bool = True):
    """Local Dirichlet parameter ``(a - 1) / S + 1`` so the product of S local priors is the prior once.

    (paper section 4.2). Positive for any ``a > 0``. With ``enabled=False`` returns ``a`` unchanged.
    """
    a = np.asarray(a, dtype=np.float64)
    if not enabled or n_silos == 1:
        return a
    return (a - 1.0) / n_silos + 1.0


def beta_per_column(beta, n_modalities) -> np.ndarray:
    """Expand a scalar or per-variable beta to one value per profile column, shape (P,)."""
    k = np.asarray(n_modalities, dtype=np.int64)
    b = np.broadcast_to(np.asarray(beta, dtype=np.float64), (k.size,))
    return np.repeat(b, k)


_COUNT_BLOCK = 32_768   # rows per bincount in one_hot_counts


def kept_component_profiles(log_profiles: np.ndarray, keep, n_modalities) -> np.ndarray:
    """Profiles of components ``keep`` of log-profile draws (R, C, P), each variable's block renormalised (the
    exp of a log draw sums to 1 only within rounding): the global clusters of the rounds' answer at its kept
    draws, as the server and the silos both compute them (``vcmc.rounds.stage``, ``vcmc.silo.checks``)."""
    k = np.asarray(n_modalities, dtype=np.int64)
    prof = np.exp(np.asarray(log_profiles, dtype=np.float64)[:, np.asarray(keep, dtype=np.int64), :])
    return prof / np.repeat(np.add.reduceat(prof, profile_offsets(k)[:-1], axis=2), k, axis=2)


def one_hot_counts(codes: np.ndarray, labels: np.ndarray, n_clusters: int, n_modalities) -> np.ndarray:
    """Contingency table ``(n_clusters, P)``: members of each cluster having each modality.

    Missing values (``MISSING``) contribute to no column; rows with a negative label are ignored.
    """
    codes = np.asarray(codes)
    labels = np.asarray(labels)      # not cast: a non-integer label is refused by bincount, never truncated
    offsets = profile_offsets(n_modalities)
    p = int(offsets[-1])
    out = np.zeros(n_clusters * p, dtype=np.int64)
    # one bincount over every cell of a block of rows (a bincount per variable cost 80 calls for a handful
    # of rows: a split proposal's); blocks keep the index array small for a whole silo
    for start in range(0, codes.shape[0], _COUNT_BLOCK):
        x = codes[start:start + _COUNT_BLOCK]
        lab = labels[start:start + _COUNT_BLOCK, None]
        ok = (x != MISSING) & (lab >= 0)
        idx = (lab * p + offsets[:-1] + x)[ok]
        out += np.bincount(idx, minlength=n_clusters * p)
    return out.reshape(n_clusters, p)


def log_likelihood_rows(codes: np.ndarray, pi: np.ndarray, profiles: np.ndarray, n_modalities) -> np.ndarray:
    """Per-row, per-component log ``pi_c prod_q p^q_{x_iq, c}``, shape (n, C); missing values skipped."""
    codes = np.asarray(codes)
    offsets = profile_offsets(n_modalities)
    with np.errstate(divide="ignore"):
        logp = np.log(profiles)
        out = np.broadcast_to(np.log(pi), (codes.shape[0], pi.shape[0])).copy()
    for q in range(codes.shape[1]):
        x = codes[:, q]
        ok = x != MISSING
        out[ok] += logp[:, offsets[q] + x[ok]].T
    return out
