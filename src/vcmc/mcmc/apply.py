"""The apply step of one silo: Gibbs chains, online relabelling, post-processing (docs/design.md §4).

``run_apply_step`` spawns one random stream per chain from the silo's ``rng`` (``SeedSequence.spawn``),
runs every chain with the compiled sampler (``vcmc.mcmc.sampler.run_chain``) and its pivot relabeller as
the ``on_block`` consumer, aligns chains 2.. to chain 1, and post-processes the pooled relabelled draws
into a ``LocalPosterior`` with ArviZ diagnostics. Chains run in worker processes when ``jobs > 1``; each
chain's stream is fixed by its index, so the result does not depend on ``jobs``.

Memory stays O(n C+) per chain plus the thinned parameter draws: allocations are consumed block by block
and only their relabelled counts are kept.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from vcmc._rng import RngLike, spawn_generators
from vcmc.config import PostprocessConfig, PriorConfig, SamplerConfig
from vcmc.data.codes import check_codes as check_codes_
from vcmc.exceptions import ConfigError
from vcmc.mcmc.convergence import ConvergenceMonitor
from vcmc.mcmc.diagnostics import local_diagnostics
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.mcmc.postprocess import build_local_posterior, posterior_mode
from vcmc.mcmc.relabel import PSM_MAX_ROWS, PivotRelabeller, RelabelledChain, align_chains
from vcmc.mcmc.sampler import run_chain
from vcmc.model import profile_offsets
from vcmc.parallel import parallel_map, resolve_jobs

__all__ = ["run_apply_step", "run_relabelled_chain", "check_codes"]


def check_codes(codes, n_modalities) -> tuple[np.ndarray, tuple[int, ...]]:
    """The silo's codes checked against the modalities (``vcmc.data.codes``; at least 2 per variable)."""
    codes = check_codes_(codes, n_modalities, min_modalities=2)
    return codes, tuple(int(k) for k in n_modalities)


def run_relabelled_chain(codes: np.ndarray, n_modalities, *, prior: PriorConfig, sampler: SamplerConfig,
                         n_silos: int, rng: np.random.Generator, accumulate_psm: bool = False,
                         progress: Callable[[int], None] | None = None,
                         values: np.ndarray | None = None) -> RelabelledChain:
    """One Gibbs chain relabelled online (module-level so that worker processes can run it)."""
    # the chain's kept draws are relabelled where the sampler stores them (no second copy of 190 MB)
    n_col = int(profile_offsets(n_modalities)[-1]) + (0 if values is None else 2 * int(np.shape(values)[1]))
    storage = (np.empty((sampler.n_kept, prior.n_components)), np.empty((sampler.n_kept, prior.n_components, n_col)))
    relabeller = PivotRelabeller(codes.shape[0], prior.n_components, accumulate_psm=accumulate_psm, storage=storage)
    monitor = ConvergenceMonitor(relabeller, sampler) if sampler.stop == "converged" else None
    draws = run_chain(codes, n_modalities, prior=prior, sampler=sampler, n_silos=n_silos, rng=rng,
                      on_block=relabeller, progress=progress, should_stop=monitor, draw_storage=storage,
                      values=values)
    return relabeller.result(seconds=float(draws.seconds), n_iter=int(draws.n_iter),
                             converged=None if monitor is None else monitor.converged)


def _chain_task(task: tuple) -> RelabelledChain:
    codes, n_modalities, prior, sampler, n_silos, rng, accumulate_psm, values = task
    return run_relabelled_chain(codes, n_modalities, prior=prior, sampler=sampler, n_silos=n_silos, rng=rng,
                                accumulate_psm=accumulate_psm, values=values)


