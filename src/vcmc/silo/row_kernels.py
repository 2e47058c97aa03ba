"""Compiled kernels of labelling and model assessment on the sampler's sparse layout.

Both need, for every row ``i`` and every global draw ``t``, the log weights
``log w_ic = log pi_c + sum_q log p^q_{x_iq, c}`` of the clusters. On the baseline coding of
:mod:`vcmc.silo.sampler.layout` (per variable the silo's most frequent code; every other cell, missing ones
included, an *exception*) they are ::

    log w_ic = L_c + sum_{e in exceptions(i)} D_{e, c},
    L_c = log pi_c + sum_q log p^q_{b_q, c},   D_{e, c} = log p^q_{x, c} - log p^q_{b_q, c}   (0 - ... if missing),

so a draw costs one table ``D`` (slots x clusters) and, per distinct row (rows with the same exception list
share one computation), clusters x (1 + its exceptions) additions: on health records (a few conditions
present of 80) a tenth of the per-variable gather, and for dense data (every cell an exception) the same
work as the gather with identical rows computed once. Everything is in float64 log space (no rescaling, no
fallback). A zero baseline probability ``p^q_{b_q, c}`` is not added to ``L_c`` but counted, and the count
is decremented by each exception of that variable: a row still at a positive count has ``w_ic = 0`` exactly
(the row has the baseline code there), as ``log 0 = -inf`` would give without the ``inf - inf`` of the
subtraction.

Exponentials are the costly step (clusters x distinct rows per draw); a cluster whose log weight is more than
``_NEGLIGIBLE`` below the row's best is given weight 0 without one: its share, below ``exp(-50)`` = 2e-22,
does not change the float64 sum of the others (the best contributes 1), so every other probability is the
same number, and the neglected probability is reported as 0.

Hand-written in numba (``cache=True`` as the sampler's kernels) because the work is a loop over a ragged
(CSR) structure that numpy cannot vectorise without (rows x clusters x variables) temporaries.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["draw_log_weights", "accumulate_memberships", "density_and_occupancy", "place_and_tally"]

# Log weight gap below which a cluster's share is set to 0 (exp(-50) = 2e-22: see the module docstring).
_NEGLIGIBLE = -50.0


@njit(cache=True)
def draw_log_weights(pi, prof, base_col, ecol, evar, pexc_start, pexc, lrat, zhit, lw):  # pragma: no cover
    """Log weights ``lw[u, c]`` of every distinct row ``u`` under one draw (``pi`` (C,), ``prof`` (C, P)).

    ``lrat`` (S, C) float64 and ``zhit`` (S, C) int64 are scratch tables of the slots; ``lw`` (U, C) is filled.
    """
    n_comp, n_col = prof.shape
    n_var = base_col.shape[0]
    lbase = np.empty(n_comp)
    nzero = np.zeros(n_comp, dtype=np.int64)
    for c in range(n_comp):
        v = math.log(pi[c]) if pi[c] > 0.0 else -np.inf
        for q in range(n_var):
            p = prof[c, base_col[q]]
            if p > 0.0:
                v += math.log(p)
            else:
                nzero[c] += 1
        lbase[c] = v
    for s in range(ecol.shape[0]):
        j = ecol[s]
        b = base_col[evar[s]]
        for c in range(n_comp):
            px = prof[c, j] if j < n_col else 1.0      # a missing cell: its variable contributes nothing
            pb = prof[c, b]
            lx = math.log(px) if px > 0.0 else -np.inf
            if pb > 0.0:
                lrat[s, c] = lx - math.log(pb)
                zhit[s, c] = 0
            else:
                lrat[s, c] = lx
                zhit[s, c] = 1
    z = np.empty(n_comp, dtype=np.int64)
    for u in range(pexc_start.shape[0] - 1):
        for c in range(n_comp):
            lw[u, c] = lbase[c]
            z[c] = nzero[c]
        for e in range(pexc_start[u], pexc_start[u + 1]):
            s = np.intp(pexc[e])
            for c in range(n_comp):
                lw[u, c] += lrat[s, c]
                z[c] -= zhit[s, c]
        for c in range(n_comp):
            if z[c] > 0:
                lw[u, c] = -np.inf


@njit(cache=True)
def accumulate_memberships(lw, t, mean, m2):  # pragma: no cover - numba
    """Add draw number ``t`` (1-based) to the running mean and sum of squared deviations (Welford) of every
    distinct row's allocation probabilities, from its log weights ``lw`` (U, C). A row impossible under
    every cluster gets NaN (as the normalisation 0 / 0 would)."""
    n_pat, n_comp = lw.shape
    w = np.empty(n_comp)
    for u in range(n_pat):
        mx = -np.inf
        for c in range(n_comp):
            mx = max(mx, lw[u, c])
        total = 0.0
        for c in range(n_comp):
            d = lw[u, c] - mx
            e = math.exp(d) if d > _NEGLIGIBLE else 0.0
            w[c] = e
            total += e
        for c in range(n_comp):
            x = w[c] / total if mx > -np.inf else np.nan
            delta = x - mean[u, c]
            mean[u, c] += delta / t
            m2[u, c] += delta * (x - mean[u, c])


@njit(cache=True)
def density_and_occupancy(lw, pat_start, u_rows, t, lp_max, lp_sum, lp_mean, lp_m2, occupied):  # pragma: no cover
    """One draw's contribution to WAIC and to the sampled occupancy.

    Per distinct row: ``lp = log sum_c w_c`` (the row's log density under the draw) goes into a running
    log-sum-exp over draws (``lp_max``, ``lp_sum``) and a running mean and sum of squared deviations
    (Welford; draw ``t`` is 1-based). Per row (``u_rows`` in the layout's row order, one uniform each): an
    allocation drawn from the row's probabilities by inverse CDF (the first cluster whose cumulative weight
    exceeds ``u * total``); ``occupied[c]`` is set when cluster ``c`` receives a row.
    """
    n_pat, n_comp = lw.shape
    cum = np.empty(n_comp)
    for u in range(n_pat):
        mx = -np.inf
        for c in range(n_comp):
            mx = max(mx, lw[u, c])
        total = 0.0
        last = 0
        for c in range(n_comp):
            d = lw[u, c] - mx
            if d > _NEGLIGIBLE:
                total += math.exp(d)
                last = c
            cum[c] = total
        lp = mx + math.log(total)
        if t == 1:
            lp_max[u] = lp
            lp_sum[u] = 1.0
        elif lp > lp_max[u]:
            lp_sum[u] = lp_sum[u] * math.exp(lp_max[u] - lp) + 1.0
            lp_max[u] = lp
        else:
            lp_sum[u] += math.exp(lp - lp_max[u])
        delta = lp - lp_mean[u]
        lp_mean[u] += delta / t
        lp_m2[u] += delta * (lp - lp_mean[u])
        for r in range(pat_start[u], pat_start[u + 1]):
            v = u_rows[r] * total
            k = 0
            while k < last and cum[k] <= v:
                k += 1
            occupied[k] = 1


@njit(cache=True)
def place_and_tally(n_rows, counts, var_start, var_cols, uniforms, pair_index, perm, slot_of, col_of, deg,
                    fill, pair_counts):  # pragma: no cover - numba
    """Pair co-occurrence counts of the rows of one (missingness pattern, cluster) group of a replicate.

    ``counts`` (P,) are the group's modality counts (already drawn, multinomial per variable); only the
    modalities that take part in a checked pair are placed: for each variable, its pair modalities'
    cells (``var_cols[var_start[q]:var_start[q + 1]]``, their counts summing to ``k``) go to ``k`` distinct
    rows of the ``n_rows``, chosen by a partial Fisher-Yates shuffle (one uniform each), split between the
    modalities in turn. Given the counts, the cells of one variable are a uniformly random arrangement over
    the group's exchangeable rows, independently across variables, so the pair counts are exact in
    distribution (jointly). Returns the number of uniforms used. ``perm``, ``slot_of``, ``col_of``, ``deg``
    and ``fill`` are scratch arrays (at least ``n_rows`` and the number of placed cells long).
    """
    for i in range(n_rows):
        perm[i] = i
        deg[i] = 0
    n_cell = 0
    pos = 0
    for q in range(var_start.shape[0] - 1):
        k = 0
        for a in range(var_start[q], var_start[q + 1]):
            k += counts[var_cols[a]]
        for i in range(k):                  # the first k entries of perm become a uniform random k-subset
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
            for _ in range(counts[col]):
                slot_of[n_cell] = perm[i]
                col_of[n_cell] = col
                deg[perm[i]] += 1
                n_cell += 1
                i += 1
    # group the cells by row (counting sort), then count each row's pairs
    acc = 0
    for i in range(n_rows):
        fill[i] = acc
        acc += deg[i]
    start = fill[:n_rows].copy()
    by_row = np.empty(n_cell, dtype=np.int64)
    for m in range(n_cell):
        s = slot_of[m]
        by_row[fill[s]] = col_of[m]
        fill[s] += 1
    for i in range(n_rows):
        a0 = start[i]
        a1 = a0 + deg[i]
        for a in range(a0, a1):
            for b in range(a + 1, a1):
                e = pair_index[by_row[a], by_row[b]]
                if e >= 0:
                    pair_counts[e] += 1
    return pos
