"""The continuous items of a result on their original scale (docs/design.md §17.9): per cluster and item the
posterior mean and 95% interval of the cluster's mean and of its standard deviation, in the data's units
(``x = location + scale * z`` of the schema's standardisation, ``vcmc.data.continuous``)."""

from __future__ import annotations

import numpy as np


def continuous_table(gaussian_draws: np.ndarray, continuous) -> dict[str, list]:
    """Columns of ``continuous.csv``: ``cluster`` (1-based), ``variable``, ``unit``, ``mean`` with ``mean_ci95_low``
    and ``mean_ci95_high``, ``sd`` with ``sd_ci95_low`` and ``sd_ci95_high``, from the global draws (T, C, 2G)."""
    draws = np.asarray(gaussian_draws, dtype=np.float64)
    g = draws.shape[2] // 2
    loc = np.array([v.location for v in continuous])
    scale = np.array([v.scale for v in continuous])
    mean = loc + scale * draws[:, :, :g]                       # (T, C, G) in the data's units
    sd = scale * np.sqrt(draws[:, :, g:])
    lo_m, hi_m = np.quantile(mean, [0.025, 0.975], axis=0)
    lo_s, hi_s = np.quantile(sd, [0.025, 0.975], axis=0)
    c = draws.shape[1]
    return {"cluster": np.repeat(np.arange(1, c + 1), g).tolist(),
            "variable": [v.name for v in continuous] * c, "unit": [v.unit for v in continuous] * c,
            "mean": mean.mean(axis=0).ravel().tolist(), "mean_ci95_low": lo_m.ravel().tolist(),
            "mean_ci95_high": hi_m.ravel().tolist(), "sd": sd.mean(axis=0).ravel().tolist(),
            "sd_ci95_low": lo_s.ravel().tolist(), "sd_ci95_high": hi_s.ravel().tolist()}
