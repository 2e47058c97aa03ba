"""The release rule of a summary's Gaussian fields (docs/design.md §17.4).

A cluster mean of ten people is a statistic of ten rows, but the mean of a few rows, or two means differenced,
gives values back. So, beside the minimum cluster size every local cluster already meets (the gate's rule):

* a (cluster, item) observed in fewer rows than the minimum cluster size (a large cluster whose item is mostly
  missing) is withheld: its count, sum and sum of squares are sent as 0;
* the sums and sums of squares are noised (Laplace, ``privacy.sum_noise``) and rounded to a multiple of
  ``privacy.sum_precision`` (standardised units) by ``vcmc.family.gaussian.release_sums``;
* when any of these applies, the draws of the means and variances and their medians are not the sampler's (whose
  centre would give the unrounded sums back to within rounding) but conjugate draws given the released sums under
  the run's unfractionated prior, on a stream of the request's seed (so a re-sent summary is the same message),
  as the categorical profiles are drawn from the protected table (docs/design.md §13).
"""

from __future__ import annotations

import numpy as np

from vcmc.family import GAUSSIAN
from vcmc.family.gaussian import release_sums


def release_gaussian(gate, request, reply, privacy) -> dict:
    """The summary's Gaussian fields as they may leave the silo (module docstring)."""
    g = reply.n_gaussian
    sums = reply.gaussian_sums
    if sums is None:
        sums = _own_sums(gate, g)
    sums = np.array(sums, dtype=np.float64, copy=True)
    thin = (sums[:, :g] > 0) & (sums[:, :g] < gate.min_size)
    protected = privacy.sum_precision > 0 or privacy.sum_noise is not None or bool(thin.any())
    if not protected:
        return {}
    for block in range(3):
        sums[:, block * g:(block + 1) * g][thin] = 0.0
    stream = np.random.default_rng(np.random.SeedSequence(request.seed_entropy,
                                                          spawn_key=(*request.spawn_key, 0x6A55)))
    released = release_sums(sums, g, precision=privacy.sum_precision, noise_scale=privacy.sum_noise, rng=stream)
    kappa, shape, rate = gate.state.gaussian_prior
    prior = GAUSSIAN.local_prior(_Prior(kappa, shape, rate), g, 1)
    draws = GAUSSIAN.posterior_draws(released, prior, g, reply.gaussian_draws.shape[0], stream)
    out = {"gaussian_draws": draws, "gaussian_estimate": np.median(draws, axis=0)}
    if reply.gaussian_sums is not None:
        out["gaussian_sums"] = released
    return out


def _own_sums(gate, g: int) -> np.ndarray:
    """The silo's own sums of its local partition (row-level; stays in the silo unless the table may leave)."""
    local = gate.silo.require_local("summary")
    return GAUSSIAN.sufficient_statistics(gate.silo.values, local.partition, local.n_clusters, g)


class _Prior:
    """The prior options ``GaussianFamily.local_prior`` reads, from the run state (unfractionated)."""

    fractionate = False

    def __init__(self, mean_precision: float, variance_shape: float, variance_rate: float):
        self.mean_precision, self.variance_shape, self.variance_rate = mean_precision, variance_shape, variance_rate
