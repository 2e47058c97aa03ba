"""Memberships of a silo's rows in the global clusters, computed inside the silo (they are row-level).

A row's membership of cluster ``c`` is its allocation probability under the model,
``pi_c prod_q p^q_{x_q, c} / sum_c' (...)``, averaged over posterior draws of the parameters (not taken at a
point estimate, which is overconfident for rows between two clusters). Missing values are skipped. The
same function serves the fit (the global draws sent by the server), the local posterior (its own draws) and
predictions for new rows under a saved fit.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from vcmc.model import log_likelihood_rows

__all__ = ["membership_summary", "posterior_memberships"]


def posterior_memberships(codes: np.ndarray, n_modalities, pi_draws: np.ndarray,
                          profile_draws: np.ndarray) -> np.ndarray:
    """Allocation probabilities of every row averaged over the draws.

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        ``-1`` = missing.
    n_modalities : sequence of int
    pi_draws : ndarray of shape (T, C) or (C,)
        Weights; a cluster with weight 0 (absent where the rows come from) gets membership 0.
    profile_draws : ndarray of shape (T, C, P) or (C, P)

    Returns
    -------
    ndarray of shape (n, C)
        Rows sum to 1.
    """
    pi = np.atleast_2d(np.asarray(pi_draws, dtype=np.float64))
    prof = np.asarray(profile_draws, dtype=np.float64)
    if prof.ndim == 2:
        prof = prof[None]
    if pi.shape[0] != prof.shape[0] or pi.shape[1] != prof.shape[1]:
        raise ValueError(f"pi draws {pi.shape} and profile draws {prof.shape} must share (T, C)")
    codes = np.asarray(codes)
    out = np.zeros((codes.shape[0], pi.shape[1]))
    for t in range(pi.shape[0]):          # a loop over draws only: each step is vectorised over rows
        with np.errstate(divide="ignore"):
            ll = log_likelihood_rows(codes, pi[t], prof[t], n_modalities)
        out += np.exp(ll - logsumexp(ll, axis=1, keepdims=True))
    return out / pi.shape[0]


def membership_summary(memberships: np.ndarray, labels: np.ndarray) -> dict:
    """Cluster-level sums of the memberships (what leaves the silo): see ``AssignReply``."""
    m = np.asarray(memberships, dtype=np.float64)
    c = m.shape[1]
    labels = np.asarray(labels, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.sum(np.where(m > 0, m * np.log(m), 0.0))
    return {"counts": np.bincount(labels, minlength=c).astype(np.int64),
            "expected": m.sum(axis=0),
            "probability": np.bincount(labels, weights=m[np.arange(m.shape[0]), labels], minlength=c),
            "entropy": float(ent)}
