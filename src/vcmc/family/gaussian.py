"""The Gaussian (diagonal) family: ``X^g | C = c ~ N(mu_gc, sigma2_gc)`` with a normal-inverse-gamma prior
(docs/design.md §17.3).

``spec`` is the number ``G`` of Gaussian items. The model works on standardised values (``vcmc.data.continuous``:
``(x - location) / scale`` with the schema's location and scale), so the default prior means the same for every
unit. One component's parameters take ``2G`` columns of the flat parameter row: the ``G`` means, then the ``G``
variances. Its statistics per cluster are ``3G`` columns: the observed rows ``n_g``, the sums ``s_g`` and the sums
of squares ``ss_g`` of each item (missing cells, ``NaN``, contribute nothing, as a missing categorical cell does).

Prior: ``mu | sigma2 ~ N(m0, sigma2 / kappa0)``, ``sigma2 ~ InvGamma(a0, b0)`` with ``m0 = 0``. Fractionated over
S silos (the product of the S local priors is the prior once): ``kappa0 / S``, ``a0 / S``, ``b0 / S``, ``m0``
(derivation in docs/design.md §17.3: the power 1/S of the prior's density in the coordinates where its two
factors are independent, the standardised mean ``(mu - m0) / sigma`` and ``log sigma2``; proper for every S).
"""

from __future__ import annotations

import math

import numpy as np

from vcmc.exceptions import DataError
from vcmc.family.base import Family

#: Index of each prior parameter in ``GaussianFamily.local_prior``'s array.
M0, KAPPA, SHAPE, RATE = range(4)

#: The strongest normal-inverse-gamma prior a silo in a deployment samples under, unfractionated: ``kappa0`` (the
#: rows' worth of the mean's prior) and ``a0`` (half the rows' worth of the variance's). The server chooses the
#: prior, and a strong one pins the draws: with ``a0`` in the millions and a small ``b0`` every variance draw is
#: ``b_n / a_n`` to within a millionth, so each released draw of a mean is the mean of the rows it was drawn from,
#: whose differences across the rounds' stored draws give rows' values back. Under these caps the variance draw
#: keeps the spread the rows themselves give it (docs/design.md §17.4). Ten to a hundred times the defaults
#: (0.01, 2.5), so an informative prior an analyst would choose still runs.
MAX_MEAN_PRECISION = 1.0
MAX_VARIANCE_SHAPE = 10.0


def prior_too_strong(mean_precision: float, variance_shape: float) -> str:
    """Why a server-chosen prior ``(kappa0, a0)`` (unfractionated) is refused in a deployment, or "" if it is
    within ``MAX_MEAN_PRECISION`` and ``MAX_VARIANCE_SHAPE``."""
    too = [f"{name} {float(value):g} (at most {cap:g})" for name, value, cap in (
        ("mean_precision (kappa0)", mean_precision, MAX_MEAN_PRECISION),
        ("variance_shape (a0)", variance_shape, MAX_VARIANCE_SHAPE)) if not float(value) <= cap]
    if not too:
        return ""
    return ("the Gaussian items' prior is stronger than a silo samples under in a deployment: " + ", ".join(too)
            + "; a strong prior pins the draws of the means and variances to the rows' own sums (docs/design.md "
            "§17.4)")


def posterior_parameters(stats: np.ndarray, local_prior: np.ndarray, n_items: int) -> tuple[np.ndarray, ...]:
    """Normal-inverse-gamma posterior ``(m_n, kappa_n, a_n, b_n)`` of every (cluster, item) given the statistics
    (K, 3G): ``kappa_n = kappa + n``, ``m_n = (kappa m0 + s) / kappa_n``, ``a_n = a + n / 2``,
    ``b_n = b + (ss + kappa m0^2 - kappa_n m_n^2) / 2`` (the residual sum of squares plus the prior's pull)."""
    st = np.asarray(stats, dtype=np.float64)
    n, s, ss = st[..., :n_items], st[..., n_items:2 * n_items], st[..., 2 * n_items:]
    m0, kappa, a, b = (float(local_prior[i]) for i in (M0, KAPPA, SHAPE, RATE))
    kappa_n = kappa + n
    m_n = (kappa * m0 + s) / kappa_n
    # ss - s^2/n cancels badly when a cluster's values are far from 0; on standardised values they are not, and
    # the floor keeps a rounded (released) sum of squares from making it negative
    resid = np.maximum(ss + kappa * m0 * m0 - kappa_n * m_n * m_n, 0.0)
    return m_n, kappa_n, a + n / 2.0, b + resid / 2.0


