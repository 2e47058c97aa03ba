"""Births of the global-informed rounds, inside a silo: the rows its one-shot clusters explain worst, each with
the value that explains it least (docs/design.md §16, "Births").

A row labelled k has log likelihood ``l_i = sum_q log theta_{k, q, x_iq}`` under the mean global profile of k
(over its observed variables). Under cluster k itself that sum has mean ``E_i = sum_q sum_m theta_kqm log
theta_kqm`` and variance ``V_i = sum_q (sum_m theta_kqm log^2 theta_kqm - (sum_m theta_kqm log theta_kqm)^2)``
(the variables are independent given the cluster), so ``(l_i - E_i) / sqrt(V_i)`` says how surprising the row
is for its own cluster whatever the cluster's size or entropy. The ``share`` of the silo's rows with the most
negative scores are its misfits; each misfit's *worst column* is its least probable observed value
(``argmin_q theta_{k, q, x_iq}``, a profile column). Misfits that share a worst column are the candidates of
one new component: a cluster the one-shot pass merged into larger ones (66 people with leukaemia and breast
cancer among 140,000 of the healthiest cluster) is a group of misfits with the same least probable value.

Deterministic (no random numbers): the birth request and the start request compute the same misfits from the
same labels and profiles, so the silo keeps nothing between them.
"""

from __future__ import annotations

import math

import numpy as np

from vcmc.model import profile_offsets

# Profile entries below this are taken at this value in the logs (a posterior mean of a Dirichlet with a
# positive prior is never 0; the floor only keeps a malformed entry from making a score infinite).
_LOG_FLOOR = 1e-300


def misfits(codes: np.ndarray, n_modalities, labels: np.ndarray, profiles: np.ndarray,
            share: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``ceil(share * n)`` rows least explained by their own cluster and the worst column of each.

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        The silo's codes (-1 = missing).
    n_modalities : sequence of int
    labels : ndarray of shape (n,), int
        Each row's one-shot cluster, ``0..K-1``.
    profiles : ndarray of shape (K, P)
        The clusters' mean global profiles (flat, ``vcmc.model`` layout).
    share : float
        In (0, 1].

    Returns
    -------
    rows : ndarray of int64
        The misfits, most surprising first (ties in row order); rows with no observed value are never misfits.
    worst : ndarray of int64
        The profile column of each misfit's least probable observed value (the first such variable on a tie).
    """
    offsets = profile_offsets(n_modalities)
    x = np.asarray(codes, dtype=np.int64)
    lab = np.asarray(labels, dtype=np.int64)
    prof = np.asarray(profiles, dtype=np.float64)
    n = x.shape[0]
    observed = x >= 0
    cols = np.where(observed, x + offsets[:-1][None, :], 0)
    logp = np.log(np.maximum(prof, _LOG_FLOOR))
    cell = np.where(observed, logp[lab[:, None], cols], 0.0)                # (n, Q) log theta of each value
    # per cluster and variable: the mean and variance of log theta_{k, q, X} when X ~ theta_kq
    mean_kq = np.add.reduceat(prof * logp, offsets[:-1], axis=1)            # (K, Q)
    var_kq = np.maximum(np.add.reduceat(prof * logp**2, offsets[:-1], axis=1) - mean_kq**2, 0.0)
    mean = np.where(observed, mean_kq[lab], 0.0).sum(axis=1)
    var = np.where(observed, var_kq[lab], 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(var > 0, (cell.sum(axis=1) - mean) / np.sqrt(var), 0.0)
    candidates = np.flatnonzero(observed.any(axis=1))
    m = min(int(math.ceil(float(share) * n)), candidates.size)
    rows = candidates[np.argsort(score[candidates], kind="stable")[:m]]
    worst_var = np.argmin(np.where(observed[rows], cell[rows], np.inf), axis=1)
    worst = cols[rows, worst_var].astype(np.int64)
    return rows.astype(np.int64), worst

