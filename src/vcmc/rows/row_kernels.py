"""Compiled kernels of labelling and model assessment on the sampler's sparse layout.

Both need, for every row ``i`` and every global draw ``t``, the weights ``w_ic = pi_c prod_q p^q_{x_iq, c}``
of the clusters. On the baseline coding of :mod:`vcmc.mcmc.sampler.layout` (per variable the silo's most
frequent code; every other cell, missing ones included, an *exception*) they are ::

    w_ic = B_c * prod_{e in exceptions(i)} R_{e, c},
    B_c = pi_c prod_q p^q_{b_q, c},   R_{e, c} = p^q_{x, c} / p^q_{b_q, c}   (1 / p^q_{b_q, c} if missing),

so a draw costs one baseline vector and one ratio table (slots x clusters) and, per distinct row (rows with
the same exception list share one computation), clusters x (1 + its exceptions) multiplications and no
exponential: on health records (a few conditions present of 80) a tenth of the per-variable gather, and for
dense data (every cell an exception) the same work as the gather with identical rows computed once. The
exponentials of a log-space computation were the costly step (9,000 distinct rows x 27 clusters per draw).

Exactness, as on the sampler's sparse path (:mod:`vcmc.mcmc.sampler.kernels_sparse`, whose table kernel
``fill_ratio_tables`` these kernels use): ``B`` is divided by
its maximum and each ratio row by its maximum over clusters (their logs are kept, for the row's log
density), so every factor is in [0, 1]; entries below ``_FLUSH`` are stored as 0; a baseline probability
below ``_TINY_BASE`` (0 included) makes its ratios NaN. A row whose total is below ``_FALLBACK_BELOW`` or NaN
is recomputed exactly in float64 log space (``_log_weights_of``, a zero baseline probability counted, not
logged, and matched by an exception of its variable). A flushed factor was below 1e-300 of a maximum and the
products only shrink, so it changes a probability by less than ``_FLUSH / _FALLBACK_BELOW`` = 1e-100.

Hand-written in numba (``cache=True`` as the sampler's kernels) because the work is a loop over a ragged
(CSR) structure that numpy cannot vectorise without (rows x clusters x variables) temporaries.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vcmc.mcmc.sampler.kernels_sparse import fill_ratio_tables

__all__ = ["DrawTables", "accumulate_memberships", "density_and_occupancy", "draw_weights", "draw_weights_log",
           "place_and_tally"]

# A row whose total weight (factors in [0, 1]) is below this, or NaN, is recomputed in log space (the
# sampler's threshold: the flush bound of fill_ratio_tables holds above it).
_FALLBACK_BELOW = 1e-200


class DrawTables:
    """Scratch tables of one draw for a layout with ``n_slots`` slots and ``n_patterns`` distinct rows."""

    def __init__(self, n_slots: int, n_patterns: int, n_comp: int):
        self.beta = np.empty(n_comp)
        self.rho = np.empty((n_slots, n_comp))
        self.lscale = np.empty(n_slots)
        self.lbase = np.empty(n_comp)
        self.nzero = np.empty(n_comp, dtype=np.int64)
        self.w = np.empty((n_patterns, n_comp))
        self.lp = np.empty(n_patterns)

    def fill(self, pi: np.ndarray, prof: np.ndarray, lay) -> None:
        """Normalised probabilities ``w`` (U, C) and log densities ``lp`` (U,) of every distinct row."""
        draw_weights(pi, prof, lay.base_col, lay.ecol, lay.evar, lay.pexc_start, lay.pexc, self.beta,
                     self.rho, self.lscale, self.lbase, self.nzero, self.w, self.lp)


@njit(cache=True)
def _log_weights_of(u, lbase, nzero, prof, base_col, ecol, evar, pexc_start, pexc, lw):  # pragma: no cover
    """Exact log weights ``lw`` (C,) of distinct row ``u`` (the fallback)."""
    n_comp, n_col = prof.shape
    for c in range(n_comp):
        v = lbase[c]
        z = nzero[c]
        for e in range(pexc_start[u], pexc_start[u + 1]):
            s = np.intp(pexc[e])
            j = ecol[s]
            px = prof[c, j] if j < n_col else 1.0          # a missing cell: its variable contributes nothing
            pb = prof[c, base_col[evar[s]]]
            v += math.log(px) if px > 0.0 else -np.inf
            if pb > 0.0:
                v -= math.log(pb)
            else:
                z -= 1
        lw[c] = v if z == 0 else -np.inf


@njit(cache=True)
def draw_weights(pi, prof, base_col, ecol, evar, pexc_start, pexc, beta, rho, lscale, lbase, nzero, w,
                 lp):  # pragma: no cover - numba
    """Allocation probabilities ``w[u, c]`` (rows sum to 1; NaN for a row impossible under every cluster)
    and log densities ``lp[u] = log sum_c w_uc`` (unnormalised) of every distinct row under one draw
    (``pi`` (C,), ``prof`` (C, P)); the other arguments are scratch (``DrawTables``)."""
    n_comp = prof.shape[0]
    logpi = np.empty(n_comp)
    for c in range(n_comp):
        logpi[c] = math.log(pi[c]) if pi[c] > 0.0 else -np.inf
    draw_weights_log(logpi, prof, base_col, ecol, evar, pexc_start, pexc, beta, rho, lscale, lbase, nzero, w, lp)


@njit(cache=True)
def draw_weights_log(logpi, prof, base_col, ecol, evar, pexc_start, pexc, beta, rho, lscale, lbase, nzero, w,
                     lp):  # pragma: no cover - numba
    """``draw_weights`` given the log weights ``logpi`` (C,): a weight far below float64's range (a sparse
    Dirichlet draw's empty component, ``exp(-800)``) keeps its value through the table's scaling."""
    n_comp, n_col = prof.shape
    # the sampler's own tables (one implementation): B / max B, ratio rows / their maxima and their logs
    lmx = fill_ratio_tables(logpi, prof, base_col, ecol, evar, n_col, beta, rho, lbase, nzero, lscale)
    lw = np.empty(n_comp)
    for u in range(pexc_start.shape[0] - 1):
        e0 = pexc_start[u]
        e1 = pexc_start[u + 1]
        for c in range(n_comp):
            w[u, c] = beta[c]
        scale = lmx
        for e in range(e0, e1):
            s = np.intp(pexc[e])
            scale += lscale[s]
            for c in range(n_comp):
                w[u, c] *= rho[s, c]
        total = 0.0
        for c in range(n_comp):
            total += w[u, c]
        if total >= _FALLBACK_BELOW:                      # False for NaN
            inv = 1.0 / total
            for c in range(n_comp):
                w[u, c] *= inv
            lp[u] = scale + math.log(total)
            continue
        _log_weights_of(u, lbase, nzero, prof, base_col, ecol, evar, pexc_start, pexc, lw)
        top = -np.inf
        for c in range(n_comp):
            top = max(top, lw[c])
        total = 0.0
        for c in range(n_comp):
            v = math.exp(lw[c] - top) if top > -np.inf else np.nan
            w[u, c] = v
            total += v
        for c in range(n_comp):
            w[u, c] /= total
        lp[u] = top + math.log(total) if top > -np.inf else -np.inf


@njit(cache=True)
def accumulate_memberships(w, t, mean, m2):  # pragma: no cover - numba
    """Add draw number ``t`` (1-based) of the distinct rows' probabilities ``w`` (U, C) to their running
    mean and sum of squared deviations (Welford)."""
    n_pat, n_comp = w.shape
    for u in range(n_pat):
        for c in range(n_comp):
            x = w[u, c]
            delta = x - mean[u, c]
            mean[u, c] += delta / t
            m2[u, c] += delta * (x - mean[u, c])


@njit(cache=True)
def density_and_occupancy(w, lp, pat_start, u_rows, t, lp_max, lp_sum, lp_mean, lp_m2, occupied):  # pragma: no cover
    """One draw's contribution to WAIC and to the sampled occupancy.

    Per distinct row: its log density ``lp`` goes into a running log-sum-exp over draws (``lp_max``,
    ``lp_sum``) and a running mean and sum of squared deviations (Welford; draw ``t`` is 1-based). Per row
    (``u_rows`` in the layout's row order, one uniform each): an allocation drawn from the row's
    probabilities ``w`` by inverse CDF (the first cluster whose cumulative probability exceeds ``u`` times
    the total, the last cluster of positive probability at most); ``occupied[c]`` counts the rows cluster
    ``c`` receives (the gate sends only whether it reached the minimum cluster size, ``vcmc.rows.ppc``).
    """
    n_pat, n_comp = w.shape
    cum = np.empty(n_comp)
    for u in range(n_pat):
        x = lp[u]
        if t == 1:
            lp_max[u] = x
            lp_sum[u] = 1.0
        elif x > lp_max[u]:
            lp_sum[u] = lp_sum[u] * math.exp(lp_max[u] - x) + 1.0
            lp_max[u] = x
        else:
            lp_sum[u] += math.exp(x - lp_max[u])
        delta = x - lp_mean[u]
        lp_mean[u] += delta / t
        lp_m2[u] += delta * (x - lp_mean[u])
        total = 0.0
        last = 0
        for c in range(n_comp):
            if w[u, c] > 0.0:
                total += w[u, c]
                last = c
            cum[c] = total
        for r in range(pat_start[u], pat_start[u + 1]):
            v = u_rows[r] * total
            k = 0
            while k < last and cum[k] <= v:
                k += 1
            occupied[k] += 1


@njit(cache=True)
def place_and_tally(n_group, cells, var_start, var_cols, uniforms, pair_index, pair_counts):  # pragma: no cover
    """Pair co-occurrence counts of one replicate from its groups' modality counts.

    Group ``g`` (a missingness pattern and a cluster) has ``n_group[g]`` rows and modality counts
    ``cells[g]`` (P,), already drawn (multinomial per variable). Only the modalities that take part in a
    checked pair are placed: for each variable, its pair modalities' cells
    (``var_cols[var_start[q]:var_start[q + 1]]``, their counts summing to ``k``) go to ``k`` distinct rows of
    the group, chosen by a partial Fisher-Yates shuffle (one uniform each), split between the modalities in
    turn. Given the counts, the cells of one variable are a uniformly random arrangement over the group's
    exchangeable rows, independently across variables (and the shuffle's starting order does not matter),
    so the pair counts are exact in distribution, jointly. Each row's placed cells are then grouped
    (counting sort) and its pairs counted into ``pair_counts`` (E,).
    """
    biggest = 0
    most = 0
    for g in range(n_group.shape[0]):
        biggest = max(biggest, n_group[g])
        k = 0
        for a in range(var_cols.shape[0]):
            k += cells[g, var_cols[a]]
        most = max(most, k)
    perm = np.empty(biggest, dtype=np.int64)
    deg = np.empty(biggest + 1, dtype=np.int64)
    fill = np.empty(biggest + 1, dtype=np.int64)
    slot_of = np.empty(most, dtype=np.int64)
    col_of = np.empty(most, dtype=np.int64)
    by_row = np.empty(most, dtype=np.int64)
    pos = 0
    for g in range(n_group.shape[0]):
        n_rows = n_group[g]
        for i in range(n_rows):
            perm[i] = i
            deg[i] = 0
        n_cell = 0
        for q in range(var_start.shape[0] - 1):
            k = 0
            for a in range(var_start[q], var_start[q + 1]):
                k += cells[g, var_cols[a]]
            for i in range(k):              # the first k entries of perm become a uniform random k-subset
                j = i + int(uniforms[pos] * (n_rows - i))
                pos += 1
                if j >= n_rows:
                    j = n_rows - 1
                tmp = perm[i]
                perm[i] = perm[j]
                perm[j] = tmp
            i = 0
            for a in range(var_start[q], var_start[q + 1]):
                col = var_cols[a]
                for _ in range(cells[g, col]):
                    slot_of[n_cell] = perm[i]
                    col_of[n_cell] = col
                    deg[perm[i]] += 1
                    n_cell += 1
                    i += 1
        acc = 0
        for i in range(n_rows):
            fill[i] = acc
            acc += deg[i]
        for m in range(n_cell):
            r = slot_of[m]
            by_row[fill[r]] = col_of[m]
            fill[r] += 1
        for i in range(n_rows):            # fill[i] is now the end of row i's cells
            a1 = fill[i]
            a0 = a1 - deg[i]
            for a in range(a0, a1):
                for b in range(a + 1, a1):
                    e = pair_index[by_row[a], by_row[b]]
                    if e >= 0:
                        pair_counts[e] += 1
