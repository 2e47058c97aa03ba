"""Kernels of the dense path: the allocation step on grouped float32 tables and a block of iterations.

Per sweep the (modality x component) probability table is rebuilt (each column divided by its maximum over
components), joint tables of variable groups are filled, every row pattern's weights are the product of
its groups' rows (renormalised every ``_VARS_PER_BLOCK`` variables), a row whose best component falls below
``_FALLBACK_BELOW`` is recomputed exactly in float64 log space, and the categorical draw is branch-free.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vcmc.mcmc.sampler.draws import _draw_parameters, _keep_draw
from vcmc.mcmc.sampler.intrinsics import _LANES, _v8_copy, _v8_cumsum4, _v8_mul, _v8_scale, _v8_sum

# A row whose best component is below this (relative to the running scale) is recomputed in float64 logs:
# the float32 path is then exact up to about 1e-38 / 1e-20 relative error, far below float32 rounding.
_FALLBACK_BELOW = 1e-20


# Table entries (relative to their column maximum) below this are stored as 0 instead of a float32
# subnormal (slow arithmetic); such a component's weight is < 1e-30 of the best one for that modality.
_TABLE_FLUSH = 1e-30




@njit(cache=True)
def _fill_tables(pi, prof, wpi, tab):
    """float32 tables of one iteration: weights and profile columns divided by their max over components.

    Dividing a modality's column by a constant cancels in the allocation probabilities and keeps every
    factor in [0, 1] with 1 for the best component, so the running product underflows only for rows that
    fit no component. Entries below ``_TABLE_FLUSH`` become 0 rather than slow float32 subnormals.
    """
    n_comp, n_col = prof.shape
    mx = 0.0
    for c in range(n_comp):
        mx = max(mx, pi[c])
    inv = 1.0 / mx
    for c in range(n_comp):
        v = pi[c] * inv
        wpi[c] = v if v >= _TABLE_FLUSH else 0.0
    for j in range(n_col):
        mx = 0.0
        for c in range(n_comp):
            mx = max(mx, prof[c, j])
        inv = 1.0 / mx
        for c in range(n_comp):
            v = prof[c, j] * inv
            tab[j, c] = v if v >= _TABLE_FLUSH else 0.0


@njit(cache=True)
def _fill_logtab(prof, logtab):
    n_comp, n_col = prof.shape
    for j in range(n_col):
        for c in range(n_comp):
            logtab[j, c] = math.log(prof[c, j]) if prof[c, j] > 0.0 else -np.inf


@njit(cache=True)
def _fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab):
    """Joint tables of groups of variables: row ``grp_off[g] + code`` holds ``prod_q tab[x_q]`` over the
    group's variables for the mixed-radix ``code`` of their values (a missing value is the extra digit
    ``K^q``, factor 1). A row then needs one lookup per group instead of one per variable. Group 0 also
    carries the weights. Built as successive outer products (about 1.5 multiplications per entry); products
    below ``_TABLE_FLUSH`` are flushed to 0 as they are made (all factors are <= 1, so a flushed entry
    would stay below the threshold anyway), with a select the loop vectoriser handles.
    """
    n_grp = grp_var.shape[0] - 1
    n_lane = gtab.shape[1]
    flush = np.float32(_TABLE_FLUSH)
    zero = np.float32(0.0)
    for g in range(n_grp):
        base = grp_off[g]
        for c in range(n_lane):
            gtab[base, c] = wpi[c] if g == 0 else np.float32(1.0)
        size = 1
        for q in range(grp_var[g], grp_var[g + 1]):
            for d in range(radix[q] - 1, -1, -1):  # descending: digit 0 overwrites the sources last
                dst0 = base + d * size
                if d < kmod[q]:
                    t = offsets[q] + d
                    for a in range(size):
                        for c in range(n_lane):
                            v = gtab[base + a, c] * tab[t, c]
                            gtab[dst0 + a, c] = v if v >= flush else zero
                elif d > 0:
                    for a in range(size):
                        for c in range(n_lane):
                            gtab[dst0 + a, c] = gtab[base + a, c]
            size *= radix[q]


@njit(cache=True)
def _expand_counts(cnt_g, grp_var, grp_off, radix, kmod, offsets, ct):
    """Per-(column, component) counts from the per-(group code, component) counts of the sweep: the count
    of modality d of a variable at stride s in its group sums the codes whose digit (code // s) % r is d
    (enumerated as hi * s * r + d * s + lo, without divisions). Both arrays have the component axis
    contiguous, so the innermost loop is a vector add."""
    n_grp = grp_var.shape[0] - 1
    n_lane = ct.shape[1]
    ct[:, :] = 0
    for g in range(n_grp):
        base = grp_off[g]
        size = grp_off[g + 1] - base
        stride = 1
        for q in range(grp_var[g], grp_var[g + 1]):
            r = radix[q]
            block = stride * r
            for d in range(kmod[q]):  # digit kmod[q] (missing) is not counted
                col = offsets[q] + d
                for hi in range(0, size, block):
                    for code in range(base + hi + d * stride, base + hi + d * stride + stride):
                        for c in range(n_lane):
                            ct[col, c] += cnt_g[code, c]
            stride = block


@njit(cache=True, inline="always")
def _row_weights(gtab, gcode, u, check, w, cum, pre):
    """Unnormalised float32 allocation weights of row pattern ``u`` into ``w``; running sums inside each
    block of 4 lanes into ``cum`` and running sums over blocks into ``pre`` (``pre[0] = 0``,
    ``pre[b + 1] = pre[b] + cum[4b + 3]``). Returns the total ``pre[-1]``, or -1.0 when the float32 path
    cannot represent the weights (the caller then uses :func:`_pattern_logweights`).

    The running product is renormalised (sum 1) after the groups flagged in ``check`` (every
    ``_VARS_PER_BLOCK`` variables), so any number of variables is safe.
    """
    n_lane = w.shape[0]
    n_grp = gcode.shape[1]
    # (straight-line structure on purpose: an early return inside the group loop, or a separate path
    # fusing the first two groups, made LLVM compile this 2-3 times slower)
    j = gcode[u, 0] * n_lane
    for b in range(0, n_lane, 8):
        _v8_copy(w, b, gtab, j + b)
    ok = True
    for g in range(1, n_grp):
        if check[g - 1]:
            s = np.float32(0.0)
            for b in range(0, n_lane, 8):
                s += _v8_sum(w, b)
            ok = ok and s >= _FALLBACK_BELOW
            inv = np.float32(1.0) / s if s > 0.0 else np.float32(0.0)
            for b in range(0, n_lane, 8):
                _v8_scale(w, b, inv)
        j = gcode[u, g] * n_lane
        for b in range(0, n_lane, 8):
            _v8_mul(w, b, w, b, gtab, j + b)
    acc = np.float32(0.0)
    pre[0] = acc
    for b in range(0, n_lane, 8):
        t0, t1 = _v8_cumsum4(w, b, cum, b)
        acc += t0
        pre[b // 4 + 1] = acc
        acc += t1
        pre[b // 4 + 2] = acc
    if acc < _FALLBACK_BELOW or not ok:
        return np.float32(-1.0)
    return acc


@njit(cache=True, inline="always")
def _pick(cum, pre, t):
    """Index of the component whose interval contains ``t`` in [0, total), without data-dependent
    branches (the draws are unpredictable; a mispredicted branch costs more than the comparisons).

    Breakpoints: block ``b`` of 4 lanes covers ``[pre[b], pre[b + 1])`` and its lane ``i`` ends at
    ``pre[b] + cum[4b + i]`` (the same float32 sum as ``pre[b + 1]`` for ``i = 3``). They are
    non-decreasing, so counting those ``<= t`` gives the interval, and a lane of weight 0 has an empty
    interval (``x + 0 == x``), so it is never drawn.
    """
    n_part = pre.shape[0] - 1
    b = 0
    for i in range(1, n_part):
        b += pre[i] <= t
    base = pre[b]
    k = 4 * b
    return k + (base + cum[k] <= t) + (base + cum[k + 1] <= t) + (base + cum[k + 2] <= t)


@njit(cache=True)
def _pattern_logweights(logtab, logpi, idx, lw):
    """Exact float64 weights (max 1) of one row pattern into ``lw`` via log-sum-exp."""
    n_comp = lw.shape[0]
    lmx = -np.inf
    for c in range(n_comp):
        s = logpi[c]
        for qq in range(idx.shape[0]):
            s += logtab[idx[qq], c]
        lw[c] = s
        lmx = max(lmx, s)
    for c in range(n_comp):
        lw[c] = math.exp(lw[c] - lmx)


@njit(cache=True)
def _allocation_probabilities(lay_gcode, lay_pidx, grp_var, grp_off, radix, kmod, offsets, check, pi,
                              logpi, prof, out):
    """Normalised allocation probabilities of every pattern through the kernel's code path (tests);
    returns how many patterns took the exact log-space fallback."""
    n_pat = lay_gcode.shape[0]
    n_comp, n_col = prof.shape
    n_var = offsets.shape[0] - 1
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    tab = np.zeros((n_col, n_lane), dtype=np.float32)
    gtab = np.zeros((grp_off[grp_off.shape[0] - 1], n_lane), dtype=np.float32)
    wpi = np.zeros(n_lane, dtype=np.float32)
    w = np.empty(n_lane, dtype=np.float32)
    cum = np.empty(n_lane, dtype=np.float32)
    pre = np.empty(n_lane // 4 + 1, dtype=np.float32)
    lw = np.empty(n_comp)
    logtab = np.zeros((n_col + n_var, n_comp))
    _fill_tables(pi, prof, wpi, tab)
    _fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab)
    _fill_logtab(prof, logtab)
    n_fallback = 0
    for u in range(n_pat):
        tot = _row_weights(gtab, lay_gcode, u, check, w, cum, pre)
        if tot > 0.0:
            for c in range(n_comp):
                out[u, c] = w[c] / tot
        else:
            n_fallback += 1
            _pattern_logweights(logtab, logpi, lay_pidx[u], lw)
            out[u] = lw / lw.sum()
    return n_fallback


@njit(cache=True, inline="always")
def _allocate(gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw, logtab,
              rng):
    """Step 1 of a sweep: draw every row's component given the tables of this iteration, into ``z``,
    ``nc`` (component sizes) and ``cnt_g`` (per group code and component); one likelihood computation per
    distinct row pattern.
    """
    n_pat, n_grp = gcode.shape
    n_comp = nc.shape[0]
    have_logtab = False
    nc[:] = 0
    cnt_g[:, :] = 0
    for u in range(n_pat):
        tot = _row_weights(gtab, gcode, u, check, w, cum, pre)
        if tot > 0.0:
            for r in range(pat_start[u], pat_start[u + 1]):
                k = _pick(cum, pre, rng.random() * tot)
                z[row_of[r]] = k
                nc[k] += 1
                for g in range(n_grp):
                    cnt_g[gcode[u, g], k] += 1
        else:
            # exact float64 log space for a row that no component explains within float32 range
            if not have_logtab:
                _fill_logtab(prof, logtab)
                have_logtab = True
            _pattern_logweights(logtab, logpi, pidx[u], lw)
            tot64 = 0.0
            for c in range(n_comp):
                tot64 += lw[c]
            for r in range(pat_start[u], pat_start[u + 1]):
                t = rng.random() * tot64
                acc64 = 0.0
                k = n_comp - 1
                for c in range(n_comp):
                    acc64 += lw[c]
                    if acc64 > t:
                        k = c
                        break
                while lw[k] == 0.0:
                    k -= 1
                z[row_of[r]] = k
                nc[k] += 1
                for g in range(n_grp):
                    cnt_g[gcode[u, g], k] += 1


@njit(cache=True)
def _gibbs_block(gcode, pidx, pat_start, row_of, grp_var, grp_off, radix, kmod, check, z, pi, logpi,
                 prof, logprof, alpha, beta, offsets, const, n_iter, first_iter, burn_in, thin, keep_z,
                 keep_pi, keep_prof, keep_nocc, keep_lp, keep_at, rng):
    """Run ``n_iter`` Gibbs iterations in place; store kept ones from index ``keep_at``; return #kept.

    Row patterns (unique rows) ``u`` have group codes ``gcode[u]`` (rows of the joint group tables) and
    per-variable table rows ``pidx[u]`` (``offsets[q] + x`` or ``P + q`` if missing; for the exact
    fallback). Rows of pattern ``u`` are ``row_of[pat_start[u]:pat_start[u + 1]]``.
    """
    n_pat, n_grp = gcode.shape
    n_var = pidx.shape[1]
    n_comp = pi.shape[0]
    n_col = offsets[n_var]
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_gt = grp_off[n_grp]
    tab = np.zeros((n_col, n_lane), dtype=np.float32)
    gtab = np.zeros((n_gt, n_lane), dtype=np.float32)
    wpi = np.zeros(n_lane, dtype=np.float32)  # padding lanes stay 0: never drawn
    w = np.empty(n_lane, dtype=np.float32)
    cum = np.empty(n_lane, dtype=np.float32)
    pre = np.empty(n_lane // 4 + 1, dtype=np.float32)
    lw = np.empty(n_comp)
    logtab = np.zeros((n_col + n_var, n_comp))  # rows P.. (missing) stay 0
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt_g = np.zeros((n_gt, n_lane), dtype=np.int64)
    ct = np.zeros((n_col + n_var, n_lane), dtype=np.int64)
    shp = np.empty(max(n_comp, n_col))
    n_kept = 0
    for it in range(first_iter, first_iter + n_iter):
        _fill_tables(pi, prof, wpi, tab)
        _fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab)
        # ---- 1. allocations
        _allocate(gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw,
                  logtab, rng)
        _expand_counts(cnt_g, grp_var, grp_off, radix, kmod, offsets, ct)
        # ---- 2-3. weights and profiles given the allocations
        keep = it >= burn_in and (it - burn_in) % thin == thin - 1
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, keep, rng)
        if keep:
            _keep_draw(keep_at + n_kept, nc, ct, pi, logpi, prof, logprof, alpha, beta, offsets, const, keep_pi,
                       keep_prof, keep_nocc, keep_lp)
            keep_z[n_kept] = z
            n_kept += 1
    return n_kept
