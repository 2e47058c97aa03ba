"""What a silo computes on its rows with Gaussian items beside the categorical ones (docs/design.md §17.7):
memberships under posterior draws, the WAIC sums, and the Gaussian items' predictive check.

Plain numpy in log space (``vcmc.model.log_likelihood_rows`` and the family's ``log_likelihood_rows``): every row is
unique once it holds a measurement, so the categorical row kernels' shared patterns (``vcmc.rows.row_kernels``) buy
nothing. The categorical-only paths are unchanged.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from vcmc._rng import RngLike, as_generator
from vcmc.family import GAUSSIAN
from vcmc.model import log_likelihood_rows


def joint_log_density(codes, n_modalities, values, pi, profiles, gaussian) -> np.ndarray:
    """``log pi_c + log f_cat(x_i | p_c) + log f_gauss(y_i | mu_c, sigma2_c)`` of every row and cluster, (n, K)."""
    with np.errstate(divide="ignore"):
        out = log_likelihood_rows(codes, np.asarray(pi, dtype=np.float64), profiles, n_modalities)
    return out + GAUSSIAN.log_likelihood_rows(values, gaussian, np.shape(values)[1])


def memberships(codes, n_modalities, values, pi_draws, profile_draws, gaussian_draws) -> np.ndarray:
    """Each row's allocation probabilities averaged over the draws, (n, K): the membership of §8 with the Gaussian
    items' densities in the allocation probability."""
    total = None
    for t in range(np.shape(pi_draws)[0]):
        joint = joint_log_density(codes, n_modalities, values, pi_draws[t], profile_draws[t], gaussian_draws[t])
        w = np.exp(joint - logsumexp(joint, axis=1, keepdims=True))
        total = w if total is None else total + w
    return total / np.shape(pi_draws)[0]


def waic_sums(codes, n_modalities, values, pi_draws, profile_draws, gaussian_draws) -> dict[str, float]:
    """The silo's WAIC sums of §14.2 (``lppd``, ``p_waic``, ``elpd`` and the sum of squares of the rows' elpd about
    their mean) with every item's density in ``log p(x_i | theta_t)``."""
    ll = np.stack([logsumexp(joint_log_density(codes, n_modalities, values, pi_draws[t], profile_draws[t],
                                               gaussian_draws[t]), axis=1) for t in range(np.shape(pi_draws)[0])])
    lppd = logsumexp(ll, axis=0) - np.log(ll.shape[0])
    v = ll.var(axis=0)
    elpd = lppd - v
    return {"lppd": float(lppd.sum()), "p_waic": float(v.sum()), "elpd": float(elpd.sum()),
            "elpd_ss": float(np.sum((elpd - elpd.mean()) ** 2)), "n_rows": int(ll.shape[1])}


def occupancy(codes, n_modalities, values, pi_draws, profile_draws, gaussian_draws, rng: RngLike = None, *,
              at_least: int = 1) -> np.ndarray:
    """(R, C) 0/1: whether at least ``at_least`` rows (default any row) fall in each cluster when every row's
    allocation is sampled at draw r from its probabilities with every item's density (the occupancy of §14.3)."""
    gen = as_generator(rng)
    out = np.zeros(np.shape(pi_draws), dtype=np.int64)
    for t in range(out.shape[0]):
        joint = joint_log_density(codes, n_modalities, values, pi_draws[t], profile_draws[t], gaussian_draws[t])
        cum = np.cumsum(np.exp(joint - logsumexp(joint, axis=1, keepdims=True)), axis=1)
        picks = (gen.random(cum.shape[0])[:, None] > cum).sum(axis=1)
        sampled = np.bincount(np.minimum(picks, out.shape[1] - 1), minlength=out.shape[1])
        out[t] = sampled >= max(int(at_least), 1)
    return out


def item_sums(values) -> np.ndarray:
    """Each item's observed rows, sum and sum of squares (3, G)."""
    x = np.asarray(values, dtype=np.float64)
    seen = ~np.isnan(x)
    z = np.where(seen, x, 0.0)
    return np.stack([seen.sum(axis=0).astype(np.float64), z.sum(axis=0), (z * z).sum(axis=0)])


def item_moments(values) -> np.ndarray:
    """Each item's mean and variance over the rows observing it, (2, G)."""
    return moments_of_sums(item_sums(values))


def moments_of_sums(sums) -> np.ndarray:
    """Mean and variance (2, G) from observed rows, sums and sums of squares (3, G) (NaN for an item nobody has)."""
    n, s, ss = np.asarray(sums, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s / n
        return np.stack([mean, ss / n - mean * mean])


def replicate_item_moments(values, pi, gaussian, rng: RngLike = None) -> np.ndarray:
    """One replicated dataset's mean and variance of every Gaussian item (2, G) (``replicate_item_sums``)."""
    return moments_of_sums(replicate_item_sums(values, pi, gaussian, rng))


def replicate_item_sums(values, pi, gaussian, rng: RngLike = None) -> np.ndarray:
    """One replicated dataset's observed rows, sum and sum of squares of every Gaussian item (3, G), drawn from
    sufficient statistics exactly in distribution (the rows observing an item keep it observed, as in §14.1): the
    rows' clusters ``~ Multinomial(n_g, pi)``, then per cluster the sum ``~ N(n mu, n sigma2)`` and the sum of
    squares about the cluster's own mean ``~ sigma2 chi2_{n-1}``, independent (Cochran's theorem)."""
    gen = as_generator(rng)
    g = np.shape(values)[1]
    observed = np.sum(~np.isnan(values), axis=0)
    out = np.zeros((3, g))
    mu, var = np.asarray(gaussian)[:, :g], np.asarray(gaussian)[:, g:]
    for j in range(g):
        n_c = gen.multinomial(int(observed[j]), np.asarray(pi, dtype=np.float64) / np.sum(pi))
        seen = n_c > 0
        n = n_c[seen].astype(np.float64)
        sums = gen.normal(n * mu[seen, j], np.sqrt(n * var[seen, j]))
        within = var[seen, j] * gen.chisquare(np.maximum(n - 1, 1e-300)) * (n > 1)
        out[:, j] = n.sum(), sums.sum(), np.sum(within + sums * sums / n)
    return out
