"""Gaussian items of the maximum-likelihood latent class model: StepMix's ``gaussian_diag`` (docs/design.md §17).

The M-step of a class's mean and variance of one item from the summed E-step sums ``(sum r, sum r x, sum r x^2)``
over the rows observing it (StepMix's ``gaussian_diag`` has no missing values; a missing cell here contributes
nothing, as a missing categorical cell does in ``categorical_nan``), with scikit-learn's ``reg_covar`` (1e-6, which
StepMix passes on) added to the variance. The values are standardised (``vcmc.data.continuous``), so the estimates
are those of the data's own units up to the location and scale, and the log-likelihood the silos return is in the
data's units (the standardisation's Jacobian added, ``vcmc.silo.endpoints.lca``).
"""

from __future__ import annotations

import numpy as np

#: scikit-learn's default ``reg_covar``, which StepMix's ``gaussian_diag`` uses.
REG_COVAR = 1e-6


def gaussian_m_step(sums: np.ndarray) -> np.ndarray:
    """Means and variances (K, 2G) from the summed E-step sums (K, 3G); a class with no weight on an item keeps
    mean 0 and variance 1 (the standardised population's)."""
    s = np.asarray(sums, dtype=np.float64)
    g = s.shape[1] // 3
    n, s1, s2 = s[:, :g], s[:, g:2 * g], s[:, 2 * g:]
    ok = n > 0
    safe = np.where(ok, n, 1.0)
    mean = np.where(ok, s1 / safe, 0.0)
    var = np.where(ok, np.maximum(s2 / safe - mean * mean, 0.0), 1.0) + REG_COVAR
    return np.concatenate([mean, var], axis=1)


def random_gaussian_start(k: int, n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Means drawn from the standardised population's N(0, 1), variances 1: a start that spans the data."""
    return np.concatenate([rng.standard_normal((k, n_items)), np.ones((k, n_items))], axis=1)
