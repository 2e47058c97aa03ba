"""The Gibbs block of a model with Gaussian items beside the categorical ones (docs/design.md §17.3).

One component's parameters are the flat row ``(p, mu, sigma2)``: the categorical profile (``P`` columns, as in the
other kernels), then the ``G`` means and the ``G`` variances of the Gaussian items (``vcmc.family``). Every row is
unique once it holds a measurement, so rows are not grouped: the layout is the sparse path's baseline coding with
one pattern per row (``layout.row_layout``). Per sweep, as on the sparse path, the baseline vector and the ratio
table of the categorical items (``fill_ratio_tables``), and per component and item the coefficients of the Gaussian
log density as a quadratic in the value (``_gaussian_coefficients``). Per row (``_row_weights``): the quadratic,
two fused multiply-adds per (item, component) in 4-lane vectors, then ``exp`` of its difference to the row's
largest by a vector polynomial (``intrinsics._v4d_quad*``, ``_v4d_expmul``; libm's scalar ``exp`` per component
cost more than all the rest), times the baseline vector: the start of the sparse path's product of the row's
exceptions, running sums and branch-free draw. Factors are in [0, 1], so a row whose total falls below
``_FALLBACK_BELOW`` (or is NaN: a baseline probability out of range) is recomputed exactly in float64 log space from
the log profiles (``_row_logweights``). A missing categorical cell is an exception of its own (a ratio
``1 / p_baseline``); a missing measurement contributes 0 to the quadratic and its constant is taken off the row's.
The allocation uniforms and the parameter step's variates come straight from the bit generator, as on the sparse
path. The weights and profiles are drawn by the shared ``_draw_parameters``; the means and variances from their
normal-inverse-gamma conditionals (``_draw_gaussian``, the family's ``vcmc.family.gaussian.posterior_parameters``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vcmc.dirichlet import _gamma_ge1, _std_exponential, _std_normal, _unit
from vcmc.mcmc.sampler.draws import _draw_parameters, _keep_draw
from vcmc.mcmc.sampler.intrinsics import (
    _LANES,
    _LANES64,
    _count_row,
    _v4d_expmul,
    _v4d_pick,
    _v4d_prod2,
    _v4d_prod4,
    _v4d_prod8,
    _v4d_quad2,
    _v4d_quad4,
    _v4d_quad8,
)
from vcmc.mcmc.sampler.kernels_sparse import _FALLBACK_BELOW, _expand_sparse, _pre_size, fill_ratio_tables

_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True, inline="always")
def _add_row(gstat, x, i, k):
    """Row ``i``'s observed measurements into component ``k``'s counts, sums and sums of squares."""
    n_items = x.shape[1]
    for g in range(n_items):
        v = x[i, g]
        if v == v:
            gstat[k, g] += 1.0
            gstat[k, n_items + g] += v
            gstat[k, 2 * n_items + g] += v * v


@njit(cache=True)
def _gaussian_stats(x, z, gstat):
    """Observed rows, sums and sums of squares of every (component, item): ``gstat`` (C, 3G), zeroed here."""
    gstat[:, :] = 0.0
    for i in range(x.shape[0]):
        _add_row(gstat, x, i, z[i])


@njit(cache=True)
def _keep_mixed(s, nc, ct, gstat, pi, logpi, prof, logprof, alpha, beta, offsets, const, gprior, keep_pi, keep_prof,
                keep_nocc, keep_lp):
    """Store kept draw ``s``: the shared record, plus the Gaussian items' part of the log joint."""
    _keep_draw(s, nc, ct, pi, logpi, prof, logprof, alpha, beta, offsets, const, keep_pi, keep_prof, keep_nocc,
               keep_lp)
    keep_lp[s] += _gaussian_log_joint(gstat, prof, offsets[offsets.shape[0] - 1], gprior)


# error_model="numpy" as in _draw_parameters: every divisor is a positive shape, precision or Gamma draw
@njit(cache=True, error_model="numpy")
def _draw_gaussian(gstat, gprior, prof, p0, rng):
    """Means and variances from their normal-inverse-gamma conditionals given ``gstat`` into ``prof[:, p0:]``."""
    n_items = gstat.shape[1] // 3
    m0, kappa, a, b = gprior[0], gprior[1], gprior[2], gprior[3]
    for c in range(prof.shape[0]):
        for g in range(n_items):
            n = gstat[c, g]
            kn = kappa + n
            mn = (kappa * m0 + gstat[c, n_items + g]) / kn
            an = a + 0.5 * n
            bn = b + 0.5 * max(gstat[c, 2 * n_items + g] + kappa * m0 * m0 - kn * mn * mn, 0.0)
            gam = (_gamma_ge1(an + 1.0, rng) * math.exp(-_std_exponential(rng) / an) if an < 1.0
                   else _gamma_ge1(an, rng))
            var = bn / gam
            prof[c, p0 + n_items + g] = var
            prof[c, p0 + g] = mn + math.sqrt(var / kn) * _std_normal(rng)


