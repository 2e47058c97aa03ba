"""The driver of one chain: initialisation, blocks of compiled iterations, burn-in, thinning, hand-over.

``run_chain`` owns the loop (random initialisation, then blocks of ``SamplerConfig.block_size`` iterations
in the compiled kernel of the chosen path, progress after each block) and hands the kept draws of each
block to the caller (``on_block``), so that the allocations of kept iterations are streamed and never
accumulated. ``sample_chains`` runs several chains, in processes when asked; each chain's stream is fixed
by its index, so results do not depend on the number of processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vcmc._rng import as_generator
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.exceptions import ConfigError
from vcmc.family import CATEGORICAL, GAUSSIAN
from vcmc.interrupt import interruptible
from vcmc.mcmc.sampler.draws import _count, _dirichlet_normaliser, _draw_parameters
from vcmc.mcmc.sampler.kernels_dense import _gibbs_block
from vcmc.mcmc.sampler.kernels_mixed import _draw_gaussian, _gaussian_stats, _gibbs_block_mixed, mixed_rows
from vcmc.mcmc.sampler.kernels_sparse import _gibbs_block_sparse, initial_counts
from vcmc.mcmc.sampler.layout import (
    _check_codes,
    _check_modalities,
    _layout,
    _table_index,
    by_exception_count,
    choose_layout,
    row_layout,
)
from vcmc.model import fractionate, profile_offsets


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class KeptBlock:
    """Kept draws of one block of iterations, handed to ``on_block``: the allocations a copy, the other fields
    read-only views of the chain's stored draws (each written once).

    Attributes
    ----------
    start : int
        Index (0-based, within the chain's kept draws) of the first draw of this block.
    z : ndarray of shape (m, n), int16
        Component ``0..C+-1`` of every row at each kept iteration (raw labels).
    pi : ndarray of shape (m, C+), float64
        Weights.
    profiles : ndarray of shape (m, C+, P), float64
        Flat profiles (``vcmc.model`` layout).
    n_occupied : ndarray of shape (m,), int64
        Number of non-empty components.
    log_posterior : ndarray of shape (m,), float64
        Complete-data log joint ``log p(X, z, pi, p)`` under the (fractionated) prior actually used; label
        invariant.
    """

    start: int
    z: np.ndarray
    pi: np.ndarray
    profiles: np.ndarray
    n_occupied: np.ndarray
    log_posterior: np.ndarray

    @property
    def size(self) -> int:
        return int(self.pi.shape[0])


@dataclass(frozen=True)
class ChainDraws:
    """All kept draws of one chain except the allocations (streamed through ``on_block`` only).

    Attributes
    ----------
    pi : ndarray of shape (T, C+)
    profiles : ndarray of shape (T, C+, P)
    n_occupied : ndarray of shape (T,), int64
    log_posterior : ndarray of shape (T,)
    final_z : ndarray of shape (n,), int16
        Allocation after the last iteration.
    seconds : float
        Sampling wall time (compilation or cache loading excluded).
    n_iter : int
        Iterations actually run: ``sampler.n_iter``, or fewer when ``should_stop`` ended the chain.
    """

    pi: np.ndarray
    profiles: np.ndarray
    n_occupied: np.ndarray
    log_posterior: np.ndarray
    final_z: np.ndarray
    seconds: float
    n_iter: int = 0


# ------------------------------------------------------------------------------------------- helpers
def local_prior(prior: PriorConfig, n_modalities, n_silos: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Dirichlet parameters of one silo's chain after prior fractionation (docs/design.md §4.1).

    Parameters
    ----------
    prior : PriorConfig
    n_modalities : sequence of int
        ``K^q`` of every variable.
    n_silos : int
        S; the local parameters are ``(a - 1)/S + 1`` when ``prior.fractionate`` (else ``a``).

    Returns
    -------
    alpha_local : ndarray of shape (C+,)
    beta_local : ndarray of shape (P,)
    """
    if not isinstance(n_silos, int | np.integer) or n_silos < 1:
        raise ConfigError(f"The 'n_silos' parameter of local_prior must be an int >= 1. Got {n_silos!r} "
                          "instead.")
    k = _check_modalities(n_modalities)
    if isinstance(prior.beta, tuple) and len(prior.beta) != k.size:
        raise ConfigError(f"The 'beta' parameter of PriorConfig must be one float or one per variable "
                          f"({k.size} variables). Got {len(prior.beta)} values instead.")
    alpha = np.full(prior.n_components, float(prior.alpha))
    s = int(n_silos)
    return (np.asarray(fractionate(alpha, s, prior.fractionate), dtype=np.float64).copy(),
            CATEGORICAL.local_prior(prior, k, s))


def check_values(values, n_rows: int) -> np.ndarray:
    """The standardised Gaussian items as C-contiguous float64 (n, G), ``NaN`` = missing; (n, 0) when none."""
    if values is None:
        return np.empty((n_rows, 0))
    xg = np.ascontiguousarray(values, dtype=np.float64)
    if xg.ndim != 2 or xg.shape[0] != n_rows:
        raise ConfigError(f"values must have shape ({n_rows}, G) (the rows of the codes); got {xg.shape}")
    if np.isinf(xg).any():
        raise ConfigError("values must be finite or NaN (missing)")
    return xg


def _read_only(view: np.ndarray) -> np.ndarray:
    """``view`` marked read-only (a consumer of a kept block cannot change the chain's draws through it)."""
    view.flags.writeable = False
    return view


def kept_iterations(sampler: SamplerConfig) -> np.ndarray:
    """0-based iteration indices kept after burn-in and thinning (``sampler.n_kept`` of them)."""
    return np.arange(sampler.burn_in + sampler.thin - 1, sampler.n_iter, sampler.thin)


# -------------------------------------------------------------------------------------------- driver
def run_chain(codes: np.ndarray, n_modalities, *, prior: PriorConfig, sampler: SamplerConfig,
              n_silos: int = 1, rng=None, on_block: Callable[[KeptBlock], None] | None = None,
              progress: Callable[[int], None] | None = None, layout: str = "auto",
              should_stop: Callable[[int], bool] | None = None,
              initial_allocation: np.ndarray | None = None,
              draw_storage: tuple[np.ndarray, np.ndarray] | None = None,
              values: np.ndarray | None = None) -> ChainDraws:
    """Run one Gibbs chain of the (fractionated) over-fitted latent class model.

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        Integer codes ``0..K^q - 1``, ``-1`` for missing (skipped in the likelihood and the counts).
    n_modalities : sequence of int
        ``K^q`` of every variable.
    prior : PriorConfig
        C+, alpha, beta and whether to fractionate.
    sampler : SamplerConfig
        ``n_iter``, ``burn_in``, ``thin`` and ``block_size`` (iterations per compiled call).
    n_silos : int
        S of the fractionation (1 for pooled data).
    rng : int, Generator or None
        This chain's stream (spawn one per chain from the root seed with ``vcmc._rng.spawn_generators``).
    on_block : callable or None
        Called after every block that kept at least one draw with a :class:`KeptBlock`; the only place
        where allocations of kept iterations are available (they are not stored).
    progress : callable or None
        Called after every block with the number of iterations just completed (an increment, as
        ``tqdm.update`` expects).
    layout : {"auto", "dense", "sparse"}
        Allocation-step path. ``"auto"`` (default) picks it from the data by estimated work per sweep
        (:func:`vcmc.mcmc.sampler.layout.choose_layout`): the dense grouped tables, or the sparse path whose cost
        per row grows with the row's non-baseline values (electronic health records). Both sample the same
        model exactly; they consume the random stream differently, so the draws of one seed differ.
    should_stop : callable or None
        Called after every block that ends past the first kept draw with the number of iterations done;
        returning True ends the chain there (``--iterations auto``: ``vcmc.mcmc.convergence``). The draws
        kept so far are returned; ``ChainDraws.n_iter`` says how many iterations ran.
    initial_allocation : ndarray of shape (n,), int, optional
        Start from these allocations (components ``0..C+-1``) instead of uniform random ones; the weights
        and profiles are then drawn given them as usual (benchmarks/refinement.py starts a pooled chain
        from a VCMC solution this way).
    draw_storage : (ndarray, ndarray), optional
        C-contiguous float64 arrays of shapes ``(sampler.n_kept, C+)`` and ``(sampler.n_kept, C+, P)`` the kept
        weights and profiles are written to (default: new ones). An ``on_block`` consumer given the same
        arrays may change the draws of a block in place once it has it (the pivot relabeller relabels them
        there); the returned ``ChainDraws`` holds them as the consumer left them.
    values : ndarray of shape (n, G), float, optional
        Standardised Gaussian items (``NaN`` = missing; docs/design.md §17.3). With ``G > 0`` the chain runs the
        mixed kernel (``kernels_mixed``) whatever ``layout`` says, and every parameter row is ``(p, mu, sigma2)``:
        ``P + 2G`` columns in the draws and the storage.

    Returns
    -------
    ChainDraws

    Notes
    -----
    Random initialisation: allocations uniform over the C+ components, then weights and profiles from
    their full conditionals given them. Kept iterations are ``burn_in + thin - 1, burn_in + 2 thin - 1,
    ...`` (0-based), i.e. ``sampler.n_kept`` draws.
    """
    k = _check_modalities(n_modalities)
    x = _check_codes(codes, k)
    n, _ = x.shape
    n_comp = prior.n_components
    if n_comp > np.iinfo(np.int16).max:
        raise ConfigError(f"The 'n_components' parameter of PriorConfig must be at most "
                          f"{np.iinfo(np.int16).max} (allocations are int16). Got {n_comp}.")
    alpha, beta = local_prior(prior, k, n_silos)
    offsets = profile_offsets(k)
    n_col = int(offsets[-1])
    const = _dirichlet_normaliser(alpha, beta, offsets)
    gen = as_generator(rng)
    xg = check_values(values, n)
    n_par = n_col + 2 * xg.shape[1]          # the flat parameter row: profiles, then means and variances
    gprior = GAUSSIAN.local_prior(prior, xg.shape[1], n_silos)

    if xg.shape[1]:
        path, slay = "mixed", None
    else:
        path, slay, _ = choose_layout(x, k, offsets, n_comp, layout)
    if slay is not None:
        slay = by_exception_count(slay)

    # Random initialisation (paper section 5.1): uniform allocations, parameters given them.
    z = gen.integers(0, n_comp, size=n).astype(np.int16)
    if initial_allocation is not None:
        start = np.asarray(initial_allocation)
        if start.shape != (n,) or start.dtype.kind not in "iu" or start.min() < 0 or start.max() >= n_comp:
            raise ConfigError(f"initial_allocation must be {n} ints in [0, {n_comp}); got shape {start.shape}, "
                              f"dtype {start.dtype}")
        z = start.astype(np.int16)
    pi = np.empty(n_comp)
    logpi = np.empty(n_comp)
    prof = np.empty((n_comp, n_par))
    logprof = np.empty((n_comp, n_par))
    if path in ("dense", "mixed"):
        lay = _layout(x, k, offsets) if path == "dense" else None
        nc = np.zeros(n_comp, dtype=np.int64)
        ct = np.zeros((n_col + k.size, n_comp), dtype=np.int64)
        _count(_table_index(x, offsets), z.astype(np.int64), nc, ct)
    else:
        nc, ct = initial_counts(slay, z, n_comp, n_col + k.size)
    _draw_parameters(nc, ct, alpha, beta, offsets, np.empty(max(n_comp, n_col)), pi, logpi, prof, logprof,
                     False, gen)
    if path == "mixed":
        gstat = np.zeros((n_comp, 3 * xg.shape[1]))
        _gaussian_stats(xg, z, gstat)
        _draw_gaussian(gstat, gprior, prof, n_col, gen)
        rlay = row_layout(x, offsets)
        pidx, xstat, has_miss = mixed_rows(_table_index(x, offsets), xg, rlay.row_of)

    n_kept_total = sampler.n_kept
    if draw_storage is None:
        out_pi = np.empty((n_kept_total, n_comp))
        out_prof = np.empty((n_kept_total, n_comp, n_par))
    else:
        out_pi, out_prof = draw_storage
        for arr, shape in ((out_pi, (n_kept_total, n_comp)), (out_prof, (n_kept_total, n_comp, n_par))):
            if arr.shape != shape or arr.dtype != np.float64 or not arr.flags.c_contiguous:
                raise ConfigError(f"draw_storage must be C-contiguous float64 arrays of shapes "
                                  f"{(n_kept_total, n_comp)} and {(n_kept_total, n_comp, n_par)}; got {arr.shape} "
                                  f"{arr.dtype}")
    out_nocc = np.empty(n_kept_total, dtype=np.int64)
    out_lp = np.empty(n_kept_total)
    block = sampler.block_size
    z_buf = np.empty((-(-block // sampler.thin), n), dtype=np.int16)  # most kept iterations in one block

    def call(first, n_it, keep_at):
        if path == "mixed":
            return _gibbs_block_mixed(rlay.base_col, rlay.ecol, rlay.evar, rlay.row_of, rlay.pexc_start, rlay.pexc,
                                      pidx, xstat, has_miss, z, pi, logpi, prof, logprof, alpha, beta, offsets, const,
                                      gprior, n_it, first, sampler.burn_in, sampler.thin, z_buf, out_pi, out_prof,
                                      out_nocc, out_lp, keep_at, gen)
        if path == "sparse":
            return _gibbs_block_sparse(slay.base_col, slay.ecol, slay.evar, slay.pat_start, slay.row_of,
                                              slay.pexc_start, slay.pexc, z, pi, logpi, prof, logprof, alpha,
                                              beta, offsets, const, n_it, first, sampler.burn_in, sampler.thin,
                                              z_buf, out_pi, out_prof, out_nocc, out_lp, keep_at, gen)
        return _gibbs_block(lay.gcode, lay.pidx, lay.pat_start, lay.row_of, lay.grp_var, lay.grp_off,
                            lay.radix, lay.kmod, lay.check, z, pi, logpi, prof, logprof, alpha, beta,
                            offsets, const, n_it, first, sampler.burn_in, sampler.thin, z_buf, out_pi,
                            out_prof, out_nocc, out_lp, keep_at, gen)

    # compile or load from cache outside the timed loop (draws nothing); compiling takes a minute on a fresh
    # checkout, during which a signal must still end the run at once (docs/design.md §4.1)
    interruptible(call, 0, 0, 0)
    t0 = time.perf_counter()
    done = 0
    kept = 0
    while done < sampler.n_iter:
        n_it = min(block, sampler.n_iter - done)
        if should_stop is not None and done + n_it > sampler.burn_in:
            # blocks end on the convergence checks (burn_in + k check_every), so where a chain stops does
            # not depend on the block size
            past = done - sampler.burn_in
            to_check = sampler.check_every - past % sampler.check_every if past >= 0 else -past
            n_it = min(n_it, to_check)
        m = call(done, n_it, kept)
        if m and on_block is not None:
            sl = slice(kept, kept + m)
            # read-only views of the kept draws (the sampler writes each slot once); the allocations' buffer is
            # reused by the next block, so they are copied
            on_block(KeptBlock(start=kept, z=z_buf[:m].copy(), pi=_read_only(out_pi[sl]),
                               profiles=_read_only(out_prof[sl]), n_occupied=_read_only(out_nocc[sl]),
                               log_posterior=_read_only(out_lp[sl])))
        kept += m
        done += n_it
        if progress is not None:
            progress(n_it)
        if should_stop is not None and kept and done < sampler.n_iter and should_stop(done):
            if progress is not None:
                progress(sampler.n_iter - done)      # the bar shows the chain as finished
            break
    seconds = time.perf_counter() - t0
    return ChainDraws(pi=out_pi[:kept], profiles=out_prof[:kept], n_occupied=out_nocc[:kept],
                      log_posterior=out_lp[:kept], final_z=z.copy(), seconds=seconds, n_iter=done)


def _chain_worker(task: tuple) -> ChainDraws:
    codes, n_modalities, prior, sampler, n_silos, seed = task
    return run_chain(codes, n_modalities, prior=prior, sampler=sampler, n_silos=n_silos, rng=seed)


def sample_chains(codes: np.ndarray, n_modalities, *, prior: PriorConfig, sampler: SamplerConfig,
                  n_silos: int = 1, rng=None, jobs: int | None = 1) -> list[ChainDraws]:
    """Run ``sampler.n_chains`` independent chains, in parallel processes when ``jobs > 1``.

    One Generator stream per chain is spawned from ``rng`` (``SeedSequence.spawn``), so the draws do not
    depend on ``jobs`` and adding a chain never changes the others. Allocations of kept iterations are not
    returned (use :func:`run_chain` with ``on_block`` inside a worker for that).

    Returns
    -------
    list of ChainDraws
        One per chain, in chain order.
    """
    from vcmc._rng import as_seed_sequence
    from vcmc.parallel import parallel_map

    seeds = as_seed_sequence(rng).spawn(sampler.n_chains)
    tasks = [(codes, n_modalities, prior, sampler, n_silos, s) for s in seeds]
    return parallel_map(_chain_worker, tasks, jobs=jobs)
