"""The gate's rules for Gaussian items (docs/design.md §17.4): the release of a summary's Gaussian fields, and
the checks of the global Gaussian draws a server announces and asks the silo to label its rows with.

A cluster mean of ten people is a statistic of ten rows, but the mean of a few rows, or two means differenced,
gives values back. So, beside the minimum cluster size every local cluster already meets (the gate's rule):

* a (cluster, item) observed in fewer rows than the minimum cluster size (a large cluster whose item is mostly
  missing) is withheld: its count, sum and sum of squares are sent as 0, with complements in the item's column
  (``vcmc.disclosure.complementary_withholding``: the clusters' counts, sums and sums of squares of an item add up
  to the silo's own, which the assessment sends), so that no withheld cell comes back as "the silo's minus the
  rest";
* the sums and sums of squares are noised (Laplace, ``privacy.sum_noise``) and rounded to a multiple of
  ``privacy.sum_precision`` (standardised units) by ``vcmc.family.gaussian.release_sums``;
* when any of these applies, the draws of the means and variances and their medians are not the sampler's (whose
  centre would give the unrounded sums back to within rounding) but conjugate draws given the released sums under
  the run's unfractionated prior, on a stream of the request's seed (so a re-sent summary is the same message),
  as the categorical profiles are drawn from the protected table (docs/design.md §13).
"""

from __future__ import annotations

import numpy as np

from vcmc.disclosure import complementary_withholding
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.family import GAUSSIAN
from vcmc.family.gaussian import release_sums
from vcmc.silo.state import digest_rows


def release_gaussian(gate, request, reply, privacy) -> dict:
    """The summary's Gaussian fields as they may leave the silo (module docstring)."""
    g = reply.n_gaussian
    sums = reply.gaussian_sums
    if sums is None:
        sums = _own_sums(gate, g)
    sums = np.array(sums, dtype=np.float64, copy=True)
    thin = (sums[:, :g] > 0) & (sums[:, :g] < gate.min_size)
    if thin.any():
        columns = np.broadcast_to(np.arange(g)[None, :], thin.shape)
        thin = complementary_withholding(sums[:, :g], thin, [columns], float(gate.min_size))
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


def check_announced(gate, request, assignment: np.ndarray, n_draws: int) -> None:
    """The announced global Gaussian draws (R, C, 2G): present exactly when the silo has Gaussian items, finite,
    positive variances, and every draw of a cluster the silo holds within ``policy.draw_tolerance`` of that
    cluster's standard deviation (or the spread of the silo's own draws, where wider) of the silo's own posterior
    mean of it (its local clusters mapped to it merged by size): a server cannot make the silo label its rows with
    means of its choosing. Recorded by digest, so that the assign request must use them."""
    values = gate.silo.values
    gaussian = getattr(request, "gaussian", None)
    if (values is None) != (gaussian is None):
        raise ConfigError("announce: Gaussian draws come exactly when the silo has continuous items "
                          f"(it has {0 if values is None else values.shape[1]})")
    if gaussian is None:
        return
    g = values.shape[1]
    draws = np.asarray(gaussian, dtype=np.float64)
    n_global = int(request.n_global)
    if draws.shape != (n_draws, n_global, 2 * g) or not np.all(np.isfinite(draws)) or np.any(draws[..., g:] <= 0):
        raise ConfigError(f"announce: the Gaussian draws must be ({n_draws}, {n_global}, {2 * g}) finite means and "
                          "positive variances")
    local = gate.silo.local
    own = local.profile_draws[:, :, -2 * g:]                       # the silo's own draws (standardised)
    sizes = local.cluster_sizes.astype(np.float64)
    for c in np.unique(assignment):
        mine = assignment == c
        w = sizes[mine] / sizes[mine].sum()
        mean = np.einsum("k,tkg->g", w, own[:, mine, :g]) / own.shape[0]
        var = np.einsum("k,tkg->g", w, own[:, mine, g:] + own[:, mine, :g] ** 2) / own.shape[0] - mean ** 2
        spread = np.abs(own[:, mine, :g] - mean).max(axis=(0, 1))
        limit = np.maximum(gate.policy.draw_tolerance * np.sqrt(np.maximum(var, 0.0)), spread)
        if np.any(np.abs(draws[:, c, :g] - mean) > limit + 1e-12):
            raise DisclosureError(f"silo {gate.silo.name!r}: an announced mean of global cluster {int(c)} is far "
                                  "from the silo's own posterior of the clusters matched to it")
    gate.state.gaussian_rows = digest_rows(draws.reshape(draws.shape[0], -1))


def check_requested(gate, request, what: str, n_draws: int, announced: bool) -> np.ndarray | None:
    """An assign or assess request's Gaussian draws (R, C, 2G): present exactly when the silo has continuous items
    and the request has parameters, of the announced ones."""
    values = gate.silo.values
    gaussian = getattr(request, "gaussian", None)
    if values is None or request.pi is None:
        if gaussian is not None:
            raise ConfigError(f"{what}: Gaussian draws without continuous items or without profile draws")
        return None
    if gaussian is None:
        raise ConfigError(f"{what}: the silo has continuous items; the request needs their Gaussian draws")
    g = values.shape[1]
    draws = np.asarray(gaussian, dtype=np.float64)
    n_global = np.shape(request.pi)[-1]
    if draws.shape != (n_draws, n_global, 2 * g) or not np.all(np.isfinite(draws)) or np.any(draws[..., g:] <= 0):
        raise ConfigError(f"{what}: the Gaussian draws must be ({n_draws}, {n_global}, {2 * g})")
    if announced and not set(digest_rows(draws.reshape(n_draws, -1))) <= set(gate.state.gaussian_rows):
        raise DisclosureError(f"silo {gate.silo.name!r}: the {what} request uses Gaussian draws that were not "
                              "announced in this run")
    return draws