@njit(cache=True)
def _gaussian_log_joint(gstat, prof, p0, gprior):
    """The Gaussian items' part of ``log p(X, z, theta)``: their likelihood and normal-inverse-gamma prior."""
    n_items = gstat.shape[1] // 3
    m0, kappa, a, b = gprior[0], gprior[1], gprior[2], gprior[3]
    lp = 0.0
    for c in range(prof.shape[0]):
        for g in range(n_items):
            mu = prof[c, p0 + g]
            var = prof[c, p0 + n_items + g]
            lv = math.log(var)
            n, s, ss = gstat[c, g], gstat[c, n_items + g], gstat[c, 2 * n_items + g]
            lp += -0.5 * n * (_LOG_2PI + lv) - (ss - 2.0 * mu * s + n * mu * mu) / (2.0 * var)
            lp += (-0.5 * (_LOG_2PI + lv - math.log(kappa)) - kappa * (mu - m0) ** 2 / (2.0 * var)
                   + a * math.log(b) - math.lgamma(a) - (a + 1.0) * lv - b / var)
    return lp


@njit(cache=True)
def _gaussian_coefficients(prof, p0, n_items, coef, kvec, cst):
    """Per-lane coefficients of the Gaussian part of a row's log weights, one draw of the means and variances:
    ``log N(x; mu, s2) = cst + x (B + A x)`` with ``A = -1 / (2 s2)``, ``B = mu / s2`` (``coef[g] = (A, B)``),
    ``cst = -(log(2 pi s2) + mu^2 / s2) / 2`` (``cst[g]``); ``kvec`` the sum of ``cst`` over the items, ``-inf``
    on the padding lanes (weight 0, never the row's best)."""
    n_lane = kvec.shape[0]
    n_comp = prof.shape[0]
    kvec[:] = -np.inf
    for c in range(n_comp):
        k = 0.0
        for g in range(n_items):
            mu = prof[c, p0 + g]
            var = prof[c, p0 + n_items + g]
            inv = 1.0 / var
            coef[g, c] = -0.5 * inv
            coef[g, n_lane + c] = mu * inv
            cg = -0.5 * (_LOG_2PI + math.log(var) + mu * mu * inv)
            cst[g, c] = cg
            k += cg
        kvec[c] = k


@njit(cache=True)
def _row_logweights(r, pidx, xstat, ltab, logpi, prof, p0, lw):
    """Exact float64 log weights of layout row ``r`` (the fallback of a row whose product leaves the tables'
    range): ``log pi_c + sum_q log p^q_{x, c}`` (``ltab`` the log profiles, a row of zeros for a missing cell)
    plus the observed items' Gaussian log densities."""
    n_comp = lw.shape[0]
    n_items = xstat.shape[1] // 3
    for c in range(n_comp):
        v = logpi[c]
        for q in range(pidx.shape[1]):
            v += ltab[pidx[r, q], c]
        for g in range(n_items):
            if xstat[r, g] != 0.0:
                x = xstat[r, n_items + g]
                var = prof[c, p0 + n_items + g]
                d = x - prof[c, p0 + g]
                v -= 0.5 * (_LOG_2PI + math.log(var) + d * d / var)
        lw[c] = v


@njit(cache=True, inline="always")
def _row_weights(r, xflat, has_miss, kvec, krow, cst, coef, bvec, rho, poff, e0, e1, gw, w, pre):
    """Weights of layout row ``r`` into ``w`` and their block running sums into ``pre`` (``_v4d_pick``'s input);
    returns their total. The Gaussian factor ``exp(quadratic - its maximum)`` times the baseline vector starts
    the product of the row's categorical exceptions ``e0..e1``. Inlined: a call taking arrays would pay their
    reference counts per row."""
    n_lane = kvec.shape[0]
    n_items = cst.shape[0]
    kv = kvec
    if has_miss[r]:
        for lane in range(n_lane):
            krow[lane] = kvec[lane]
        for g in range(n_items):
            if xflat[3 * n_items * r + g] == 0.0:    # not observed
                for lane in range(n_lane):
                    krow[lane] -= cst[g, lane]
        kv = krow
    xoff = r * 3 * n_items + n_items
    mx = -np.inf
    b = 0
    while b + 32 <= n_lane:
        mx = max(mx, _v4d_quad8(gw, b, kv, coef, xflat, xoff, n_items))
        b += 32
    if b + 16 <= n_lane:
        mx = max(mx, _v4d_quad4(gw, b, kv, coef, xflat, xoff, n_items))
        b += 16
    if b + 8 <= n_lane:
        mx = max(mx, _v4d_quad2(gw, b, kv, coef, xflat, xoff, n_items))
    _v4d_expmul(gw, bvec, n_lane, mx)
    tot = 0.0
    pre[0] = tot
    b = 0
    while b + 32 <= n_lane:
        tot = _v4d_prod8(w, 0, b, gw, rho, poff, e0, e1, pre, 0, tot)
        b += 32
    if b + 16 <= n_lane:
        tot = _v4d_prod4(w, 0, b, gw, rho, poff, e0, e1, pre, 0, tot)
        b += 16
    if b + 8 <= n_lane:
        tot = _v4d_prod2(w, 0, b, gw, rho, poff, e0, e1, pre, 0, tot)
    return tot