class GaussianFamily(Family):
    """Gaussian items with diagonal covariance (module docstring)."""

    name = "gaussian"
    disclosure = ("per cluster and item the number of observed rows, the sum and the sum of squares of the "
                  "standardised values (the rounds, the latent class analysis) and the posterior draws of the "
                  "means and variances; clusters under the minimum size never leave, sums rounded to the "
                  "operator's precision and noised where set, the draws then redrawn from the released sums "
                  "(docs/design.md §17.4)")
    served_by = {
        "allocation.mixed": "vcmc.mcmc.sampler.kernels_mixed._gibbs_block_mixed",
        "parameters": "vcmc.mcmc.sampler.kernels_mixed._draw_gaussian",
        "relabel": "vcmc.mcmc.relabel.PivotRelabeller",
        "summary": "vcmc.silo.build_summary.build_summary",
        "release": "vcmc.silo.gaussian.release_gaussian",
        "matching": "vcmc.matching.calibrated.cluster_closeness",
        "aggregation": "vcmc.aggregation.gaussian.aggregate_gaussian",
        "memberships": "vcmc.rows.mixed.memberships",
        "replicates": "vcmc.rows.mixed.replicate_item_moments",
        "waic": "vcmc.rows.mixed.waic_sums",
        "lca": "vcmc.lca.gaussian.gaussian_m_step",
        "rounds": "vcmc.pooled.gibbs.draw_gaussian",
    }

    def n_columns(self, spec) -> int:
        return 2 * int(spec)

    def n_coordinates(self, spec) -> int:
        return 2 * int(spec)

    def log_likelihood_rows(self, data, params, spec) -> np.ndarray:
        x = np.asarray(data, dtype=np.float64)
        g = int(spec)
        mu, var = np.asarray(params)[:, :g], np.asarray(params)[:, g:2 * g]
        ok = ~np.isnan(x)
        z = np.where(ok, x, 0.0)[:, None, :] - mu[None, :, :]
        terms = -0.5 * (np.log(2.0 * math.pi * var)[None, :, :] + z * z / var[None, :, :])
        return np.where(ok[:, None, :], terms, 0.0).sum(axis=2)

    def sufficient_statistics(self, data, labels, n_clusters, spec) -> np.ndarray:
        x = np.asarray(data, dtype=np.float64)
        lab = np.asarray(labels)
        ok = ~np.isnan(x) & (lab >= 0)[:, None]
        xz = np.where(ok, x, 0.0)
        onehot = np.zeros((x.shape[0], int(n_clusters)))
        rows = np.flatnonzero(lab >= 0)
        onehot[rows, lab[rows]] = 1.0
        return np.concatenate([onehot.T @ ok, onehot.T @ xz, onehot.T @ (xz * xz)], axis=1)

    def local_prior(self, prior, spec, n_silos: int) -> np.ndarray:
        """``(m0, kappa0, a0, b0)``, each but ``m0`` divided by S under fractionation (module docstring)."""
        s = int(n_silos) if prior.fractionate else 1
        return np.array([0.0, prior.mean_precision / s, prior.variance_shape / s, prior.variance_rate / s])

    def posterior_draws(self, stats, local_prior, spec, n_draws, rng) -> np.ndarray:
        g = int(spec)
        m_n, kappa_n, a_n, b_n = posterior_parameters(stats, local_prior, g)
        var = b_n / rng.standard_gamma(np.broadcast_to(a_n, (int(n_draws), *a_n.shape)))
        mu = m_n + np.sqrt(var / kappa_n) * rng.standard_normal(var.shape)
        return np.concatenate([mu, var], axis=2)

    def log_marginal_likelihood(self, stats, local_prior, spec) -> float:
        """``log p(x)`` of every cluster's observed values with the mean and variance integrated out under the
        normal-inverse-gamma prior, summed over the clusters and items (the Gaussian term of the pooled chain's
        collapsed log joint, docs/design.md §16): per (cluster, item) ``-n/2 log(2 pi) + 1/2 log(kappa / kappa_n)
        + a log b - a_n log b_n + lgamma(a_n) - lgamma(a)``, 0 for a cluster that observed none."""
        from scipy.special import gammaln

        g = int(spec)
        n = np.asarray(stats, dtype=np.float64)[..., :g]
        _, kappa_n, a_n, b_n = posterior_parameters(stats, local_prior, g)
        kappa, a, b = (float(local_prior[i]) for i in (KAPPA, SHAPE, RATE))
        terms = (-0.5 * n * math.log(2.0 * math.pi) + 0.5 * np.log(kappa / kappa_n) + a * math.log(b)
                 - a_n * np.log(b_n) + gammaln(a_n) - gammaln(a))
        return float(np.sum(terms))

    def moments(self, param_draws, spec) -> tuple[np.ndarray, np.ndarray]:
        """Coordinates: the means and the log variances (whose posterior is nearer normal than the variance's)."""
        g = int(spec)
        d = np.asarray(param_draws, dtype=np.float64)
        coords = np.concatenate([d[..., :g], np.log(d[..., g:2 * g])], axis=-1)
        mean = coords.mean(axis=0)
        var = coords.var(axis=0, ddof=1) if coords.shape[0] > 1 else np.zeros_like(mean)
        return mean, var


