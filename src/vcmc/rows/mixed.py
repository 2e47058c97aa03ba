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


def item_moments(values) -> np.ndarray:
    """Each item's mean and variance over the rows observing it, (2, G)."""
    return np.stack([np.nanmean(values, axis=0), np.nanvar(values, axis=0)])


def replicate_item_moments(values, pi, gaussian, rng: RngLike = None) -> np.ndarray:
    """One replicated dataset's mean and variance of every Gaussian item (2, G), drawn from sufficient statistics
    exactly in distribution (the rows observing an item keep it observed, as in §14.1): the rows' clusters
    ``~ Multinomial(n_g, pi)``, then per cluster the sum ``~ N(n mu, n sigma2)`` and the sum of squares about the
    cluster's own mean ``~ sigma2 chi2_{n-1}``, independent (Cochran's theorem), pooled over the clusters."""
    gen = as_generator(rng)
    g = np.shape(values)[1]
    observed = np.sum(~np.isnan(values), axis=0)
    out = np.empty((2, g))
    mu, var = np.asarray(gaussian)[:, :g], np.asarray(gaussian)[:, g:]
    for j in range(g):
        n_c = gen.multinomial(int(observed[j]), np.asarray(pi, dtype=np.float64) / np.sum(pi))
        seen = n_c > 0
        n = n_c[seen].astype(np.float64)
        sums = gen.normal(n * mu[seen, j], np.sqrt(n * var[seen, j]))
        within = var[seen, j] * gen.chisquare(np.maximum(n - 1, 1e-300)) * (n > 1)
        mean = sums.sum() / n.sum()
        out[0, j] = mean
        out[1, j] = (within.sum() + np.sum(n * (sums / n - mean) ** 2)) / n.sum()
    return out
