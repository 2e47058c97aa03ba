"""The silo's side of minimum-divergence matching: the cost matrix computed on the silo's own rows.

The server sends a reference (weights and profiles of the global clusters found so far); the silo answers
with a small matrix ``(K_s, C + K_s)`` (``divergence_cost``), never with its rows. See
``vcmc.matching.divergence`` for the server's side and the two new-cluster rules.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.special import logsumexp

from vcmc.config.options import NewClusterRule, check_new_cluster_rule, choices
from vcmc.exceptions import DataError
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.model import MISSING, intrinsic_dimension, profile_offsets
from vcmc.spacing import evenly_spaced

__all__ = ["RULES", "divergence_cost"]

RULES = choices(NewClusterRule)
_TINY = 1e-300   # floor of probabilities before a log: keeps costs finite when a modality has p = 0


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
        New-cluster rule of docs/design.md §5.3.1.
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
    check_new_cluster_rule(rule, penalty_multiplier, "divergence_cost")
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
        # local point estimate: posterior mean of the label-consistent draws (docs/design.md §5.3.1)
        log_own = np.log(np.maximum(local.profile_draws.mean(axis=0), _TINY))
        own = np.sum(soft * log_own, axis=1)                               # sum_i w_il log f(X_i | p^s_l)
        cost[:, :c] = own[:, None] - soft @ log_ref.T
        dim = intrinsic_dimension(n_mod)
        cost[np.arange(k), c + np.arange(k)] = penalty_multiplier * 0.5 * dim * np.log(np.maximum(n_l, 1.0))
        return cost

    # augmented reference rule (docs/design.md §5.3.1)
    t_all = local.pi_draws.shape[0]
    idx = evenly_spaced(t_all, int(n_draws))
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

