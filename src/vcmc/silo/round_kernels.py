"""Numba kernels of the silo's half of the global-informed rounds (``vcmc.silo.rounds``).

Written by hand: the sampler's kernels (``vcmc.silo.sampler``) draw the parameters inside the silo from its
own counts, and no library draws categorical allocations from given log-weights and log-profiles, once per
distinct row pattern, while summing the counts in the same pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def counts(patterns, inverse, z, offsets, n_comp):
    n_q = patterns.shape[1]
    nc = np.zeros(n_comp)
    ct = np.zeros((n_comp, offsets[-1]))
    for i in range(z.size):
        c = z[i]
        nc[c] += 1.0
        u = inverse[i]
        for q in range(n_q):
            x = patterns[u, q]
            if x >= 0:
                ct[c, offsets[q] + x] += 1.0
    return nc, ct


@njit(cache=True)
def sweep_rows(patterns, inverse, offsets, log_pi, log_prof, uniforms, keep, summed, summed_sq, z):
    """Allocation probabilities of every pattern under (log_pi, log_prof), added to ``summed`` when
    ``keep``; each row's component drawn from its pattern's probabilities with its uniform; returns the
    counts of the new allocation."""
    n_u, n_q = patterns.shape
    n_c = log_pi.size
    cum = np.empty((n_u, n_c))
    lp = np.empty(n_c)
    for u in range(n_u):
        m = -np.inf
        for c in range(n_c):
            v = log_pi[c]
            for q in range(n_q):
                x = patterns[u, q]
                if x >= 0:
                    v += log_prof[c, offsets[q] + x]
            lp[c] = v
            if v > m:
                m = v
        s = 0.0
        for c in range(n_c):
            lp[c] = np.exp(lp[c] - m)
            s += lp[c]
        run = 0.0
        for c in range(n_c):
            p = lp[c] / s
            if keep:
                summed[u, c] += p
                summed_sq[u, c] += p * p
            run += p
            cum[u, c] = run
    for i in range(z.size):
        u = inverse[i]
        r = uniforms[i] * cum[u, n_c - 1]
        c = 0
        while c < n_c - 1 and cum[u, c] < r:
            c += 1
        z[i] = c
    return counts(patterns, inverse, z, offsets, n_c)
