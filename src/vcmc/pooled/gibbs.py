"""The pooled model's Gibbs block the silos compute from the pooled sums: weights and profiles given the
summed counts.

Model (docs/design.md §2, all silos' rows together, C components): ``pi ~ Dir(alpha)``, every profile block
``theta_cq ~ Dir(beta_q)``, ``z_i | pi ~ Cat(pi)``, ``x_iq | z_i ~ Cat(theta_{z_i q})``. Given the allocations
of every row the full conditionals are ``pi | z ~ Dir(alpha + N)`` and ``theta_cq | z, x ~ Dir(beta_q +
CT_cq)``, where ``N`` and ``CT`` are counts summed over the silos' rows: nothing else is needed.
The silos draw the other block (``z | pi, theta``) on their rows, so the alternation is the pooled blocked
Gibbs sampler exactly (its stationary law is the pooled posterior), whichever silo holds which row.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist
from scipy.special import gammaln

from vcmc.dirichlet import log_dirichlet_blocks
from vcmc.model import profile_offsets


def draw_parameters(cluster: np.ndarray, modality: np.ndarray, *, alpha: float, beta_cols: np.ndarray,
                    n_modalities, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(log pi, log theta)`` drawn from their full conditionals given summed counts ``cluster`` (C,) and
    ``modality`` (C, P); logs, finite where the draws underflow (``alpha`` is small: an empty component's
    weight is often below 1e-300)."""
    n = np.asarray(cluster, dtype=np.float64)
    log_pi = log_dirichlet_blocks((alpha + n)[None], np.asarray([0, n.size]), rng)[0]
    log_prof = log_dirichlet_blocks(beta_cols[None, :] + np.asarray(modality, dtype=np.float64),
                                    profile_offsets(n_modalities), rng)
    return log_pi, log_prof


def align_to(log_prof: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The permutation of components that best matches ``exp(log_prof)`` to ``reference`` (C, P) profiles
    (least total L1 distance, Hungarian algorithm): ``perm[k]`` is the component of this draw that takes
    label k.

    Relabelling a draw before it is sent is a valid move of the chain: the prior and likelihood are
    invariant under permutations of the components, so the posterior is, and a state-dependent permutation
    composed with a posterior-preserving kernel preserves the posterior. It keeps the labels of the kept
    rounds aligned (pivotal reordering, Marin, Mengersen and Robert 2005), so their draws can be averaged.
    """
    prof = np.exp(log_prof)
    cost = cdist(prof, reference, metric="cityblock")   # (this draw, reference), no (C, C, P) array

    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(prof.shape[0], dtype=np.int64)
    perm[cols] = rows
    return perm


def log_joint(cluster: np.ndarray, modality: np.ndarray, *, alpha: float, beta_cols: np.ndarray,
              n_modalities) -> float:
    """``log p(x, z)`` of the current allocation with weights and profiles integrated out (Dirichlet-
    multinomial), from the summed counts: the round's objective, comparable across rounds and with the
    one-shot start."""
    n = np.asarray(cluster, dtype=np.float64)
    c = n.size
    out = gammaln(c * alpha) - gammaln(c * alpha + n.sum()) + np.sum(gammaln(alpha + n) - gammaln(alpha))
    ct = np.asarray(modality, dtype=np.float64)
    starts = profile_offsets(n_modalities)[:-1]
    beta = np.asarray(beta_cols, dtype=np.float64)
    beta_sum = np.add.reduceat(beta, starts)                          # (Q,) per variable
    block_sum = np.add.reduceat(ct, starts, axis=1)                   # (C, Q): the rows counted per variable
    out += np.sum(gammaln(beta_sum)[None, :] - gammaln(beta_sum[None, :] + block_sum))
    out += np.sum(gammaln(beta[None, :] + ct)) - c * np.sum(gammaln(beta))
    return float(out)