@njit(cache=True)
def _gibbs_block_mixed(base_col, ecol, evar, row_of, pexc_start, pexc, pidx, xstat, has_miss, z, pi, logpi, prof,
                       logprof, alpha, beta, offsets, const, gprior, n_iter, first_iter, burn_in, thin, keep_z, keep_pi,
                       keep_prof, keep_nocc, keep_lp, keep_at, rng):
    """Run ``n_iter`` Gibbs iterations in place; store kept ones from index ``keep_at``; return #kept.

    Row ``r`` of the layout is data row ``row_of[r]``: its exceptions are ``pexc[pexc_start[r]:pexc_start[r + 1]]``
    (the sparse layout's slots ``ecol``, ``evar`` of baselines ``base_col``, one pattern per row), ``pidx[r]`` its
    profile columns (the exact fallback), ``xstat[r]`` (3G) its Gaussian statistics ``(observed, x, x^2)``, 0 where
    missing, and ``has_miss[r]`` whether any item is missing. ``gprior``: ``(m0, kappa, a, b)`` after
    fractionation.
    """
    n_var = offsets.shape[0] - 1
    n_comp = pi.shape[0]
    n_col = offsets[n_var]
    n = row_of.shape[0]
    n_items = xstat.shape[1] // 3
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_blk = n_lane // _LANES64
    n_cmp = (n_blk + _LANES64 - 1) // _LANES64
    n_slot = ecol.shape[0]
    bvec = np.zeros(n_lane)  # padding lanes stay 0: never drawn
    rho = np.zeros((n_slot, n_lane))
    lbase = np.empty(n_comp)
    nzero = np.empty(n_comp, dtype=np.int64)
    no_scale = np.empty(0)
    coef = np.zeros((n_items, 2 * n_lane))
    kvec = np.empty(n_lane)
    krow = np.empty(n_lane)
    cst = np.zeros((n_items, n_lane))
    gw = np.empty(n_lane)
    w = np.empty(n_lane)
    pre = np.empty(_pre_size(n_blk))
    pre[n_blk + 1:] = np.inf  # never counted by the draw's block search
    ltab = np.zeros((n_col + n_var, n_comp))  # rows P.. (missing) stay 0
    lw = np.empty(n_comp)
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(n_slot * n_lane, dtype=np.int32)
    poff = pexc * np.uint32(n_lane)
    ct = np.zeros((n_col + n_var, n_lane), dtype=np.int64)
    gstat = np.zeros((n_comp, 3 * n_items))
    shp = np.empty(max(n_comp, n_col))
    ubuf = np.empty(n)
    zp = np.empty(n, dtype=z.dtype)  # allocations in layout order
    for r in range(n):
        zp[r] = z[row_of[r]]
    xflat = xstat.ravel()
    bg = rng.bit_generator
    n_kept = 0
    for it in range(first_iter, first_iter + n_iter):
        fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, no_scale)
        _gaussian_coefficients(prof, n_col, n_items, coef, kvec, cst)
        have_ltab = False
        for r in range(n):
            ubuf[r] = _unit(bg)
        # ---- 1. allocations, row by row: the Gaussian factor exp(quadratic - its maximum) times the baseline
        # vector starts the product of the row's categorical exceptions
        nc[:] = 0
        cnt[:] = 0
        gstat[:, :] = 0.0
        for r in range(n):
            e0 = pexc_start[r]
            e1 = pexc_start[r + 1]
            tot = _row_weights(r, xflat, has_miss, kvec, krow, cst, coef, bvec, rho, poff, e0, e1, gw, w, pre)
            if tot >= _FALLBACK_BELOW:  # False for NaN
                k = _v4d_pick(w, 0, pre, 0, n_cmp, ubuf[r] * tot)
            else:
                # exact float64 log space: a NaN ratio (tiny baseline probability) or a total below range
                if not have_ltab:
                    for c in range(n_comp):
                        for j in range(n_col):
                            ltab[j, c] = math.log(prof[c, j])
                    have_ltab = True
                _row_logweights(r, pidx, xstat, ltab, logpi, prof, n_col, lw)
                k = np.uintp(_draw_log(lw, ubuf[r]))
            zp[r] = k
            nc[k] += 1
            _count_row(cnt, poff, e0, e1, k)
            for j in range(3 * n_items):
                gstat[k, j] += xstat[r, j]
        _expand_sparse(nc, cnt, ecol, evar, base_col, ct)
        # ---- 2-3. means and variances, weights and profiles given the allocations (independent given them)
        _draw_gaussian(gstat, gprior, prof, n_col, bg)
        keep = it >= burn_in and (it - burn_in) % thin == thin - 1
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, keep, bg)
        if not keep:
            continue
        _keep_mixed(keep_at + n_kept, nc, ct, gstat, pi, logpi, prof, logprof, alpha, beta, offsets, const, gprior,
                    keep_pi, keep_prof, keep_nocc, keep_lp)
        for r in range(n):
            keep_z[n_kept, row_of[r]] = zp[r]
        n_kept += 1
    for r in range(n):
        z[row_of[r]] = zp[r]
    return n_kept


