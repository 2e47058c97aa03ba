"""Numba kernels of the silo's half of the global-informed rounds (``vcmc.silo.rounds``), on the sampler's
sparse layout (``vcmc.silo.sampler.layout.SparseLayout``: per variable a baseline code, every other cell of
a row an exception, rows with the same exceptions grouped in one pattern).

A row's log-likelihood under component c is ``base[c] + sum of delta[e, c]`` over its exception slots e,
where ``base[c]`` sums the baseline codes' log-probabilities and ``delta[e, c]`` replaces one baseline term
by the exception's (0 for a missing cell), so the cost per row grows with its exceptions, not with the
number of variables (a health record has ~6 of 80 conditions present). The counts are kept the same way:
exceptions added and their baselines taken off per row, every baseline added once per component.

Written by hand: the sampler's kernels (``vcmc.silo.sampler``) draw the parameters inside the silo from its
own counts, and no library draws categorical allocations from given log-weights and log-profiles once per
pattern while summing the counts in the same pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit


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
def _pattern_probabilities(u, base, delta, pexc_start, pexc, inv_temp, lp):
    """Allocation probabilities of pattern u into ``lp`` (C,), its log-probabilities multiplied by
    ``inv_temp`` before they are normalised."""
    _pattern_logp(u, base, delta, pexc_start, pexc, lp)
    m = -np.inf
    for c in range(lp.size):
        lp[c] *= inv_temp
        if lp[c] > m:
            m = lp[c]
    s = 0.0
    for c in range(lp.size):
        lp[c] = np.exp(lp[c] - m)
        s += lp[c]
    for c in range(lp.size):
        lp[c] = lp[c] / s


@njit(cache=True)
def sweep_patterns(pat_start, row_of, pexc_start, pexc, ecol, evar, base_col, log_pi, log_prof, uniforms, keep,
                   summed, summed_sq, z, inv_temp=1.0):
    """Allocation probabilities of every pattern under ``(log_pi, log_prof)`` (C,), (C, P), added to
    ``summed`` (U, C) when ``keep``; every row's component drawn from its pattern's probabilities with its
    own uniform (``uniforms[row]``: the draws do not depend on the patterns' order); returns the counts of
    the new allocation. ``inv_temp`` (burn-in only): the log-probabilities are multiplied by it before they
    are normalised (the conditional at temperature ``1 / inv_temp``)."""
    n_c, n_col = log_prof.shape
    n_var = base_col.size
    base, delta = _tables(log_pi, log_prof, base_col, ecol, evar)
    nc = np.zeros(n_c)
    ct = np.zeros((n_c, n_col + n_var))
    lp = np.empty(n_c)
    cum = np.empty(n_c)
    for u in range(pat_start.size - 1):
        _pattern_probabilities(u, base, delta, pexc_start, pexc, inv_temp, lp)
        run = 0.0
        for c in range(n_c):
            p = lp[c]
            if keep:
                summed[u, c] += p
                summed_sq[u, c] += p * p
            run += p
            cum[c] = run
        for j in range(pat_start[u], pat_start[u + 1]):
            i = row_of[j]
            r = uniforms[i] * cum[n_c - 1]
            c = 0
            while c < n_c - 1 and cum[c] < r:
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
    base, delta = _tables(log_pi, log_prof, base_col, ecol, evar)
    lp = np.empty(n_c)
    for u in range(pat_start.size - 1):
        _pattern_probabilities(u, base, delta, pexc_start, pexc, 1.0, lp)
        for c in range(n_c):
            p = lp[c]
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
