"""Numba kernels of the silo's half of the global-informed rounds (``vcmc.silo.rounds``), on the sampler's
sparse layout (``vcmc.silo.sampler.layout.SparseLayout``: per variable a baseline code, every other cell of
a row an exception, rows with the same exceptions grouped in one pattern).

A sweep's allocation probabilities are the labelling kernel's (``vcmc.silo.row_kernels.draw_weights_log``:
per component a baseline product and per exception slot a ratio, so a row costs its exceptions and no
exponential), drawn and counted here. A split-merge proposal's two log-likelihoods (``pair_loglik``) are a
sum per exception in log space: ``base[c]`` sums the baseline codes' log-probabilities and ``delta[e, c]``
replaces one baseline term by the exception's (0 for a missing cell). The counts are kept the same way:
exceptions added and their baselines taken off per row, every baseline added once per component.

Written by hand: no library draws categorical allocations once per pattern of a ragged (CSR) layout while
summing the counts in the same pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vcmc.silo.row_kernels import draw_weights_log


@njit(cache=True)
def _finish_counts(nc, ct, base_col, n_col):
    """Add every component's baseline counts (its rows minus the exceptions already taken off) and drop
    the missing cells' columns."""
    for c in range(nc.size):
        for q in range(base_col.size):
            ct[c, base_col[q]] += nc[c]
    return nc, ct[:, :n_col].copy()


@njit(cache=True)
def _add_row(nc, ct, c, first, last, pexc, ecol, evar, base_col):
    """Count one row of component c whose exception slots are ``pexc[first:last]``: its exceptions added,
    their baselines taken off (``_finish_counts`` adds every baseline once per row of the component)."""
    nc[c] += 1.0
    for k in range(first, last):
        e = pexc[k]
        ct[c, ecol[e]] += 1.0
        ct[c, base_col[evar[e]]] -= 1.0


@njit(cache=True)
def counts(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, z, n_col, n_comp):
    """Component sizes (C,) and component-by-modality counts (C, P) of the allocation ``z``."""
    nc = np.zeros(n_comp)
    ct = np.zeros((n_comp, n_col + base_col.size))
    for u in range(pat_start.size - 1):
        for j in range(pat_start[u], pat_start[u + 1]):
            c = z[row_of[j]]
            _add_row(nc, ct, c, pexc_start[u], pexc_start[u + 1], pexc, ecol, evar, base_col)
    return _finish_counts(nc, ct, base_col, n_col)


@njit(cache=True)
def _tables(log_pi, log_prof, base_col, ecol, evar):
    """``base`` (C,): log weight plus the baseline codes' log-probabilities of each component; ``delta``
    (slots, C): what an exception slot changes (0 for a missing cell's own term)."""
    n_c, n_col = log_prof.shape
    n_var = base_col.size
    base = log_pi.copy()
    for c in range(n_c):
        for q in range(n_var):
            base[c] += log_prof[c, base_col[q]]
    n_slot = ecol.size
    delta = np.empty((n_slot, n_c))
    for e in range(n_slot):
        col = ecol[e]
        b = base_col[evar[e]]
        for c in range(n_c):
            v = log_prof[c, col] if col < n_col else 0.0     # a missing cell: no term
            delta[e, c] = v - log_prof[c, b]
    return base, delta


@njit(cache=True)
def _pattern_logp(u, base, delta, pexc_start, pexc, lp):
    """Unnormalised log allocation probabilities of pattern u into ``lp`` (C,)."""
    for c in range(lp.size):
        lp[c] = base[c]
    for k in range(pexc_start[u], pexc_start[u + 1]):
        e = pexc[k]
        for c in range(lp.size):
            lp[c] += delta[e, c]


@njit(cache=True)
def _pattern_weights(log_pi, log_prof, base_col, ecol, evar, pexc_start, pexc):
    """Allocation probabilities (U, C) of every pattern under ``(log_pi, log_prof)``, rows summing to 1: the
    labelling kernel's ratio tables (``vcmc.silo.row_kernels.draw_weights_log``, one implementation), a
    product per exception instead of a sum of logs and an exponential per component (the exponentials were
    most of a round's cost)."""
    n_c, n_col = log_prof.shape
    n_pat = pexc_start.size - 1
    prof = np.exp(log_prof)
    w = np.empty((n_pat, n_c))
    draw_weights_log(log_pi, prof, base_col, ecol, evar, pexc_start, pexc, np.empty(n_c),
                     np.empty((ecol.size, n_c)), np.empty(ecol.size), np.empty(n_c), np.empty(n_c, dtype=np.int64),
                     w, np.empty(n_pat))
    for u in range(n_pat):
        if not w[u, 0] >= 0.0:       # NaN: no component gives the row a positive probability
            raise FloatingPointError("round sweep: a row has probability 0 under every component of the draw")
    return w