def release_sums(stats: np.ndarray, n_items: int, *, precision: float, noise_scale: float | None = None,
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """The Gaussian statistics (K, 3G) as they may leave a silo (docs/design.md §17.4): Laplace noise of scale
    ``noise_scale`` on the sums and sums of squares where set, then both rounded to a multiple of ``precision``
    (standardised units; 0 keeps them). The counts ``n_g`` are the count rules' (``vcmc.disclosure``); the
    minimum cluster size is the gate's, common to every family."""
    out = np.array(stats, dtype=np.float64, copy=True)
    sums = out[:, n_items:]
    if noise_scale is not None and noise_scale > 0:
        if rng is None:
            raise ValueError("release_sums: noise needs a random generator")
        sums += rng.laplace(0.0, float(noise_scale), sums.shape)
    if precision > 0:
        sums[...] = np.round(sums / precision) * precision
    out[:, 2 * n_items:] = np.maximum(out[:, 2 * n_items:], 0.0)
    return out


GRID_BITS = 12
"""The fixed-point grid of the Gaussian items in the rounds (docs/design.md §17.8): a silo takes each standardised
value ``x`` as the integer ``m = round(x * 2^GRID_BITS)`` (the value ``m / 2^12``: within 1.2e-4 of ``x`` in units
of the schema's scale, about the pooled standard deviation, far below any measurement's resolution) and sends per
component and item the observed rows, ``sum m`` and ``sum m^2``: integers, so the secure sum adds them exactly
modulo 2^64 and every silo's pooled sums, hence its chain, are the same to the bit. The rounds' model is the pooled
model of these values (the silos sweep at them too), so the pooled chain is its blocked Gibbs sampler exactly."""
GRID_BOUND = 64.0
"""The largest ``|x|`` (standardised: scales from the schema's location) the grid carries; a silo refuses the rounds
over a value beyond it (``grid_values``). ``m^2 <= (64 * 2^12)^2 = 2^36``, so ``sum m^2`` stays below 2^63 (the
int64 the pooled vector is read as) while fewer than ``MAX_POOLED_ROWS`` rows observe an item."""
MAX_POOLED_ROWS = 2**27
"""The most rows of all silos the grid's pooled sums hold exactly (``GRID_BOUND``): 134 million."""


def grid_values(values: np.ndarray, names=None) -> tuple[np.ndarray, np.ndarray]:
    """The standardised values (n, G) (NaN missing) on the rounds' grid: ``(m (n, G) int64, 0 where missing;
    observed (n, G) bool)``. Raises DataError naming the items (``names``) with a value beyond ``GRID_BOUND``
    (no value quoted)."""
    x = np.asarray(values, dtype=np.float64)
    seen = ~np.isnan(x)
    z = np.where(seen, x, 0.0)
    beyond = np.flatnonzero(np.any(np.abs(z) > GRID_BOUND, axis=0))
    if beyond.size:
        items = [str(names[j]) if names is not None else f"item {j + 1}" for j in beyond]
        raise DataError(f"continuous variables {items} have values more than {GRID_BOUND:g} scales from their "
                        "location: the global-informed rounds carry continuous values on a fixed-point grid bounded "
                        "there (docs/design.md §17.8); check the schema's location and scale of these variables, or "
                        "the values, or fit with --rounds 1")
    return np.rint(z * 2.0**GRID_BITS).astype(np.int64), seen


def from_grid(sums: np.ndarray) -> np.ndarray:
    """The statistics (C, 3G) on the standardised scale from their pooled sums on the grid (C, 3G) int64: the
    observed rows, ``sum m / 2^GRID_BITS`` and ``sum m^2 / 2^(2 GRID_BITS)`` (exact powers of two). Raises
    ValueError when an item's pooled rows are negative or at least ``MAX_POOLED_ROWS`` (the sums could have
    wrapped modulo 2^64)."""
    raw = np.asarray(sums, dtype=np.int64)
    g = raw.shape[1] // 3
    rows = raw[:, :g]
    if np.any(rows < 0) or np.any(rows.sum(axis=0) >= MAX_POOLED_ROWS):
        raise ValueError(f"the pooled rows observing a continuous item must be fewer than {MAX_POOLED_ROWS} (the "
                         "fixed-point grid's sums are exact only below it)")
    return np.concatenate([rows.astype(np.float64), raw[:, g:2 * g].astype(np.float64) * 2.0**-GRID_BITS,
                           raw[:, 2 * g:].astype(np.float64) * 2.0**(-2 * GRID_BITS)], axis=1)


GAUSSIAN = GaussianFamily()
