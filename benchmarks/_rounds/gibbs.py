"""Gibbs sweeps of a latent class model whose every component has its own Dirichlet profile prior.

The library's sampler (``vcmc.mcmc.sampler``) gives every component the same prior; a round of the cavity
designs gives each anchored component the pseudo-counts the other silos contributed to it (EP's cavity,
docs/design.md's Dirichlet-categorical blocks), so the probe carries its own small kernel. Written by hand
in numba (not the library's 8-lane kernel) because the probe needs per-component priors, profiles held at
given values, and the per-row votes of every kept sweep; its speed is not what is measured here.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _log_dirichlet(a, out, gen):
    """log of a Dirichlet(a) draw in place; shapes below 1 in log space (Gamma(a) underflows to 0)."""
    m = -np.inf
    for j in range(a.size):
        if a[j] >= 1.0:
            out[j] = np.log(gen.gamma(a[j]))
        else:
            out[j] = np.log(gen.gamma(a[j] + 1.0)) + np.log(gen.random()) / a[j]
        if out[j] > m:
            m = out[j]
    s = 0.0
    for j in range(a.size):
        s += np.exp(out[j] - m)
    ls = m + np.log(s)
    for j in range(a.size):
        out[j] -= ls


@njit(cache=True)
def _sweeps(x, offsets, prior_prof, alpha, z, n_sweeps, n_burn, held_logprof, hold, gen):
    """``n_sweeps`` Gibbs sweeps (parameters given z, then z given parameters) from allocation ``z``.

    Returns the mean counts over the sweeps after ``n_burn`` (``nc`` (C,), ``ct`` (C, P)), per-row votes
    (n, C) over the same sweeps, and the last allocation (z is updated in place). With ``hold`` the profiles
    are ``held_logprof`` (log, (C, P)) instead of being drawn.
    """
    n, q_n = x.shape
    c_n, p_n = prior_prof.shape
    nc = np.zeros(c_n)
    ct = np.zeros((c_n, p_n))
    for i in range(n):
        c = z[i]
        nc[c] += 1.0
        for q in range(q_n):
            if x[i, q] >= 0:
                ct[c, offsets[q] + x[i, q]] += 1.0
    acc_nc = np.zeros(c_n)
    acc_ct = np.zeros((c_n, p_n))
    votes = np.zeros((n, c_n), dtype=np.int32)
    logpi = np.empty(c_n)
    logprof = np.empty((c_n, p_n))
    lp = np.empty(c_n)
    kept = 0
    for it in range(n_sweeps):
        _log_dirichlet(alpha + nc, logpi, gen)
        if hold:
            logprof[:, :] = held_logprof
        else:
            for c in range(c_n):
                for q in range(q_n):
                    a, b = offsets[q], offsets[q + 1]
                    tmp = np.empty(b - a)
                    _log_dirichlet(prior_prof[c, a:b] + ct[c, a:b], tmp, gen)
                    logprof[c, a:b] = tmp
        nc[:] = 0.0
        ct[:, :] = 0.0
        for i in range(n):
            m = -np.inf
            for c in range(c_n):
                v = logpi[c]
                for q in range(q_n):
                    if x[i, q] >= 0:
                        v += logprof[c, offsets[q] + x[i, q]]
                lp[c] = v
                if v > m:
                    m = v
            s = 0.0
            for c in range(c_n):
                lp[c] = np.exp(lp[c] - m)
                s += lp[c]
            u = gen.random() * s
            c = 0
            run = lp[0]
            while run < u and c < c_n - 1:
                c += 1
                run += lp[c]
            z[i] = c
            nc[c] += 1.0
            for q in range(q_n):
                if x[i, q] >= 0:
                    ct[c, offsets[q] + x[i, q]] += 1.0
        if it >= n_burn:
            kept += 1
            acc_nc += nc
            acc_ct += ct
            for i in range(n):
                votes[i, z[i]] += 1
    if kept > 0:
        acc_nc /= kept
        acc_ct /= kept
    return acc_nc, acc_ct, votes


def sweeps(x, offsets, prior_prof, alpha, z, n_sweeps, n_burn, seed, held_logprof=None):
    """Python face of :func:`_sweeps` (types fixed so that numba compiles one specialisation); ``seed`` is an
    int or a SeedSequence, the stream a numpy Generator."""
    hold = held_logprof is not None
    held = np.zeros((1, 1)) if held_logprof is None else np.ascontiguousarray(held_logprof, dtype=np.float64)
    if hold and held.shape != prior_prof.shape:
        raise ValueError(f"held profiles of shape {held.shape}, prior of shape {prior_prof.shape}")
    return _sweeps(np.ascontiguousarray(x, dtype=np.int64), np.asarray(offsets, dtype=np.int64),
                   np.ascontiguousarray(prior_prof, dtype=np.float64), np.asarray(alpha, dtype=np.float64), z,
                   int(n_sweeps), int(n_burn), held if hold else np.zeros_like(prior_prof, dtype=np.float64), hold,
                   np.random.default_rng(seed))


def counts(x, offsets, z, n_comp):
    """Hard counts (nc (C,), ct (C, P)) of allocation z (missing cells skipped)."""
    p_n = int(offsets[-1])
    nc = np.bincount(z, minlength=n_comp).astype(np.float64)
    ct = np.zeros((n_comp, p_n))
    for q in range(x.shape[1]):
        ok = x[:, q] >= 0
        np.add.at(ct, (z[ok], offsets[q] + x[ok, q]), 1.0)
    return nc, ct