@njit(cache=True)
def _draw_log(lw, u):
    """Component drawn with the uniform ``u`` from log weights ``lw`` (overwritten by the weights)."""
    n_comp = lw.shape[0]
    top = lw.max()
    tot = 0.0
    for c in range(n_comp):
        lw[c] = math.exp(lw[c] - top)
        tot += lw[c]
    if not tot > 0.0:
        raise FloatingPointError("a row has probability 0 under every component of the draw")
    t = u * tot
    acc = 0.0
    k = n_comp - 1
    for c in range(n_comp):
        acc += lw[c]
        if acc > t:
            k = c
            break
    while lw[k] == 0.0:
        k -= 1
    return k


@njit(cache=True)
def _allocation_probabilities_mixed(base_col, ecol, evar, pexc_start, pexc, pidx, xstat, has_miss, offsets, logpi,
                                    prof, out):
    """Normalised allocation probabilities of every layout row through the sampler's code path (the tests' view
    of it); returns how many rows took the exact log-space fallback."""
    n_var = offsets.shape[0] - 1
    n_comp = prof.shape[0]
    n_col = offsets[n_var]
    n_items = xstat.shape[1] // 3
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_slot = ecol.shape[0]
    bvec = np.zeros(n_lane)
    rho = np.zeros((n_slot, n_lane))
    fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, np.empty(n_comp),
                      np.empty(n_comp, dtype=np.int64), np.empty(0))
    coef = np.zeros((n_items, 2 * n_lane))
    kvec = np.empty(n_lane)
    cst = np.zeros((n_items, n_lane))
    _gaussian_coefficients(prof, n_col, n_items, coef, kvec, cst)
    ltab = np.zeros((n_col + n_var, n_comp))
    for c in range(n_comp):
        for j in range(n_col):
            ltab[j, c] = math.log(prof[c, j])
    krow = np.empty(n_lane)
    gw = np.empty(n_lane)
    w = np.empty(n_lane)
    pre = np.empty(_pre_size(n_lane // _LANES64))
    lw = np.empty(n_comp)
    poff = pexc * np.uint32(n_lane)
    xflat = xstat.ravel()
    n_fallback = 0
    for r in range(pexc_start.shape[0] - 1):
        tot = _row_weights(r, xflat, has_miss, kvec, krow, cst, coef, bvec, rho, poff, pexc_start[r],
                           pexc_start[r + 1], gw, w, pre)
        if tot >= _FALLBACK_BELOW:
            for c in range(n_comp):
                out[r, c] = w[c] / tot
            continue
        n_fallback += 1
        _row_logweights(r, pidx, xstat, ltab, logpi, prof, n_col, lw)
        top = lw.max()
        t = 0.0
        for c in range(n_comp):
            lw[c] = math.exp(lw[c] - top)
            t += lw[c]
        for c in range(n_comp):
            out[r, c] = lw[c] / t
    return n_fallback


def mixed_rows(pidx: np.ndarray, x: np.ndarray, row_of: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's per-row arrays in layout order (row ``r`` is data row ``row_of[r]``): the profile columns
    ``pidx`` (n, Q), the Gaussian statistics ``(observed, x, x^2)`` (n, 3G) with 0 for a missing ``x``, and
    whether each row misses any item."""
    xr = x[row_of]
    obs = ~np.isnan(xr)
    v = np.where(obs, xr, 0.0)
    xstat = np.ascontiguousarray(np.concatenate([obs.astype(np.float64), v, v * v], axis=1))
    return np.ascontiguousarray(pidx[row_of]), xstat, ~obs.all(axis=1)
