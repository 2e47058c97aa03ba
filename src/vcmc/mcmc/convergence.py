"""When to stop a chain under ``--iterations auto`` (docs/design.md §4.1.1).

``ConvergenceMonitor`` is the driver's ``should_stop``: every ``check_every`` iterations past the burn-in
it looks at the draws the pivot relabeller has kept so far and answers True once

* the rank-normalised split R-hat of the log posterior and of every large component's relabelled weight
  is at most ``target_rhat``, and
* their bulk and tail ESS are at least ``target_ess / n_chains`` (each chain carries its share, so the
  pooled draws of the silo reach ``target_ess``).

Checks fall on ``burn_in + k check_every`` iterations, spaced geometrically once the chain is long
(``CHECK_GROWTH``).

The log posterior is label invariant and summarises the whole state; the weights of the large components
are the parameters the server aggregates. Components holding on average less than
``MIN_COMPONENT_WEIGHT`` of the weight are the over-fitted mixture's superfluous components: their weights
are prior noise, not parameters anyone reports. The R-hat and ESS are ArviZ's (``vcmc.mcmc.diagnostics``),
computed on one chain split in halves, so chains in different processes stop independently and the result
does not depend on the number of processes.
"""

from __future__ import annotations

import numpy as np

from vcmc.config import SamplerConfig
from vcmc.mcmc.diagnostics import ess, rhat

__all__ = ["ConvergenceMonitor", "MIN_COMPONENT_WEIGHT", "MIN_KEPT_DRAWS"]

MIN_COMPONENT_WEIGHT = 0.01
# Checks are spaced geometrically once the chain is long: the next one comes when the post-burn-in chain has
# grown by this factor (and at least check_every iterations later). A check costs 10-50 ms (ArviZ, growing
# with the draws); evenly spaced checks of a 50,000-iteration chain cost more than the relabelling saved by
# stopping early, geometric ones cost O(log T) checks and overshoot the first convergent point by <= 10%.
CHECK_GROWTH = 1.1
# Below this many kept draws the split R-hat and the ESS are too noisy to stop on (Vehtari et al. 2021
# use at least 50 draws per split half).
MIN_KEPT_DRAWS = 100


class ConvergenceMonitor:
    """``should_stop`` for one chain: True once its kept draws meet the targets of ``sampler``.

    Parameters
    ----------
    relabeller : PivotRelabeller
        The chain's ``on_block`` consumer; its draws so far are read at each check.
    sampler : SamplerConfig
        ``target_rhat``, ``target_ess``, ``check_every`` and ``n_chains``.

    Attributes
    ----------
    last : dict of str to float
        The statistics of the last check (``rhat``, ``ess_bulk``, ``ess_tail``, worst over the monitored
        quantities; ``n_kept``).
    converged : bool
        Whether the last check met the targets.
    """

    def __init__(self, relabeller, sampler: SamplerConfig):
        self.relabeller = relabeller
        self.target_rhat = float(sampler.target_rhat)
        self.target_ess = float(sampler.target_ess) / int(sampler.n_chains)
        self.check_every = int(sampler.check_every)
        self.min_kept = max(MIN_KEPT_DRAWS, int(np.ceil(self.target_ess)))
        self.burn_in = int(sampler.burn_in)
        self._next = self.burn_in + self.check_every
        self.last: dict[str, float] = {}
        self.converged = False

    def __call__(self, done: int) -> bool:
        if done < self._next:
            return False
        past = done - self.burn_in
        wanted = max(past + self.check_every, int(np.ceil(past * CHECK_GROWTH)))
        self._next = self.burn_in + self.check_every * int(np.ceil(wanted / self.check_every))
        log_posterior, pi = self.relabeller.draws_so_far()
        if log_posterior.size < self.min_kept:
            return False
        large = pi.mean(axis=0) >= MIN_COMPONENT_WEIGHT
        x = np.column_stack([log_posterior, pi[:, large]])[None]     # (1 chain, draws, quantities)
        r, bulk, tail = rhat(x), ess(x, "bulk"), ess(x, "tail")
        self.last = {"rhat": float(np.nanmax(r)), "ess_bulk": float(np.nanmin(bulk)),
                     "ess_tail": float(np.nanmin(tail)), "n_kept": float(log_posterior.size)}
        # NaN (constant draws, e.g. a one-component silo) counts as met: there is nothing left to mix.
        self.converged = bool(np.all(np.nan_to_num(r, nan=1.0) <= self.target_rhat)
                              and np.all(np.nan_to_num(bulk, nan=np.inf) >= self.target_ess)
                              and np.all(np.nan_to_num(tail, nan=np.inf) >= self.target_ess))
        return self.converged
