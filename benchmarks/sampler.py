"""Speed of the Gibbs sampler: microseconds per iteration, compile time, memory of the stored draws.

Cases:
  (a) n = 1,000 rows, the paper's variables (4 binary + 6 ternary), C+ = 15  (target <= 60 us/iteration);
  (b) n = 10,000 rows, 80 binary variables, C+ = 30;
  (c) n = 9,700 rows shaped like an electronic-health-records silo: 80 binary conditions with prevalences
      between 1% and 30% (about 6 present per person), 27 clusters of very unequal sizes, C+ = 30
      (target <= 400 us/iteration on the sparse path).
Data of (a) and (b) are drawn from a latent class model (6 clusters, profiles Dirichlet(0.5)), fractionated
prior of a silo among S = 4 (the setting of a local chain). Each case is timed on ``--runs`` chains of
``--iters`` iterations (median reported; compilation excluded: it is timed separately in a fresh process,
since the on-disk numba cache would otherwise hide it), on the path ``run_chain`` picks (``layout``), and
(b) and (c) also with the other path forced in the same run, alternating chain by chain (``ratio_*`` is the
median of the per-run ratios, so both sides see the same machine load). For case (a) a straightforward
numba loop (the issue's ~235 us reference) is timed after each chain, so the speed-up (median of per-run
ratios) does not depend on machine load; ``us_per_iter_at_235us_reference`` converts it to the issue's
machine. ``sparse_layout_290000x80_s`` is the time to build the sparse layout of 30 such silos stacked
(290,000 x 80). Prints ONE JSON line.

With ``--breakdown`` it also times the pieces of one sweep of case (a) (dense path) and of case (c) (sparse
path) in isolation, each in a compiled loop on a state reached by a short chain: the tables, the allocation
step (and the likelihood part of it alone, dense), the expansion of the counts, the parameter draws
(Dirichlet/Gamma) and the bookkeeping of a kept iteration (log joint and copies, amortised over the
thinning); ``other`` is the rest of the measured time (driver, calls, cache effects of running the pieces
together).

With ``--layout-model`` it times the allocation step of both paths on a few data sets next to the work
estimates that choose between them (``vcmc.mcmc.sampler.layout.work_estimates``).

With ``--against DIR`` (another checkout of the repository, e.g. ``git worktree add ../base main``) it
times case (c) only, alternately in this checkout and in DIR (``--runs`` alternations, each a fresh process
with that checkout's ``src`` first on the path, in an order that swaps every run), as CPU seconds of the
process (``time.process_time``: on a shared machine, waiting for a core is not counted) per iteration of
``run_chain``; ``ratio`` is the median of the per-alternation ratios this / DIR.

    python benchmarks/sampler.py [--runs 5] [--iters 2000] [--no-compile] [--breakdown] [--layout-model]
    python benchmarks/sampler.py --against DIR [--runs 3] [--iters 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
from numba import njit

import vcmc.dirichlet as DI
import vcmc.mcmc.sampler.draws as DR
import vcmc.mcmc.sampler.driver as DV
import vcmc.mcmc.sampler.intrinsics as IN
import vcmc.mcmc.sampler.kernels_dense as KD
import vcmc.mcmc.sampler.kernels_sparse as KS
import vcmc.mcmc.sampler.layout as LA
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.mcmc.sampler import run_chain
from vcmc.model import profile_offsets

CASES = {
    "a_n1000_q10_c15": dict(n=1000, k=[2] * 4 + [3] * 6, c=15),
    "b_n10000_q80_c30": dict(n=10_000, k=[2] * 80, c=30),
    # seed 3: 6.1 conditions per person on average, 2 to 33, 7,209 distinct rows
    "c_n9700_q80_c30_sparse": dict(n=9700, k=[2] * 80, c=30, data="ehr", seed=3),
}


def make_ehr_codes(n, n_var=80, n_clusters=27, seed=0):
    """An EHR-like silo: binary conditions with marginal prevalences log-uniform in [1%, 30%] (scaled to a
    mean of 6/80), cluster sizes decaying geometrically (16% down to 0.2% of the rows), each cluster with a
    lognormal "burden" (multimorbid clusters), lognormal noise per condition and two signature conditions;
    every person has at least two conditions (as in a multimorbidity cohort)."""
    rng = np.random.default_rng(seed)
    prev = np.clip(np.exp(rng.uniform(np.log(0.01), np.log(0.30), n_var)), 0.01, 0.30)
    prev = np.clip(prev * 0.075 / prev.mean(), 0.01, 0.30)
    w = np.exp(-np.arange(n_clusters) / 6.0)
    labels = rng.choice(n_clusters, size=n, p=w / w.sum())
    mult = np.exp(rng.normal(0.0, 1.0, (n_clusters, 1))) * rng.lognormal(0.0, 0.8, (n_clusters, n_var))
    for c in range(n_clusters):
        mult[c, rng.choice(n_var, 2, replace=False)] *= 8.0
    prof = prev * mult
    prof = np.clip(prof * (prev / ((w / w.sum()) @ prof)), 1e-3, 0.9)  # marginal prevalence ~ prev
    x = (rng.random((n, n_var)) < prof[labels]).astype(np.int64)
    few = x.sum(axis=1) < 2
    while few.any():
        rows = np.flatnonzero(few)
        x[rows, rng.choice(n_var, size=rows.size, p=prev / prev.sum())] = 1
        few = x.sum(axis=1) < 2
    return x


def case_codes(n, k, data="lcm", seed=0):
    return make_ehr_codes(n, len(k), seed=seed) if data == "ehr" else make_codes(n, k, seed=seed)


def make_codes(n, k, n_clusters=6, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_clusters, n)
    cols = []
    for kq in k:
        prof = rng.dirichlet(np.full(kq, 0.5), size=n_clusters)
        cdf = np.cumsum(prof[labels], axis=1)
        cols.append(np.minimum((rng.random((n, 1)) > cdf).sum(axis=1), kq - 1))
    return np.stack(cols, axis=1)


@njit(cache=True)
def _straightforward_sweeps(codes, offsets, z, pi, prof, alpha, beta, n_iter, rng):
    """The reference of the issue: a plain numba Gibbs loop (log-probabilities, one exp per row and
    component, numba's Generator gamma draws). Used to express the optimised kernel's speed as a ratio
    that does not depend on how loaded the machine is."""
    n, n_var = codes.shape
    n_comp, n_col = prof.shape
    lw = np.empty(n_comp)
    for _ in range(n_iter):
        logpi = np.log(pi)
        logp = np.log(prof)
        nc = np.zeros(n_comp)
        counts = np.zeros((n_comp, n_col))
        for i in range(n):
            mx = -np.inf
            for c in range(n_comp):
                s = logpi[c]
                for q in range(n_var):
                    s += logp[c, offsets[q] + codes[i, q]]
                lw[c] = s
                mx = max(mx, s)
            tot = 0.0
            for c in range(n_comp):
                lw[c] = np.exp(lw[c] - mx)
                tot += lw[c]
            t = rng.random() * tot
            k = 0
            acc = lw[0]
            while acc <= t and k < n_comp - 1:
                k += 1
                acc += lw[k]
            z[i] = k
            nc[k] += 1
            for q in range(n_var):
                counts[k, offsets[q] + codes[i, q]] += 1
        s = 0.0
        for c in range(n_comp):
            pi[c] = rng.standard_gamma(alpha + nc[c])
            s += pi[c]
        pi /= s
        for c in range(n_comp):
            for q in range(n_var):
                s = 0.0
                for j in range(offsets[q], offsets[q + 1]):
                    prof[c, j] = rng.standard_gamma(beta + counts[c, j])
                    s += prof[c, j]
                for j in range(offsets[q], offsets[q + 1]):
                    prof[c, j] /= s


class _Straightforward:
    """Times the reference loop on case data (one call = one timing of ``iters`` sweeps)."""

    def __init__(self, n, k, c):
        self.codes = make_codes(n, k)
        self.k, self.c, self.n = k, c, n
        self.offsets = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
        self.rng = np.random.default_rng(0)
        self(1)  # compile

    def __call__(self, iters):
        z = np.zeros(self.n, dtype=np.int64)
        pi = self.rng.dirichlet(np.ones(self.c))
        prof = np.concatenate([self.rng.dirichlet(np.ones(kq), size=self.c) for kq in self.k], axis=1)
        t0 = time.perf_counter()
        _straightforward_sweeps(self.codes, self.offsets, z, pi, prof, 0.7525, 0.875, iters, self.rng)
        return (time.perf_counter() - t0) / iters * 1e6


def time_case(n, k, c, iters, runs, thin=5, reference=False, data="lcm", compare=False, seed=0):
    """Median us/iteration of ``runs`` chains on the path ``run_chain`` picks; with ``reference`` each chain
    is followed by a timing of the straightforward loop (``iters // 4`` sweeps) and the speed-up is the
    median of the per-run ratios, so that both sides of every ratio see the same machine load; with
    ``compare`` each chain is followed by one on the other path (``iters_other`` iterations)."""
    from vcmc.mcmc.sampler.layout import choose_layout
    from vcmc.model import profile_offsets as _offsets

    codes = case_codes(n, k, data, seed)
    prior = PriorConfig(n_components=c)
    kk = np.asarray(k)
    path, _, est = choose_layout(LA._check_codes(codes, kk), kk, _offsets(kk), c)
    other = "dense" if path == "sparse" else "sparse"
    sampler = SamplerConfig(n_iter=iters, burn_in=0, thin=thin, block_size=min(iters, 1000))
    iters_other = max(20, iters // 5) if other == "dense" else iters
    sampler_other = SamplerConfig(n_iter=iters_other, burn_in=0, thin=thin, block_size=min(iters_other, 1000))
    ref = _Straightforward(n, k, c) if reference else None
    per_iter, per_ref, per_other = [], [], []
    for r in range(runs):
        draws = run_chain(codes, k, prior=prior, sampler=sampler, n_silos=4, rng=r)
        per_iter.append(draws.seconds / iters * 1e6)
        if ref is not None:
            per_ref.append(ref(max(10, iters // 4)))
        if compare:
            d = run_chain(codes, k, prior=prior, sampler=sampler_other, n_silos=4, rng=r, layout=other)
            per_other.append(d.seconds / iters_other * 1e6)
    # memory of the stored thinned draws of the paper's run (25,000 kept iterations / thin 5 = 5,000)
    p = int(np.sum(k))
    n_kept_paper = SamplerConfig().n_kept
    stored = n_kept_paper * (c + c * p + 2) * 8
    out = {"layout": path, "us_per_iter_median": round(float(np.median(per_iter)), 1),
           "us_per_iter_runs": [round(x, 1) for x in per_iter],
           "us_per_row_var_comp": round(float(np.median(per_iter)) * 1e3 / (n * len(k) * c), 3),
           "stored_draws_mb_paper_run": round(stored / 2**20, 1),
           "estimated_ns_dense": round(est.get("dense_ns", float("nan"))),
           "estimated_ns_sparse": round(est.get("sparse_ns", float("nan"))),
           "exceptions_per_row": round(est.get("exceptions_per_row", float("nan")), 2)}
    if compare:
        out[f"{other}_us_per_iter_median"] = round(float(np.median(per_other)), 1)
        out[f"{other}_us_per_iter_runs"] = [round(x, 1) for x in per_other]
        out[f"ratio_{other}_over_{path}"] = round(float(np.median(np.asarray(per_other) / np.asarray(per_iter))), 2)
        out["iters_other"] = iters_other
    if ref is not None:
        ratio = float(np.median(np.asarray(per_ref) / np.asarray(per_iter)))
        out["straightforward_us_per_iter"] = round(float(np.median(per_ref)), 1)
        out["speedup_vs_straightforward"] = round(ratio, 2)
        out["us_per_iter_at_235us_reference"] = round(235.0 / ratio, 1)  # the machine figure
    return out


def sparse_layout_seconds(runs=3) -> float:
    """Median time to build the sparse layout of 290,000 x 80 EHR-like rows (30 silos of (c) stacked)."""
    from vcmc.mcmc.sampler.layout import sparse_layout
    from vcmc.model import profile_offsets as _offsets

    x = LA._check_codes(np.concatenate([make_ehr_codes(9700, seed=s) for s in range(30)])[:290_000],
                       np.full(80, 2))
    off = _offsets(np.full(80, 2))
    sparse_layout(x[:100], off)  # compile or load
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sparse_layout(x, off)
        times.append(time.perf_counter() - t0)
    return round(float(np.median(times)), 3)


@njit(cache=True)
def _loop_tables(n_iter, pi, prof, grp_var, grp_off, radix, kmod, offsets, wpi, tab, gtab):
    for _ in range(n_iter):
        KD._fill_tables(pi, prof, wpi, tab)
        KD._fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab)


@njit(cache=True)
def _loop_weights(n_iter, gtab, gcode, check, w, cum, pre):
    s = 0.0
    for _ in range(n_iter):
        for u in range(gcode.shape[0]):
            s += KD._row_weights(gtab, gcode, u, check, w, cum, pre)
    return s


@njit(cache=True)
def _loop_allocate(n_iter, gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre,
                   lw, logtab, rng):
    for _ in range(n_iter):
        KD._allocate(gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw,
                    logtab, rng)


@njit(cache=True)
def _loop_expand(n_iter, cnt_g, grp_var, grp_off, radix, kmod, offsets, ct):
    for _ in range(n_iter):
        KD._expand_counts(cnt_g, grp_var, grp_off, radix, kmod, offsets, ct)


@njit(cache=True)
def _loop_parameters(n_iter, nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, want_log, rng):
    for _ in range(n_iter):
        DR._draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, want_log, rng)


@njit(cache=True)
def _loop_keep(n_iter, nc, ct, logpi, logprof, alpha, beta, offsets, const, z, pi, prof, keep_z, keep_pi,
               keep_prof):
    s = 0.0
    for _ in range(n_iter):
        s += DR._log_joint(nc, ct, logpi, logprof, alpha, beta, offsets, const)
        keep_pi[0] = pi
        keep_prof[0] = prof
        keep_z[0] = z
    return s


def breakdown(n, k, c, iters, runs, thin=5):
    """Microseconds per iteration of each piece of a sweep (medians of ``runs``), see the module docstring."""
    codes = make_codes(n, k)
    kk = np.asarray(k)
    prior = PriorConfig(n_components=c)
    alpha, beta = DV.local_prior(prior, kk, 4)
    offsets = profile_offsets(kk)
    x = LA._check_codes(codes, kk)
    lay = LA._layout(x, kk, offsets)
    const = DR._dirichlet_normaliser(alpha, beta, offsets)
    state = run_chain(codes, k, prior=prior, sampler=SamplerConfig(n_iter=500, burn_in=0, thin=5), n_silos=4,
                      rng=0, layout="dense")
    pi, prof = state.pi[-1].copy(), state.profiles[-1].copy()
    logpi, logprof = np.log(pi), np.log(prof)
    z = state.final_z.copy()
    n_col, n_var = int(offsets[-1]), kk.size
    lanes = -(-c // IN._LANES) * IN._LANES
    n_gt = int(lay.grp_off[-1])
    tab = np.zeros((n_col, lanes), np.float32)
    gtab = np.zeros((n_gt, lanes), np.float32)
    wpi = np.zeros(lanes, np.float32)
    w, cum, pre = np.empty(lanes, np.float32), np.empty(lanes, np.float32), np.empty(lanes // 4 + 1, np.float32)
    lw, logtab = np.empty(c), np.zeros((n_col + n_var, c))
    nc, cnt_g = np.zeros(c, np.int64), np.zeros((n_gt, lanes), np.int64)
    ct = np.zeros((n_col + n_var, lanes), np.int64)
    shp = np.empty(max(c, n_col))
    rng = np.random.default_rng(0)
    keep_z, keep_pi, keep_prof = np.empty((1, n), np.int16), np.empty((1, c)), np.empty((1, c, n_col))
    pieces = {
        "tables": lambda m: _loop_tables(m, pi, prof, lay.grp_var, lay.grp_off, lay.radix, lay.kmod, offsets,
                                         wpi, tab, gtab),
        "allocation": lambda m: _loop_allocate(m, gtab, lay.gcode, lay.pidx, lay.pat_start, lay.row_of,
                                               lay.check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw, logtab,
                                               rng),
        "expand_counts": lambda m: _loop_expand(m, cnt_g, lay.grp_var, lay.grp_off, lay.radix, lay.kmod,
                                                offsets, ct),
        "parameters": lambda m: _loop_parameters(m, nc, ct, alpha, beta, offsets, shp, pi.copy(), logpi.copy(),
                                                 prof.copy(), logprof.copy(), False, rng),
        "keep_per_iter": lambda m: _loop_keep(m, nc, ct, logpi, logprof, alpha, beta, offsets, const, z, pi,
                                              prof, keep_z, keep_pi, keep_prof),
        "allocation_likelihood_only": lambda m: _loop_weights(m, gtab, lay.gcode, lay.check, w, cum, pre),
    }
    out = {}
    for name, fn in pieces.items():
        fn(1)  # compile or load
        per = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(iters)
            per.append((time.perf_counter() - t0) / iters * 1e6)
        out[name] = float(np.median(per))
    out["keep_per_iter"] /= thin
    sampler = SamplerConfig(n_iter=iters, burn_in=0, thin=thin, block_size=min(iters, 1000))
    total = float(np.median([run_chain(codes, k, prior=prior, sampler=sampler, n_silos=4, rng=r,
                                       layout="dense").seconds / iters * 1e6 for r in range(runs)]))
    parts = ("tables", "allocation", "expand_counts", "parameters", "keep_per_iter")
    out["other"] = total - sum(out[p] for p in parts)
    out["total_run_chain"] = total
    out = {name: round(v, 1) for name, v in out.items()}
    out["patterns"] = int(lay.gcode.shape[0])
    out["groups"] = int(lay.gcode.shape[1])
    out["gamma_draws_per_iter"] = c * (n_col + 1)
    return out


@njit(cache=True)
def _loop_sparse_tables(n_iter, logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, tmp):
    for _ in range(n_iter):
        KS.fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, tmp)


@njit(cache=True)
def _loop_uniforms(n_iter, ubuf, rng):
    bg = rng.bit_generator
    for _ in range(n_iter):
        for r in range(ubuf.shape[0]):
            ubuf[r] = DI._unit(bg)


@njit(cache=True)
def _loop_sparse_pass(n_iter, bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol,
                      evar, n_col, ubuf, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, probs):
    n_fb = 0
    for it in range(n_iter):
        n_fb += KS._sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol,
                                evar, n_col, it, ubuf, True, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, probs)
    return n_fb


@njit(cache=True)
def _loop_sparse_expand(n_iter, nc, cnt, ecol, evar, base_col, ct):
    for _ in range(n_iter):
        KS._expand_sparse(nc, cnt, ecol, evar, base_col, ct)


@njit(cache=True)
def _loop_parameters_bg(n_iter, nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, rng):
    bg = rng.bit_generator
    for _ in range(n_iter):
        DR._draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, False, bg)


def _median_us(fn, iters, runs):
    fn(1)  # compile or load
    per = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(iters)
        per.append((time.perf_counter() - t0) / iters * 1e6)
    return float(np.median(per))


def breakdown_sparse(n, k, c, iters, runs, thin=5, data="ehr", seed=0):
    """Pieces of a sparse-path sweep (medians of ``runs``), as :func:`breakdown` for the dense path."""
    codes = case_codes(n, k, data, seed)
    kk = np.asarray(k)
    prior = PriorConfig(n_components=c)
    alpha, beta = DV.local_prior(prior, kk, 4)
    offsets = profile_offsets(kk)
    lay = LA.by_exception_count(LA.sparse_layout(LA._check_codes(codes, kk), offsets))  # the sampler's order
    const = DR._dirichlet_normaliser(alpha, beta, offsets)
    state = run_chain(codes, k, prior=prior, sampler=SamplerConfig(n_iter=300, burn_in=0, thin=5), n_silos=4,
                      rng=0, layout="sparse")
    pi, prof = state.pi[-1].copy(), state.profiles[-1].copy()
    logpi, logprof = np.log(pi), np.log(prof)
    z = state.final_z.copy()
    n_col, n_var = int(offsets[-1]), kk.size
    lanes = -(-c // IN._LANES) * IN._LANES
    n_slot = lay.n_slots
    bvec, rho = np.zeros(lanes), np.zeros((n_slot, lanes))
    lbase, nzero, tmp = np.empty(c), np.empty(c, np.int64), np.empty(0)  # no log scales
    KS.fill_ratio_tables(logpi, prof, lay.base_col, lay.ecol, lay.evar, n_col, bvec, rho, lbase, nzero, tmp)
    rng = np.random.default_rng(0)
    ubuf = rng.random(n)
    nc, cnt = np.zeros(c, np.int64), np.zeros(n_slot * lanes, np.int32)
    ct = np.zeros((n_col + n_var, lanes), np.int64)
    pass_args = (bvec, rho, lay.pexc_start, lay.pexc, lay.pexc * np.uint32(lanes), lay.pat_start, lbase, nzero,
                 prof, lay.base_col, lay.ecol, lay.evar, n_col, ubuf, z[lay.row_of], nc, cnt, np.empty(2 * lanes),
                 np.empty(2 * KS._pre_size(lanes // 4)), np.empty(c), np.empty((n_slot, c)),
                 np.zeros((n_slot, c), np.int64), np.full(n_slot, -1, np.int64), np.empty((0, c)))
    keep_z, keep_pi, keep_prof = np.empty((1, n), np.int16), np.empty((1, c)), np.empty((1, c, n_col))
    pieces = {
        "tables": lambda m: _loop_sparse_tables(m, logpi, prof, lay.base_col, lay.ecol, lay.evar, n_col, bvec,
                                                rho, lbase, nzero, tmp),
        "uniforms": lambda m: _loop_uniforms(m, np.empty(n), rng),
        "allocation": lambda m: _loop_sparse_pass(m, *pass_args),
        "expand_counts": lambda m: _loop_sparse_expand(m, nc, cnt, lay.ecol, lay.evar, lay.base_col, ct),
        "parameters": lambda m: _loop_parameters_bg(m, nc, ct, alpha, beta, offsets, np.empty(max(c, n_col)),
                                                    pi.copy(), logpi.copy(), prof.copy(), logprof.copy(), rng),
        "keep_per_iter": lambda m: _loop_keep(m, nc, ct, logpi, logprof, alpha, beta, offsets, const, z, pi,
                                              prof, keep_z, keep_pi, keep_prof),
    }
    out = {name: _median_us(fn, iters, runs) for name, fn in pieces.items()}
    out["keep_per_iter"] /= thin
    sampler = SamplerConfig(n_iter=iters, burn_in=0, thin=thin, block_size=min(iters, 1000))
    total = float(np.median([run_chain(codes, k, prior=prior, sampler=sampler, n_silos=4, rng=r,
                                       layout="sparse").seconds / iters * 1e6 for r in range(runs)]))
    out["other"] = total - sum(out.values())
    out["total_run_chain"] = total
    out = {name: round(v, 1) for name, v in out.items()}
    out["patterns"] = lay.n_patterns
    out["rows"] = n
    out["exceptions_per_pattern"] = round(lay.pexc.size / lay.n_patterns, 2)
    out["fallback_patterns_per_iter"] = int(_loop_sparse_pass(1, *pass_args))
    return out


def layout_model(runs=5):
    """Allocation step of both paths (tables, uniforms or not, draws, count expansion; no parameter step)
    timed in isolation on a few data sets, next to ``work_estimates``: the check behind the path choice."""
    from vcmc.mcmc.sampler.layout import choose_layout
    from vcmc.research.simulate import simulate_design

    sets = {
        "paper_silo_c15": (simulate_design("nested", "easy", rng=0).silos[0].codes, [2] * 4 + [3] * 6, 15),
        "paper_pooled_c15": (np.concatenate([s.codes for s in simulate_design("nested", "poor", rng=0).silos]),
                             [2] * 4 + [3] * 6, 15),
        "b_lcm_10000x80_c30": (make_codes(10_000, [2] * 80), [2] * 80, 30),
        "c_ehr_9700x80_c30": (make_ehr_codes(9700, seed=3), [2] * 80, 30),
        "ehr_9700x80_c15": (make_ehr_codes(9700, seed=3), [2] * 80, 15),
        "prev5pct_5000x20_c15": ((np.random.default_rng(3).random((5000, 20)) < 0.05).astype(np.int64), [2] * 20,
                                 15),
    }
    out = {}
    for name, (codes, k, c) in sets.items():
        kk = np.asarray(k)
        offsets = profile_offsets(kk)
        x = LA._check_codes(codes, kk)
        path, slay, est = choose_layout(x, kk, offsets, c)
        slay = LA.by_exception_count(slay)  # the order the sampler uses
        dlay = LA._layout(x, kk, offsets)
        state = run_chain(codes, k, prior=PriorConfig(n_components=c), sampler=SamplerConfig(n_iter=100, burn_in=0,
                          thin=100), n_silos=4, rng=0)
        pi, prof = state.pi[-1].copy(), state.profiles[-1].copy()
        logpi = np.log(pi)
        n, n_var, n_col = x.shape[0], kk.size, int(offsets[-1])
        lanes = -(-c // IN._LANES) * IN._LANES
        n_slot, n_gt = slay.n_slots, int(dlay.grp_off[-1])
        rng = np.random.default_rng(0)
        sargs = (logpi, prof, slay.base_col, slay.ecol, slay.evar, n_col, np.zeros(lanes), np.zeros((n_slot, lanes)),
                 np.empty(c), np.empty(c, np.int64), np.empty(0), slay.pexc_start, slay.pexc,
                 slay.pexc * np.uint32(lanes), slay.pat_start, np.empty(n), state.final_z[slay.row_of],
                 np.zeros(c, np.int64), np.zeros(n_slot * lanes, np.int32), np.empty(2 * lanes),
                 np.empty(2 * KS._pre_size(lanes // 4)), np.empty(c), np.empty((n_slot, c)),
                 np.zeros((n_slot, c), np.int64), np.full(n_slot, -1, np.int64), np.empty((0, c)),
                 np.zeros((n_col + n_var, lanes), np.int64), rng)
        dargs = (pi, prof, dlay.grp_var, dlay.grp_off, dlay.radix, dlay.kmod, offsets, np.zeros(lanes, np.float32),
                 np.zeros((n_col, lanes), np.float32), np.zeros((n_gt, lanes), np.float32), dlay.gcode, dlay.pidx,
                 dlay.pat_start, dlay.row_of, dlay.check, logpi, state.final_z.copy(), np.zeros(c, np.int64),
                 np.zeros((n_gt, lanes), np.int64), np.empty(lanes, np.float32), np.empty(lanes, np.float32),
                 np.empty(lanes // 4 + 1, np.float32), np.empty(c), np.zeros((n_col + n_var, c)),
                 np.zeros((n_col + n_var, lanes), np.int64), rng)
        m = max(20, int(3e5 // (n * n_var)))
        sparse_us = _median_us(lambda m_, a=sargs: _loop_sparse_alloc(m_, *a), m, runs)
        dense_us = _median_us(lambda m_, a=dargs: _loop_dense_alloc(m_, *a), m, runs)
        out[name] = {"choice": path, "dense_us": round(dense_us, 1), "sparse_us": round(sparse_us, 1),
                     "measured_ratio": round(sparse_us / dense_us, 2),
                     "estimated_dense_us": round(est["dense_ns"] / 1e3, 1),
                     "estimated_sparse_us": round(est["sparse_ns"] / 1e3, 1),
                     "estimated_ratio": round(est["sparse_ns"] / est["dense_ns"], 2)}
    return out


@njit(cache=True)
def _loop_sparse_alloc(n_iter, logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, tmp, pexc_start,
                       pexc, poff, pat_start, ubuf, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, probs, ct, rng):
    bg = rng.bit_generator
    for it in range(n_iter):
        KS.fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, tmp)
        for r in range(ubuf.shape[0]):
            ubuf[r] = DI._unit(bg)
        KS._sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar,
                        n_col, it, ubuf, True, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, probs)
        KS._expand_sparse(nc, cnt, ecol, evar, base_col, ct)


@njit(cache=True)
def _loop_dense_alloc(n_iter, pi, prof, grp_var, grp_off, radix, kmod, offsets, wpi, tab, gtab, gcode, pidx,
                      pat_start, row_of, check, logpi, z, nc, cnt_g, w, cum, pre, lw, logtab, ct, rng):
    for _ in range(n_iter):
        KD._fill_tables(pi, prof, wpi, tab)
        KD._fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab)
        KD._allocate(gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw, logtab,
                    rng)
        KD._expand_counts(cnt_g, grp_var, grp_off, radix, kmod, offsets, ct)


_COMPILE_SNIPPET = """
import os, time, tempfile
os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp()
t0 = time.perf_counter()
import numpy as np
from numba import njit
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.model import profile_offsets
from vcmc.mcmc.sampler import run_chain
t1 = time.perf_counter()
run_chain(np.zeros((5, 2), dtype=np.int64), [2, 3], prior=PriorConfig(n_components=3),
          sampler=SamplerConfig(n_iter=2, burn_in=0, thin=1), rng=0, layout="dense")
t2 = time.perf_counter()
run_chain(np.zeros((5, 2), dtype=np.int64), [2, 3], prior=PriorConfig(n_components=3),
          sampler=SamplerConfig(n_iter=2, burn_in=0, thin=1), rng=0, layout="sparse")
print(t1 - t0, t2 - t1, time.perf_counter() - t2)
"""


def compile_seconds() -> dict:
    """Cold compile in a fresh process with an empty numba cache, and the warm (cached) load."""
    out = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], capture_output=True, text=True,
                         check=True).stdout.split()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy as np\nfrom vcmc.mcmc.sampler import run_chain\n"
                    "from vcmc.config import PriorConfig, SamplerConfig\n"
                    "run_chain(np.zeros((5, 2), dtype=np.int64), [2, 3], prior=PriorConfig(n_components=3),"
                    " sampler=SamplerConfig(n_iter=2, burn_in=0, thin=1), rng=0)"], check=True)
    warm = time.perf_counter() - t0
    return {"import_s": round(float(out[0]), 2), "cold_compile_s": round(float(out[1]), 2),
            "cold_compile_sparse_extra_s": round(float(out[2]), 2), "warm_process_total_s": round(warm, 2)}


# One timing of case (c) in a fresh process whose ``vcmc`` is the given checkout's (the public API only, so
# that any version of the kernel can be timed): CPU microseconds per iteration of run_chain.
_AB_SNIPPET = """
import json, sys, time
import numpy as np
sys.path.insert(0, {bench!r})
from sampler import CASES, case_codes
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.mcmc.sampler import run_chain
import vcmc
case = CASES["c_n9700_q80_c30_sparse"]
codes = case_codes(case["n"], case["k"], case["data"], case["seed"])
prior = PriorConfig(n_components=case["c"])
run_chain(codes, case["k"], prior=prior, sampler=SamplerConfig(n_iter=5, burn_in=0, thin=5), n_silos=4, rng=0)
t = time.process_time()
run_chain(codes, case["k"], prior=prior, sampler=SamplerConfig(n_iter={iters}, burn_in=0, thin=5,
          block_size=min({iters}, 1000)), n_silos=4, rng={seed})
print(json.dumps({{"us": (time.process_time() - t) / {iters} * 1e6, "vcmc": vcmc.__file__}}))
"""


def against(other: str, runs: int, iters: int) -> dict:
    """Case (c) here and in the checkout ``other``, alternately (see the module docstring)."""
    import os
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent
    trees = {"this": here, "other": Path(other).resolve()}
    times = {"this": [], "other": []}
    for r in range(runs):
        for side in (("this", "other") if r % 2 == 0 else ("other", "this")):
            env = dict(os.environ, PYTHONPATH=str(trees[side] / "src"))
            code = _AB_SNIPPET.format(bench=str(here / "benchmarks"), iters=iters, seed=r)
            out = json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                            text=True).stdout.strip().splitlines()[-1])
            if not out["vcmc"].startswith(str(trees[side])):
                raise RuntimeError(f"the {side} run imported vcmc from {out['vcmc']}, not {trees[side]}")
            times[side].append(round(out["us"], 1))
    ratios = [a / b for a, b in zip(times["this"], times["other"], strict=True)]
    return {"case": "c_n9700_q80_c30_sparse", "iters": iters, "cpu_us_per_iter_this": times["this"],
            "cpu_us_per_iter_other": times["other"], "ratio": round(float(np.median(ratios)), 3),
            "ratios": [round(x, 3) for x in ratios], "other": str(trees["other"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--no-compile", action="store_true", help="skip the cold-compile measurement")
    ap.add_argument("--breakdown", action="store_true", help="time the pieces of a sweep of cases (a) and (c)")
    ap.add_argument("--layout-model", action="store_true", help="check the work estimates of the path choice")
    ap.add_argument("--against", default=None, metavar="DIR",
                    help="time case (c) alternately here and in the checkout DIR: CPU time, ratio this / DIR")
    args = ap.parse_args(argv)
    if args.against:
        from _provenance import commit

        print(json.dumps({"benchmark": "sampler-against", "command": " ".join(["python", *sys.argv]),
                          "commit": commit(), **against(args.against, args.runs, args.iters)}))
        return 0
    # warm up (and populate the cache) outside the timings
    for layout in ("dense", "sparse"):
        run_chain(make_codes(50, [2, 3]), [2, 3], prior=PriorConfig(n_components=3),
                  sampler=SamplerConfig(n_iter=3, burn_in=0, thin=1), rng=0, layout=layout)
    result = {"benchmark": "sampler", "target_a_us": 60, "target_c_us": 400}
    for name in args.cases:
        iters = {"a": args.iters, "b": max(50, args.iters // 20), "c": max(100, args.iters // 4)}[name[0]]
        result[name] = time_case(**CASES[name], iters=iters, runs=args.runs, reference=name.startswith("a"),
                                 compare=not name.startswith("a"))
        result[name]["iters"] = iters
    result["sparse_layout_290000x80_s"] = sparse_layout_seconds()
    if args.breakdown:
        result["breakdown_a_us_per_iter"] = breakdown(**CASES["a_n1000_q10_c15"], iters=args.iters, runs=args.runs)
        result["breakdown_c_sparse_us_per_iter"] = breakdown_sparse(**CASES["c_n9700_q80_c30_sparse"],
                                                                    iters=max(100, args.iters // 4), runs=args.runs)
    if args.layout_model:
        result["layout_model"] = layout_model(args.runs)
    if not args.no_compile:
        result["compile"] = compile_seconds()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