def run_apply_step(codes: np.ndarray, n_modalities, *, prior: PriorConfig | None = None,
                   sampler: SamplerConfig | None = None, postprocess: PostprocessConfig | None = None,
                   n_silos: int = 1, rng: RngLike = None, jobs: int = 1,
                   progress: Callable[[int], None] | None = None, values: np.ndarray | None = None) -> LocalPosterior:
    """Run the local MCMC of one silo and post-process it (docs/design.md §4.1-4.2).

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        The silo's integer codes (``-1`` = missing).
    n_modalities : sequence of int
        Modalities per variable of the shared schema.
    prior : PriorConfig, optional
        Priors and fractionation (default ``PriorConfig()``).
    sampler : SamplerConfig, optional
        Iterations, burn-in, thinning, number of chains (default ``SamplerConfig()``, the paper's run).
    postprocess : PostprocessConfig, optional
        Partition estimator and minimum local cluster size (default ``PostprocessConfig()``).
    n_silos : int
        S, the number of silos sharing the prior (fractionation uses it; 1 = no fractionation).
    rng : int, Generator, SeedSequence or None
        The silo's random stream; one child stream per chain is spawned from it.
    jobs : int or None
        Worker processes for the chains (1 = in this process, -1 or None = one per CPU, capped at the
        number of chains). The result does not depend on it.
    progress : callable, optional
        Called with a number of Gibbs iterations just completed (per block with ``jobs=1``; with worker
        processes, ``n_iter`` per chain once the chains have finished).
    values : ndarray of shape (n, G), float, optional
        The silo's Gaussian items, standardised (``NaN`` = missing; docs/design.md §17.3); their means and
        variances follow the profiles in every parameter row of the result.

    Returns
    -------
    LocalPosterior
        Partition, membership, label-consistent draws of the local clusters (chain-major concatenation of
        ``sampler.n_chains`` chains), label-invariant traces and diagnostics.
    """
    prior = PriorConfig() if prior is None else prior
    sampler = SamplerConfig() if sampler is None else sampler
    postprocess = PostprocessConfig() if postprocess is None else postprocess
    if not isinstance(n_silos, int | np.integer) or n_silos < 1:
        raise ConfigError(f"The 'n_silos' parameter of run_apply_step must be an int >= 1. Got {n_silos!r} "
                          "instead.")
    jobs = resolve_jobs(jobs, sampler.n_chains)
    if sampler.n_kept < 1:
        raise ConfigError(f"The 'thin' parameter of SamplerConfig must leave at least one kept draw after "
                          f"burn-in: n_iter={sampler.n_iter}, burn_in={sampler.burn_in}, thin={sampler.thin} "
                          "keep none.")
    codes, n_mod = check_codes(codes, n_modalities)
    accumulate_psm = postprocess.partition == "psm"
    if accumulate_psm and codes.shape[0] > PSM_MAX_ROWS:
        raise ConfigError(
            f"The 'partition' parameter of PostprocessConfig is 'psm', which needs an n x n posterior "
            f"similarity matrix; it is allowed for silos of at most {PSM_MAX_ROWS} rows. Got a silo of "
            f"{codes.shape[0]} rows instead: use partition='modal'.")

    t0 = time.perf_counter()
    gens = spawn_generators(rng, sampler.n_chains)
    if jobs == 1:
        chains = [run_relabelled_chain(codes, n_mod, prior=prior, sampler=sampler, n_silos=int(n_silos),
                                       rng=g, accumulate_psm=accumulate_psm, progress=progress, values=values)
                  for g in gens]
    else:
        tasks = [(codes, n_mod, prior, sampler, int(n_silos), g, accumulate_psm, values) for g in gens]
        chains = parallel_map(_chain_task, tasks, jobs=jobs)
        if progress is not None:
            for _ in chains:
                progress(sampler.n_iter)
    # --iterations auto: chains stop independently; the draws are pooled at the shortest chain's length.
    shortest = min(ch.n_kept for ch in chains)
    chains = align_chains([ch.head(shortest) for ch in chains])
    local = build_local_posterior(chains, codes, n_mod, n_components=prior.n_components,
                                  postprocess=postprocess, n_gaussian=0 if values is None else int(np.shape(values)[1]))
    diagnostics = local_diagnostics(local)
    diagnostics["seconds_sampler"] = float(sum(ch.seconds for ch in chains))
    diagnostics["seconds_apply"] = float(time.perf_counter() - t0)
    diagnostics["iterations_run"] = float(max(ch.n_iter for ch in chains))
    if sampler.stop == "converged":
        diagnostics["converged"] = float(all(bool(ch.converged) for ch in chains))
    diagnostics["k_hat"] = float(posterior_mode(local.n_occupied))
    # Under fractionation, components with a handful of members stay occupied (docs/design.md §4.2), so
    # k_hat over-counts; with the fixed-size rule on, the number of components reaching its threshold is the
    # more useful count (with the default resolution rule, the local number of clusters is that count).
    min_size = postprocess.threshold(codes.shape[0])
    if min_size > 1:
        large = np.concatenate([(ch.sizes >= min_size).sum(axis=1) for ch in chains])
        diagnostics["k_hat_min_size"] = float(posterior_mode(large))
    return dataclasses.replace(local, diagnostics=diagnostics)
