"""The pooled model's Gibbs block the silos compute from the pooled sums: weights and profiles given the
summed counts.

Model (docs/design.md §2, all silos' rows together, C components): ``pi ~ Dir(alpha)``, every profile block
``theta_cq ~ Dir(beta_q)``, ``z_i | pi ~ Cat(pi)``, ``x_iq | z_i ~ Cat(theta_{z_i q})``. Given the allocations
of every row the full conditionals are ``pi | z ~ Dir(alpha + N)`` and ``theta_cq | z, x ~ Dir(beta_q +
CT_cq)``, where ``N`` and ``CT`` are counts summed over the silos' rows: nothing else is needed.
The silos draw the other block (``z | pi, theta``) on their rows, so the alternation is the pooled blocked
Gibbs sampler exactly (its stationary law is the pooled posterior), whichever silo holds which row.

Gaussian items (docs/design.md §17.8): ``(mu_cg, sigma2_cg) | z, y ~ NIG(m_n, kappa_n, a_n, b_n)`` from the
component's pooled observed rows, sum and sum of squares of the item, the family's own conjugate draw
(``vcmc.family.gaussian``), made after the weights and profiles on the same stream.
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


def draw_gaussian(stats: np.ndarray, prior: np.ndarray, n_items: int, rng: np.random.Generator) -> np.ndarray:
    """``(mu, sigma2)`` (C, 2G) of every component drawn from its normal-inverse-gamma full conditional given the
    pooled statistics ``stats`` (C, 3G: observed rows, sums, sums of squares) under ``prior`` ``(m0, kappa0, a0,
    b0)``: the family's posterior draw, one draw."""
    from vcmc.family import GAUSSIAN

    return GAUSSIAN.posterior_draws(stats, prior, int(n_items), 1, rng)[0]


def align_to(log_prof: np.ndarray, reference: np.ndarray, means: np.ndarray | None = None) -> np.ndarray:
    """The permutation of components that best matches ``exp(log_prof)`` to ``reference`` (C, P) profiles
    (least total L1 distance, Hungarian algorithm): ``perm[k]`` is the component of this draw that takes
    label k. With Gaussian items ``means`` (C, G) (standardised) are matched beside the profiles (``reference``
    then (C, P + G)): a mean one standard deviation away costs as much as a profile moving half its mass.

    Relabelling a draw before it is sent is a valid move of the chain: the prior and likelihood are
    invariant under permutations of the components, so the posterior is, and a state-dependent permutation
    composed with a posterior-preserving kernel preserves the posterior. It keeps the labels of the kept
    rounds aligned (pivotal reordering, Marin, Mengersen and Robert 2005), so their draws can be averaged.
    """
    prof = np.exp(log_prof)
    if means is not None:
        prof = np.concatenate([prof, np.asarray(means, dtype=np.float64)], axis=1)
    cost = cdist(prof, reference, metric="cityblock")   # (this draw, reference), no (C, C, P) array

    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(prof.shape[0], dtype=np.int64)
    perm[cols] = rows
    return perm


def log_joint(cluster: np.ndarray, modality: np.ndarray, *, alpha: float, beta_cols: np.ndarray,
              n_modalities, gaussian: np.ndarray | None = None, gaussian_prior: np.ndarray | None = None) -> float:
    """``log p(x, z)`` of the current allocation with weights and profiles integrated out (Dirichlet-
    multinomial), from the summed counts: the round's objective, comparable across rounds and with the
    one-shot start. With Gaussian items (``gaussian`` (C, 3G) pooled statistics, ``gaussian_prior``) their
    marginal likelihood with the means and variances integrated out (the family's) is added."""
    extra = 0.0
    if gaussian is not None:
        from vcmc.family import GAUSSIAN

        st = np.asarray(gaussian, dtype=np.float64)
        extra = GAUSSIAN.log_marginal_likelihood(st, gaussian_prior, st.shape[1] // 3)
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
    return float(out) if gaussian is None else float(out) + extra