@njit(cache=True)
def sweep_patterns(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof, uniforms, keep,
                   summed, summed_sq, z, inv_temp=1.0):
    """Allocation probabilities of every pattern under ``(log_pi, log_prof)`` (C,), (C, P), added to
    ``summed`` (U, C) when ``keep``; every row's component drawn from its pattern's probabilities with its
    own uniform (``uniforms[row]``: the draws do not depend on the patterns' order); returns the counts of
    the new allocation. ``inv_temp`` (burn-in only): the probabilities are raised to it and renormalised
    (the conditional at temperature ``1 / inv_temp``).

    The probabilities are exact but for the tables' flush (a factor below 1e-300 of its column's maximum
    counts as 0: it changes a probability by less than 1e-100, ``vcmc.silo.row_kernels``); a profile entry
    whose exponential underflows is an exact 0, as in every other kernel given probabilities."""
    n_c, n_col = log_prof.shape
    n_var = base_col.size
    w = _pattern_weights(log_pi, log_prof, base_col, ecol, evar, pexc_start, pexc)
    tempered = inv_temp != 1.0
    nc = np.zeros(n_c)
    ct = np.zeros((n_c, n_col + n_var))
    cum = np.empty(n_c)
    for u in range(pat_start.size - 1):
        if tempered:
            s = 0.0
            for c in range(n_c):
                w[u, c] = w[u, c] ** inv_temp
                s += w[u, c]
            for c in range(n_c):
                w[u, c] /= s
        run = 0.0
        for c in range(n_c):
            p = w[u, c]
            if keep:
                summed[u, c] += p
                summed_sq[u, c] += p * p
            run += p
            cum[c] = run
        for j in range(pat_start[u], pat_start[u + 1]):
            i = row_of[j]
            r = uniforms[i] * cum[n_c - 1]
            # the first component whose running total reaches r: counted without branches (the loop
            # vectorises; a search's data-dependent exit was mispredicted about once a row)
            c = 0
            for k in range(n_c - 1):
                c += cum[k] < r
            while w[u, c] == 0.0 and c < n_c - 1:     # r = 0 exactly: never a component of weight 0
                c += 1
            z[i] = c
            _add_row(nc, ct, c, pexc_start[u], pexc_start[u + 1], pexc, ecol, evar, base_col)
    return _finish_counts(nc, ct, base_col, n_col)


@njit(cache=True)
def accumulate_patterns(pat_start, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof, summed, summed_sq):
    """Add every pattern's allocation probabilities under ``(log_pi, log_prof)`` to ``summed`` (and their
    squares to ``summed_sq``) without drawing: the memberships under the silo's own weights
    (``aggregation.round_labels = "silo"``, ``vcmc.silo.rounds.sweep``)."""
    n_c = log_prof.shape[0]
    w = _pattern_weights(log_pi, log_prof, base_col, ecol, evar, pexc_start, pexc)
    for u in range(pat_start.size - 1):
        for c in range(n_c):
            p = w[u, c]
            summed[u, c] += p
            summed_sq[u, c] += p * p


@njit(cache=True)
def pair_loglik(pat_start, pexc_start, pexc, ecol, evar, base_col, log_a, log_b):
    """(U, 2) log-likelihood of every pattern under the two profiles ``log_a`` and ``log_b`` (P,) (a missing
    cell has no term): the rows' split probabilities of a split-merge proposal (``vcmc.silo.rounds.move``)."""
    log_prof = np.empty((2, log_a.size))
    log_prof[0] = log_a
    log_prof[1] = log_b
    base, delta = _tables(np.zeros(2), log_prof, base_col, ecol, evar)
    out = np.empty((pat_start.size - 1, 2))
    lp = np.empty(2)
    for u in range(pat_start.size - 1):
        _pattern_logp(u, base, delta, pexc_start, pexc, lp)
        out[u, 0] = lp[0]
        out[u, 1] = lp[1]
    return out
