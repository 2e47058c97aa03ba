"""Kernels of the sparse path of the Gibbs sampler: a row costs in proportion to its exceptions, not to the
number of variables.

Used by :func:`vcmc.mcmc.sampler.driver.run_chain` when the data are mostly one code per variable
(electronic health records: ~80 binary conditions, a handful present per person); the choice is made from
the data by :func:`vcmc.mcmc.sampler.layout.choose_layout`. The sampled model, the parameter step and the
kept-draw bookkeeping are those of the dense path (:mod:`.kernels_dense`, :mod:`.draws`); only the
allocation step and the counts differ.

Baseline coding. Per variable ``q`` the *baseline* code ``b_q`` is the most frequent observed code in this
silo's data. A cell is an *exception* when it is missing or differs from the baseline; each (variable,
non-baseline code) pair and each (variable, missing) pair that occurs is an exception *slot* ``e``. For a
component ``c``::

    pi_c prod_q p^q_{x_iq, c} = B_c * prod_{e in exceptions(i)} R_{e, c},
    B_c = pi_c prod_q p^q_{b_q, c},   R_{e, c} = p^q_{x, c} / p^q_{b_q, c}   (1 / p^q_{b_q, c} if missing),

so one sweep computes the baseline vector ``B`` and the ratio table ``R`` once (over the C+ lanes) and each
row multiplies only its exceptions. Counts are kept per slot and component; the baseline code's count is
derived once per sweep as ``n_c`` minus the variable's exception counts (missing ones included).

Exactness. ``B`` is divided by its maximum and each ratio column by its maximum over components, so every
factor is in [0, 1] and a row's weights can only shrink. The shrinkage of the best component is much larger
than on the dense path (a column's maximum ratio often belongs to an empty component drawn from the prior:
on an EHR-like silo a third of the rows shrink below 1e-20 and some to 1e-65), which float32 cannot hold,
so the products are float64 (4-lane vectors ``intrinsics._v4d_*``): entries below ``_FLUSH`` are stored as 0 and a
row whose total falls below ``_FALLBACK_BELOW`` is recomputed exactly in float64 log space. A flushed factor
was below 1e-300 of a column maximum and the products only shrink, so it changes a probability by less than
``_FLUSH / _FALLBACK_BELOW`` = 1e-100. A baseline probability below ``_TINY_BASE`` (0 included: sparse
Dirichlet draws) would make its ratios overflow; those ratios are stored as NaN, which propagates to the
row's total, so every row with such an exception takes the exact fallback (where an exact zero of the
baseline is handled by counting). Rows with identical exception lists (= identical rows) share one
likelihood computation. The driver hands the kernel its patterns ordered by number of exceptions
(:func:`vcmc.mcmc.sampler.layout.by_exception_count`): the per-pattern loops over exceptions then have
predictable trip counts (in first-appearance order their exit was mispredicted about once per pattern).

Random variates. The allocation uniforms (one per row, drawn for the whole sweep before the row loop: a
bit-generator call inside it costs twice as much) and the parameter step's variates come straight from the
chain's bit generator (``vcmc.dirichlet._unit`` and friends), so for one seed the sparse path's draws
differ from the dense path's; their law is the same (tests/mcmc/test_sampler_sparse.py).

Speed: see the module docstring of :mod:`vcmc.mcmc.sampler` (figures) and ``benchmarks/sampler.py``
(case c, ``--breakdown``, ``--layout-model``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vcmc.dirichlet import _unit
from vcmc.mcmc.sampler.draws import _draw_parameters, _keep_draw
from vcmc.mcmc.sampler.intrinsics import _LANES, _LANES64, _count_row, _v4d_pick, _v4d_prod2, _v4d_prod4, _v4d_prod8
from vcmc.mcmc.sampler.layout import SparseLayout

# Float64 products of factors in [0, 1]: a row whose total is below this is recomputed in log space.
_FALLBACK_BELOW = 1e-200


# Table entries (relative to their column maximum) below this are stored as 0 (never a subnormal).
_FLUSH = 1e-300


# A baseline probability below this makes the ratios of its variable NaN for that component (exact fallback
# for the rows concerned): p / b stays below 1e280, far from the float64 limit.
_TINY_BASE = 1e-280


# The baseline product multiplies probabilities >= this directly and rescales the running product below
# _RESCALE_BELOW (so it never leaves the normal float64 range); smaller ones are added as logs.
_DIRECT_MIN = 1e-100


_RESCALE_BELOW = 1e-200


# ---------------------------------------------------------------------------------------- kernels
@njit(cache=True)
def fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, beta, rho, lbase, nzero, lscale):
    """Baseline vector and ratio table of one draw of the parameters (see the module docstring); the one
    implementation for the sampler's sweeps and for labelling and assessment (:mod:`vcmc.rows.row_kernels`).

    ``lbase[c]`` receives ``log pi_c + sum_q log p^q_{b_q, c}`` over the non-zero baseline probabilities and
    ``nzero[c]`` the number of zero ones (exact, for the fallback). ``beta`` is ``B / max B`` and row ``e``
    of ``rho`` is ``R_{e, .} / max R_{e, .}``, entries below ``_FLUSH`` set to 0, NaN where the baseline
    probability is below ``_TINY_BASE`` and the numerator positive; ``lscale[e]`` receives ``log max R_{e, .}``
    when ``lscale`` is not empty (a row's log density needs it, the sampler does not). Lanes ``>= C+`` are
    left untouched. Returns ``log max B`` (``-inf`` if every component has a zero baseline probability or
    weight; ``beta`` is then 0).
    """
    n_comp = prof.shape[0]
    n_var = base_col.shape[0]
    want_scale = lscale.shape[0] > 0
    lmx = -np.inf
    for c in range(n_comp):
        lacc = logpi[c]
        acc = 1.0
        nz = 0
        for q in range(n_var):
            p = prof[c, base_col[q]]
            if p >= _DIRECT_MIN:
                acc *= p
                if acc < _RESCALE_BELOW:
                    lacc += math.log(acc)
                    acc = 1.0
            elif p > 0.0:
                lacc += math.log(p)
            else:
                nz += 1
        lb = lacc + math.log(acc)
        lbase[c] = lb
        nzero[c] = nz
        if nz == 0 and lb > lmx:
            lmx = lb
    for c in range(n_comp):
        v = math.exp(lbase[c] - lmx) if nzero[c] == 0 and lmx > -np.inf else 0.0
        beta[c] = v if v >= _FLUSH else 0.0
    for e in range(ecol.shape[0]):
        j = ecol[e]
        b = base_col[evar[e]]
        mx = 0.0
        for c in range(n_comp):
            px = prof[c, j] if j < n_col else 1.0
            pb = prof[c, b]
            if px == 0.0:
                r = 0.0
            elif pb < _TINY_BASE:
                r = np.nan
            else:
                r = px / pb
                if r > mx:
                    mx = r
            rho[e, c] = r
        inv = 1.0 / mx if mx > 0.0 else 0.0
        if want_scale:
            lscale[e] = math.log(mx) if mx > 0.0 else -np.inf
        for c in range(n_comp):
            v = rho[e, c] * inv  # NaN stays NaN
            rho[e, c] = 0.0 if v < _FLUSH else v
    return lmx


@njit(cache=True)
def _sparse_logweights(lbase, nzero, prof, base_col, ecol, evar, n_col, pexc, e0, e1, lrat, zhit, stamp,
                       sweep, lw):
    """Exact float64 weights (max 1) of one pattern via log-sum-exp.

    ``log w_c = lbase_c + sum_e (log p_{x_e, c} - log p_{b, c})``; a zero baseline probability is not in
    ``lbase`` but counted in ``nzero`` and must be covered by an exception of its variable, else
    ``w_c = 0``. Per-slot logs are computed once per sweep (``stamp``) in ``lrat``/``zhit``.
    """
    n_comp = lw.shape[0]
    for e in range(e0, e1):
        s = pexc[e]
        if stamp[s] != sweep:
            stamp[s] = sweep
            j = ecol[s]
            b = base_col[evar[s]]
            for c in range(n_comp):
                px = prof[c, j] if j < n_col else 1.0
                pb = prof[c, b]
                lx = math.log(px) if px > 0.0 else -np.inf
                if pb > 0.0:
                    lrat[s, c] = lx - math.log(pb)
                    zhit[s, c] = 0
                else:
                    lrat[s, c] = lx
                    zhit[s, c] = 1
    lmx = -np.inf
    for c in range(n_comp):
        v = lbase[c]
        z = nzero[c]
        for e in range(e0, e1):
            s = pexc[e]
            v += lrat[s, c]
            z -= zhit[s, c]
        if z > 0:
            v = -np.inf
        lw[c] = v
        lmx = max(lmx, v)
    for c in range(n_comp):
        lw[c] = math.exp(lw[c] - lmx)


@njit(cache=True)
def _count_sparse(z, pat_start, row_of, pexc_start, pexc, n_lane, nc, cnt):
    """Component sizes and exception counts ``cnt[s * n_lane + c]`` of an allocation."""
    nc[:] = 0
    cnt[:] = 0
    for u in range(pat_start.shape[0] - 1):
        for r in range(pat_start[u], pat_start[u + 1]):
            k = z[row_of[r]]
            nc[k] += 1
            for e in range(pexc_start[u], pexc_start[u + 1]):
                cnt[np.intp(pexc[e]) * n_lane + k] += 1


@njit(cache=True)
def _expand_sparse(nc, cnt, ecol, evar, base_col, ct):
    """Per-(column, component) counts: exception slots copied, each baseline code's count derived as
    ``n_c`` minus the exception (and missing) counts of its variable. Rows ``P + q`` hold missing counts."""
    n_comp = nc.shape[0]
    n_lane = ct.shape[1]
    ct[:, :] = 0
    for q in range(base_col.shape[0]):
        b = base_col[q]
        for c in range(n_comp):
            ct[b, c] = nc[c]
    for e in range(ecol.shape[0]):
        j = ecol[e]
        b = base_col[evar[e]]
        for c in range(n_comp):
            v = cnt[e * n_lane + c]
            ct[j, c] = v
            ct[b, c] -= v


@njit(cache=True)
def _pre_size(n_blk):
    """Entries of the block prefix sums: pre[0..n_blk], then +inf up to whole 4-lane compares (two at least,
    made without a loop by the draw)."""
    return 1 + _LANES64 * max(2, (n_blk + _LANES64 - 1) // _LANES64)


@njit(cache=True)
def _sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar, n_col,
                 sweep, ubuf, draw, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, probs):
    """Step 1 of a sweep on the sparse path: every row's component into ``zp``, ``nc`` (sizes) and ``cnt``
    (flat, ``cnt[s * L + c]`` per slot and component lane), one likelihood computation per pattern; ``poff``
    is ``pexc * L``, the offset of each slot's row in ``rho`` and ``cnt``. Rows are in pattern order: ``zp[r]``
    and the uniform ``ubuf[r]`` belong to row ``row_of[r]`` (sequential stores; the caller scatters ``zp``
    when it needs the allocations). With ``draw`` False it draws nothing and writes each pattern's normalised
    probabilities to ``probs[u]`` instead (the tests' view of this very code). Returns how many patterns
    took the exact log-space fallback.

    Software-pipelined: the weights of pattern ``u + 1`` are computed (into the other half of the
    double-length ``w`` and ``pre``) before the rows of pattern ``u`` are drawn, so that the two long
    dependency chains (products then running totals; draw then counts) overlap instead of running one after
    the other. One function for the whole pass, the pieces being intrinsics: numba inlines a helper taking
    arrays with reference-count updates at every call.
    """
    n_lane = bvec.shape[0]
    n_comp = nc.shape[0]
    n_blk = n_lane // _LANES64
    n_cmp = (n_blk + _LANES64 - 1) // _LANES64
    n_pre = _pre_size(n_blk)
    if pre.shape[0] != 2 * n_pre or w.shape[0] != 2 * n_lane:
        raise ValueError("w and pre must hold two buffers of L and _pre_size(L / 4) entries")
    for h in range(2):
        pre[h * n_pre + n_blk + 1:(h + 1) * n_pre] = np.inf  # never counted by the draw's block search
    if draw:
        nc[:] = 0
        cnt[:] = 0
    n_fallback = 0
    n_pat = pat_start.shape[0] - 1
    tot_c = 0.0
    e0_c = 0
    e1_c = 0
    for step in range(n_pat + 1):
        # ---- the pattern drawn at this step is the one whose weights the previous step computed
        u = step - 1
        tot, e0, e1 = tot_c, e0_c, e1_c
        if step < n_pat:
            e0_c = pexc_start[step]
            e1_c = pexc_start[step + 1]
            woff = (step & 1) * n_lane
            qoff = (step & 1) * n_pre
            # products, block totals (s0 + s1) + (s2 + s3) and their running sums pre[b] (blocks of 4 lanes)
            tot_c = 0.0
            pre[qoff] = tot_c
            b = 0
            while b + 32 <= n_lane:
                tot_c = _v4d_prod8(w, woff, b, bvec, rho, poff, e0_c, e1_c, pre, qoff, tot_c)
                b += 32
            if b + 16 <= n_lane:
                tot_c = _v4d_prod4(w, woff, b, bvec, rho, poff, e0_c, e1_c, pre, qoff, tot_c)
                b += 16
            if b + 8 <= n_lane:  # n_lane is a multiple of 8
                tot_c = _v4d_prod2(w, woff, b, bvec, rho, poff, e0_c, e1_c, pre, qoff, tot_c)
        if u < 0:
            continue
        woff = (u & 1) * n_lane
        qoff = (u & 1) * n_pre
        if tot >= _FALLBACK_BELOW:  # False for NaN
            if not draw:
                inv = 1.0 / tot      # one division per pattern, not one per component (within an ulp)
                for c in range(n_comp):
                    probs[u, c] = w[woff + c] * inv
                continue
            for r in range(pat_start[u], pat_start[u + 1]):
                # Categorical draw. Lane i of block b ends at pre[b] + (w0 + ... + wi) summed left to right,
                # the block at pre[b + 1] = pre[b] + ((w0 + w1) + (w2 + w3)) >= pre[b] + ((w0 + w1) + w2): the
                # breakpoints never decrease (rounding is monotone and fadd commutative), so counting those
                # <= t gives the interval, and a lane of weight 0 has an empty one.
                k = _v4d_pick(w, woff, pre, qoff, n_cmp, ubuf[r] * tot)
                zp[r] = k
                nc[k] += 1
                _count_row(cnt, poff, e0, e1, k)
            continue
        # exact float64 log space: a NaN ratio (tiny baseline probability) or a total below range
        n_fallback += 1
        _sparse_logweights(lbase, nzero, prof, base_col, ecol, evar, n_col, pexc, e0, e1, lrat, zhit, stamp,
                           sweep, lw)
        tot64 = 0.0
        for c in range(n_comp):
            tot64 += lw[c]
        if not tot64 > 0.0:
            # no component gives the row a positive probability (NaN weights): never in the sampler, where
            # a row's own component has it; a draw sent to a silo's rounds could (vcmc.mcmc.sampler.round_kernels)
            raise FloatingPointError("a row has probability 0 under every component of the draw")
        if not draw:
            for c in range(n_comp):
                probs[u, c] = lw[c] / tot64
            continue
        for r in range(pat_start[u], pat_start[u + 1]):
            t = ubuf[r] * tot64
            acc64 = 0.0
            k = n_comp - 1
            for c in range(n_comp):
                acc64 += lw[c]
                if acc64 > t:
                    k = c
                    break
            while lw[k] == 0.0:
                k -= 1
            zp[r] = k
            nc[k] += 1
            _count_row(cnt, poff, e0, e1, np.uintp(k))
    return n_fallback


@njit(cache=True)
def _allocation_probabilities_sparse(base_col, ecol, evar, pat_start, pexc_start, pexc, n_col, logpi, prof,
                                     out):
    """Normalised allocation probabilities of every pattern through the sparse code path (the tests, and the
    memberships of the rounds: ``vcmc.mcmc.sampler.round_kernels``); returns how many patterns took the exact
    log-space fallback."""
    n_comp = prof.shape[0]
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_slot = ecol.shape[0]
    bvec = np.zeros(n_lane)
    rho = np.zeros((n_slot, n_lane))
    lbase = np.empty(n_comp)
    nzero = np.empty(n_comp, dtype=np.int64)
    fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, np.empty(0))
    poff = pexc * np.uint32(n_lane)
    return _sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar,
                        n_col, 0, np.empty(0), False, np.empty(0, dtype=np.int16),
                        np.zeros(n_comp, dtype=np.int64), np.zeros(n_slot * n_lane, dtype=np.int32),
                        np.empty(2 * n_lane), np.empty(2 * _pre_size(n_lane // _LANES64)), np.empty(n_comp),
                        np.empty((n_slot, n_comp)), np.zeros((n_slot, n_comp), dtype=np.int64),
                        np.full(n_slot, -1, dtype=np.int64), out)


@njit(cache=True)
def _gibbs_block_sparse(base_col, ecol, evar, pat_start, row_of, pexc_start, pexc, z, pi, logpi, prof,
                        logprof, alpha, beta, offsets, const, n_iter, first_iter, burn_in, thin, keep_z, keep_pi,
                        keep_prof, keep_nocc, keep_lp, keep_at, rng):
    """Sparse-path twin of :func:`vcmc.mcmc.sampler._gibbs_block` (same arguments after the layout)."""
    n_var = offsets.shape[0] - 1
    n_comp = pi.shape[0]
    n_col = offsets[n_var]
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_slot = ecol.shape[0]
    bvec = np.zeros(n_lane)  # padding lanes stay 0: never drawn
    rho = np.zeros((n_slot, n_lane))
    lbase = np.empty(n_comp)
    nzero = np.empty(n_comp, dtype=np.int64)
    no_scale = np.empty(0)
    w = np.empty(2 * n_lane)  # two buffers: see _sparse_pass
    pre = np.empty(2 * _pre_size(n_lane // _LANES64))
    lw = np.empty(n_comp)
    lrat = np.empty((n_slot, n_comp))
    zhit = np.zeros((n_slot, n_comp), dtype=np.int64)
    stamp = np.full(n_slot, -1, dtype=np.int64)
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(n_slot * n_lane, dtype=np.int32)  # int32: with rho, within the L1 cache
    poff = pexc * np.uint32(n_lane)
    ct = np.zeros((n_col + n_var, n_lane), dtype=np.int64)
    shp = np.empty(max(n_comp, n_col))
    ubuf = np.empty(row_of.shape[0])
    zp = np.empty(row_of.shape[0], dtype=z.dtype)  # allocations in pattern order
    for r in range(row_of.shape[0]):
        zp[r] = z[row_of[r]]
    no_probs = np.empty((0, n_comp))
    bg = rng.bit_generator
    n_kept = 0
    for it in range(first_iter, first_iter + n_iter):
        fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, no_scale)
        # ---- 1. allocations (the uniforms first, in a tight loop: a bit-generator call inside the row loop
        # costs twice as much, every live register being spilled around it)
        for r in range(ubuf.shape[0]):
            ubuf[r] = _unit(bg)
        _sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar, n_col,
                     it, ubuf, True, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, no_probs)
        _expand_sparse(nc, cnt, ecol, evar, base_col, ct)
        # ---- 2-3. weights and profiles given the allocations (variates straight from the bit generator)
        keep = it >= burn_in and (it - burn_in) % thin == thin - 1
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, keep, bg)
        if keep:
            _keep_draw(keep_at + n_kept, nc, ct, pi, logpi, prof, logprof, alpha, beta, offsets, const, keep_pi,
                       keep_prof, keep_nocc, keep_lp)
            for r in range(row_of.shape[0]):
                keep_z[n_kept, row_of[r]] = zp[r]
            n_kept += 1
    for r in range(row_of.shape[0]):
        z[row_of[r]] = zp[r]
    return n_kept


def initial_counts(lay: SparseLayout, z: np.ndarray, n_comp: int, n_rows_ct: int) -> tuple[np.ndarray, np.ndarray]:
    """``(nc, ct)`` of an allocation as :func:`vcmc.mcmc.sampler._count` gives them, from the layout."""
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(lay.n_slots * n_comp, dtype=np.int32)
    _count_sparse(z.astype(np.int64), lay.pat_start, lay.row_of, lay.pexc_start, lay.pexc, n_comp, nc, cnt)
    ct = np.zeros((n_rows_ct, n_comp), dtype=np.int64)
    _expand_sparse(nc, cnt, lay.ecol, lay.evar, lay.base_col, ct)
    return nc, ct
