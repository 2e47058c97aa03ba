"""The Gaussian items' matched draws (docs/design.md §17.6): every silo's draws of the means and variances aligned
on the global clusters, local clusters matched to one global cluster combined exactly as a mixture's first two
moments (the weights of the draw), as profiles are (§5.5)."""

from __future__ import annotations

import numpy as np

from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.matching.types import Matching


def matched_gaussian(summaries, matching: Matching) -> tuple[np.ndarray, ...]:
    """Per silo (T_s, C, 2G): the means, then the variances, of every global cluster's Gaussian items in that silo
    (``NaN`` where the cluster is absent). For local clusters ``L`` merged into one, per draw with weights
    ``w_l = pi_l / sum_L pi``: ``mean = sum w_l mu_l`` and ``var = sum w_l (sigma2_l + mu_l^2) - mean^2``, the
    moments of the merged mixture."""
    out = []
    for summ, assign in zip(summaries, matching.assignment, strict=True):
        if summ.gaussian_draws is None:
            raise InconsistentSiloSummaries(f"silo {summ.silo!r} sent no Gaussian draws; the schema has some")
        g = summ.n_gaussian
        pi = np.asarray(summ.pi_draws, dtype=np.float64)                       # (T, K)
        mu, var = summ.gaussian_draws[:, :, :g], summ.gaussian_draws[:, :, g:]
        c = matching.n_global
        total = np.zeros((pi.shape[0], c))
        first = np.zeros((pi.shape[0], c, g))
        second = np.zeros((pi.shape[0], c, g))
        np.add.at(total.T, assign, pi.T)
        np.add.at(first.transpose(1, 0, 2), assign, (pi[:, :, None] * mu).transpose(1, 0, 2))
        np.add.at(second.transpose(1, 0, 2), assign, (pi[:, :, None] * (var + mu * mu)).transpose(1, 0, 2))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = first / total[:, :, None]
            variance = second / total[:, :, None] - mean * mean
        absent = ~np.isin(np.arange(c), assign)
        mean[:, absent] = np.nan
        variance[:, absent] = np.nan
        out.append(np.concatenate([mean, np.maximum(variance, 0.0) + np.where(absent, np.nan, 0.0)[None, :, None]],
                                  axis=2))
    return tuple(out)
