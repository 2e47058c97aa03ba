"""Numba kernels of the silo's half of the global-informed rounds (``vcmc.rows.rounds``), on the sampler's
sparse layout (``vcmc.mcmc.sampler.layout.SparseLayout``: per variable a baseline code, every other cell of
a row an exception, rows with the same exceptions grouped in one pattern).

A round's sweep is the sampler's own allocation step (``vcmc.mcmc.sampler.kernels_sparse._sparse_pass``,
one implementation): per component a baseline product and per exception slot a ratio
(``fill_ratio_tables``, given log weights, so a weight far below float64's range keeps its value), the
products on 4-lane float64 vectors, the categorical pick without branches, the counts kept per exception
slot and expanded once (``_expand_sparse``), and every row whose total leaves the tables' range recomputed
exactly in log space. The same pass without drawing gives the patterns' normalised probabilities (the
memberships of a kept round, and an annealed sweep's tempered draw).

Written by hand: no library draws categorical allocations once per pattern of a ragged (CSR) layout while
summing the counts in the same pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vcmc.mcmc.sampler.intrinsics import _LANES, _LANES64
from vcmc.mcmc.sampler.kernels_sparse import (
    _allocation_probabilities_sparse,
    _count_sparse,
    _expand_sparse,
    _pre_size,
    _sparse_pass,
    fill_ratio_tables,
)


@njit(cache=True)
def _lanes(n_comp):
    """Components padded to whole vectors (the sampler's lane count; padding lanes have weight 0)."""
    return ((n_comp + _LANES - 1) // _LANES) * _LANES


@njit(cache=True)
def _to_reply(nc, cnt, ecol, evar, base_col, n_col, n_lane):
    """Sizes (C,) and component-by-modality counts (C, P) as float64, the missing cells' rows dropped, from
    the pass's per-slot counts."""
    n_comp = nc.shape[0]
    ct = np.zeros((n_col + base_col.size, n_lane), dtype=np.int64)
    _expand_sparse(nc, cnt, ecol, evar, base_col, ct)
    out = np.empty((n_comp, n_col))
    for c in range(n_comp):
        for j in range(n_col):
            out[c, j] = ct[j, c]
    return nc.astype(np.float64), out


@njit(cache=True)
def counts(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, z, n_col, n_comp):
    """Component sizes (C,) and component-by-modality counts (C, P) of the allocation ``z`` (the sampler's
    counting, ``_count_sparse``)."""
    n_lane = _lanes(n_comp)
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(ecol.size * n_lane, dtype=np.int32)
    _count_sparse(z, pat_start, row_of, pexc_start, pexc, n_lane, nc, cnt)
    return _to_reply(nc, cnt, ecol, evar, base_col, n_col, n_lane)


@njit(cache=True)
def _draw(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof, uniforms, z):
    """One drawing ``_sparse_pass`` under ``(log_pi, log_prof)``: every row's component into ``z`` (row ``i``
    with ``uniforms[i]``); returns the pass's sizes, per-slot counts and lane count."""
    n_comp, n_col = log_prof.shape
    n_lane = _lanes(n_comp)
    n_slot = ecol.size
    n_row = row_of.size
    prof = np.exp(log_prof)
    bvec = np.zeros(n_lane)
    rho = np.zeros((n_slot, n_lane))
    lbase = np.empty(n_comp)
    nzero = np.empty(n_comp, dtype=np.int64)
    fill_ratio_tables(log_pi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, np.empty(0))
    ubuf = np.empty(n_row)
    zp = np.empty(n_row, dtype=np.int64)
    for r in range(n_row):
        ubuf[r] = uniforms[row_of[r]]         # a row's own uniform: the draws do not depend on the order
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(n_slot * n_lane, dtype=np.int32)
    _sparse_pass(bvec, rho, pexc_start, pexc, pexc * np.uint32(n_lane), pat_start, lbase, nzero, prof, base_col,
                 ecol, evar, n_col, 0, ubuf, True, zp, nc, cnt, np.empty(2 * n_lane),
                 np.empty(2 * _pre_size(n_lane // _LANES64)), np.empty(n_comp), np.empty((n_slot, n_comp)),
                 np.zeros((n_slot, n_comp), dtype=np.int64), np.full(n_slot, -1, dtype=np.int64),
                 np.empty((0, n_comp)))
    for r in range(n_row):
        z[row_of[r]] = zp[r]
    return nc, cnt, n_lane


@njit(cache=True)
def pattern_probabilities(pat_start, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof):
    """Allocation probabilities (U, C) of every pattern under ``(log_pi, log_prof)``, rows summing to 1 (the
    sampler's own non-drawing pass, ``_allocation_probabilities_sparse``)."""
    probs = np.empty((pat_start.size - 1, log_prof.shape[0]))
    _allocation_probabilities_sparse(base_col, ecol, evar, pat_start, pexc_start, pexc, log_prof.shape[1], log_pi,
                                     np.exp(log_prof), probs)
    return probs


@njit(cache=True)
def _add_probabilities(w, summed, summed_sq):
    for u in range(w.shape[0]):
        for c in range(w.shape[1]):
            p = w[u, c]
            summed[u, c] += p
            summed_sq[u, c] += p * p


@njit(cache=True)
def sweep_patterns(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof, uniforms, keep,
                   summed, summed_sq, z, inv_temp=1.0):
    """Every row's component drawn under ``(log_pi, log_prof)`` (C,), (C, P) with its own uniform
    (``uniforms[row]``: the draws do not depend on the patterns' order), the patterns' probabilities added to
    ``summed`` (U, C) (squares to ``summed_sq``) when ``keep``; returns the counts of the new allocation.
    ``inv_temp`` (burn-in only, so never with ``keep``): the probabilities are raised to it and renormalised
    (the conditional at temperature ``1 / inv_temp``).

    The probabilities are exact but for the tables' flush (a factor below 1e-300 of its column's maximum
    counts as 0: it changes a probability by less than 1e-100, ``vcmc.mcmc.sampler.kernels_sparse``); a
    profile entry whose exponential underflows is an exact 0, as in every other kernel given probabilities.
    A row impossible under every component raises FloatingPointError."""
    n_c, n_col = log_prof.shape
    if not keep:                                     # the sampler's pass draws and counts
        if inv_temp != 1.0:
            # the conditional at temperature 1 / inv_temp, w ** inv_temp renormalised, is the plain conditional
            # of the scaled logs (pi_c prod_q theta_cqx) ** b = exp(b log pi_c + sum_q b log theta_cqx): the same
            # pass at the plain sweep's cost (the scaled profiles need not sum to 1 over a variable's modalities)
            log_pi = log_pi * inv_temp
            log_prof = log_prof * inv_temp
        nc, cnt, n_lane = _draw(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof,
                                uniforms, z)
        return _to_reply(nc, cnt, ecol, evar, base_col, n_col, n_lane)
    if inv_temp != 1.0:                              # vcmc.rows.rounds.sweep refuses it with the request's words
        raise ValueError("a kept round is drawn at inverse temperature 1")
    w = pattern_probabilities(pat_start, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof)
    _add_probabilities(w, summed, summed_sq)
    cum = np.empty(n_c)
    for u in range(pat_start.size - 1):
        run = 0.0
        for c in range(n_c):
            run += w[u, c]
            cum[c] = run
        for j in range(pat_start[u], pat_start[u + 1]):
            i = row_of[j]
            r = uniforms[i] * cum[n_c - 1]
            # the first component whose running total reaches r: counted without branches
            c = 0
            for k in range(n_c - 1):
                c += cum[k] < r
            while w[u, c] == 0.0 and c < n_c - 1:     # r = 0 exactly: never a component of weight 0
                c += 1
            z[i] = c
    return counts(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, z, n_col, n_c)


@njit(cache=True)
def accumulate_patterns(pat_start, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof, summed, summed_sq):
    """Add every pattern's allocation probabilities under ``(log_pi, log_prof)`` to ``summed`` (and their
    squares to ``summed_sq``) without drawing: the memberships under the silo's own weights
    (``aggregation.round_labels = "silo"``, ``vcmc.rows.rounds.sweep``)."""
    w = pattern_probabilities(pat_start, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof)
    _add_probabilities(w, summed, summed_sq)


# -- Gaussian items beside the categorical ones (docs/design.md §17.8) ---------------------------------------------
# Every row is unique once it holds a measurement, so the mixed sweep goes row by row in float64 log space (as the
# apply step's mixed kernel, vcmc.mcmc.sampler.kernels_mixed): no pattern is shared and no table can flush.

@njit(cache=True)
def _mixed_row(i, codes, offsets, x, log_pi, log_prof, mu, half_log_var, inv_var, inv_temp, w):
    """Row ``i``'s allocation probabilities into ``w`` (C,): ``pi_c prod_q theta_cqx prod_g N(x_g; mu, s2)``
    (missing cells and values skipped) raised to ``inv_temp``, normalised."""
    n_comp = log_pi.size
    n_var = codes.shape[1]
    n_items = x.shape[1]
    top = -np.inf
    for c in range(n_comp):
        acc = log_pi[c]
        for q in range(n_var):
            k = codes[i, q]
            if k >= 0:
                acc += log_prof[c, offsets[q] + k]
        for g in range(n_items):
            v = x[i, g]
            if v == v:                              # observed (NaN is missing)
                d = v - mu[c, g]
                acc -= half_log_var[c, g] + 0.5 * d * d * inv_var[c, g]
        acc *= inv_temp
        w[c] = acc
        if acc > top:
            top = acc
    if not top > -np.inf:
        raise FloatingPointError("a row is impossible under every component")
    total = 0.0
    for c in range(n_comp):
        e = np.exp(w[c] - top)
        w[c] = e
        total += e
    for c in range(n_comp):
        w[c] /= total


@njit(cache=True)
def sweep_rows_mixed(codes, offsets, x, log_pi, log_prof, gaussian, uniforms, keep, summed, summed_sq, z,
                     inv_temp=1.0):
    """Every row's component drawn with the Gaussian items' densities beside the categorical ones: ``codes``
    (n, Q) (-1 missing), ``offsets`` the profile blocks' starts, ``x`` (n, G) the values (NaN missing),
    ``gaussian`` (C, 2G) the means then variances; row ``i`` with ``uniforms[i]`` (the first component whose
    running probability reaches ``u * 1``). ``keep``: the rows' probabilities added to ``summed`` (n, C) and their
    squares to ``summed_sq``. ``inv_temp``: the conditional at temperature ``1 / inv_temp`` (burn-in only)."""
    n_row = codes.shape[0]
    n_comp = log_pi.size
    n_items = x.shape[1]
    mu = gaussian[:, :n_items]
    half_log_var = 0.5 * np.log(2.0 * np.pi * gaussian[:, n_items:])
    inv_var = 1.0 / gaussian[:, n_items:]
    w = np.empty(n_comp)
    for i in range(n_row):
        _mixed_row(i, codes, offsets, x, log_pi, log_prof, mu, half_log_var, inv_var, inv_temp, w)
        if keep:
            for c in range(n_comp):
                summed[i, c] += w[c]
                summed_sq[i, c] += w[c] * w[c]
        r = uniforms[i]
        run = 0.0
        pick = -1
        last = 0
        for c in range(n_comp):
            if w[c] > 0.0:
                last = c
                run += w[c]
                if run >= r:
                    pick = c
                    break
        z[i] = pick if pick >= 0 else last      # the running total's rounding below r: the last possible one


@njit(cache=True)
def accumulate_rows_mixed(codes, offsets, x, log_pi, log_prof, gaussian, summed, summed_sq):
    """Add every row's allocation probabilities (with the Gaussian densities) under ``(log_pi, log_prof,
    gaussian)`` to ``summed`` (n, C), squares to ``summed_sq``, without drawing (memberships under the silo's own
    weights)."""
    n_items = x.shape[1]
    mu = gaussian[:, :n_items]
    half_log_var = 0.5 * np.log(2.0 * np.pi * gaussian[:, n_items:])
    inv_var = 1.0 / gaussian[:, n_items:]
    w = np.empty(log_pi.size)
    for i in range(codes.shape[0]):
        _mixed_row(i, codes, offsets, x, log_pi, log_prof, mu, half_log_var, inv_var, 1.0, w)
        for c in range(log_pi.size):
            summed[i, c] += w[c]
            summed_sq[i, c] += w[c] * w[c]


@njit(cache=True)
def gaussian_counts(z, m, seen, n_comp):
    """Per component and item the observed rows, ``sum m`` and ``sum m^2`` of the grid's integers ``m`` (n, G)
    (``seen`` marks the observed values): (C, 3G) int64, exact (``vcmc.family.gaussian.GRID_BITS``)."""
    n_items = m.shape[1]
    out = np.zeros((n_comp, 3 * n_items), dtype=np.int64)
    for i in range(z.size):
        c = z[i]
        for g in range(n_items):
            if seen[i, g]:
                v = m[i, g]
                out[c, g] += 1
                out[c, n_items + g] += v
                out[c, 2 * n_items + g] += v * v
    return out
