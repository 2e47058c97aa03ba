"""The parameter step of a Gibbs sweep: weights and profiles given the allocations, and the log joint.

``pi | z ~ Dir(alpha_local + n_c)`` and ``p^q_c | z, X ~ Dir(beta_local^q + n^q_{c, .})`` (docs/design.md
§4.1), drawn with the shared kernels of :mod:`vcmc.dirichlet` (log space for sparse concentrations).
``conditional_draws`` exposes the exact conditionals for tests and oracle posteriors.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vcmc._rng import as_generator
from vcmc.dirichlet import _LOG_PATH_SHAPE, _dirichlet_block, _gamma_ge1, _std_exponential
from vcmc.exceptions import ConfigError, DataError
from vcmc.mcmc.sampler.layout import _check_codes, _check_modalities, _table_index
from vcmc.model import profile_offsets


# error_model="numpy": no zero-division check before each division (every divisor here is a positive shape or a
# sum of positive Gamma draws); 8% of the step on an application-scale silo, the same draws to the bit.
@njit(cache=True, error_model="numpy")
def _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, want_log, rng):
    """Weights and profiles from their full conditionals given counts (docs/design.md §4.1, steps 2-3).

    ``ct`` holds the counts column-major, ``ct[j, c]`` (``P + Q`` rows, the last Q collect missing
    values and are ignored; at least C+ columns). ``shp`` is scratch of length ``max(C+, P)``.
    ``logpi`` is always filled; ``logprof`` where the log path was used or ``want_log``. ``rng`` is a numpy
    Generator (dense path) or its bit generator (sparse path), see ``_unit``.
    """
    n_comp = pi.shape[0]
    n_var = offsets.shape[0] - 1
    n_col = offsets[n_var]
    for c in range(n_comp):
        shp[c] = alpha[c] + nc[c]
    _dirichlet_block(shp, 0, n_comp, pi, logpi, True, rng)
    for c in range(n_comp):
        small = False
        for j in range(n_col):
            a = beta[j] + ct[j, c]
            shp[j] = a
            small |= a < _LOG_PATH_SHAPE
        pc = prof[c]
        lpc = logprof[c]
        if small:  # sparse prior (beta < 0.25): log space block by block
            for q in range(n_var):
                _dirichlet_block(shp, offsets[q], offsets[q + 1], pc, lpc, want_log, rng)
            continue
        # the usual case, as in _dirichlet_block's direct path but in one flat loop over the columns
        # (per-variable calls cost as much as the draws themselves)
        for j in range(n_col):
            a = shp[j]
            pc[j] = (_gamma_ge1(a + 1.0, rng) * math.exp(-_std_exponential(rng) / a) if a < 1.0
                     else _gamma_ge1(a, rng))
        for q in range(n_var):
            t = 0.0
            for j in range(offsets[q], offsets[q + 1]):
                t += pc[j]
            inv = 1.0 / t
            for j in range(offsets[q], offsets[q + 1]):
                pc[j] *= inv
        if want_log:
            for j in range(n_col):
                lpc[j] = math.log(pc[j])


@njit(cache=True)
def _conditional_draws(pidx, z, alpha, beta, offsets, n_draws, out_pi, out_prof, rng):
    n_comp = alpha.shape[0]
    n_var = offsets.shape[0] - 1
    n_col = offsets[n_var]
    nc = np.zeros(n_comp, dtype=np.int64)
    ct = np.zeros((n_col + n_var, n_comp), dtype=np.int64)
    _count(pidx, z, nc, ct)
    pi = np.empty(n_comp)
    logpi = np.empty(n_comp)
    prof = np.empty((n_comp, n_col))
    logprof = np.empty((n_comp, n_col))
    shp = np.empty(max(n_comp, n_col))
    for d in range(n_draws):
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, False, rng)
        out_pi[d] = pi
        out_prof[d] = prof


def conditional_draws(codes, n_modalities, z, alpha_local, beta_local, rng=None, n_draws: int = 1000):
    """Draws of ``(pi, p)`` given FIXED allocations ``z``, through the kernel's code path.

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
    n_modalities : sequence of int
    z : ndarray of shape (n,), int
        Component of each row, ``0..C+-1``.
    alpha_local : ndarray of shape (C+,)
    beta_local : ndarray of shape (P,)
    rng : int, Generator or None
    n_draws : int

    Returns
    -------
    pi : ndarray of shape (n_draws, C+)
    profiles : ndarray of shape (n_draws, C+, P)
    """
    k = _check_modalities(n_modalities)
    x = _check_codes(codes, k)
    offsets = profile_offsets(k)
    alpha = np.ascontiguousarray(alpha_local, dtype=np.float64)
    beta = np.ascontiguousarray(beta_local, dtype=np.float64)
    if beta.shape != (int(offsets[-1]),):
        raise ConfigError(f"The 'beta_local' argument must have shape ({int(offsets[-1])},). Got "
                          f"{beta.shape}.")
    zz = np.asarray(z)
    if zz.shape != (x.shape[0],) or zz.min() < 0 or zz.max() >= alpha.size:
        raise DataError(f"The 'z' argument must have shape ({x.shape[0]},) with values in "
                        f"0..{alpha.size - 1}.")
    gen = as_generator(rng)
    out_pi = np.empty((n_draws, alpha.size))
    out_prof = np.empty((n_draws, alpha.size, int(offsets[-1])))
    _conditional_draws(_table_index(x, offsets), zz.astype(np.int64), alpha, beta, offsets, int(n_draws),
                       out_pi, out_prof, gen)
    return out_pi, out_prof


@njit(cache=True)
def _log_joint(nc, ct, logpi, logprof, alpha, beta, offsets, const):
    """Complete-data log joint ``log p(X, z, pi, p)`` from counts (``const`` = Dirichlet normalisers)."""
    n_comp = logpi.shape[0]
    n_col = offsets[offsets.shape[0] - 1]
    lp = const
    for c in range(n_comp):
        lp += (nc[c] + alpha[c] - 1.0) * logpi[c]
        for j in range(n_col):
            lp += (ct[j, c] + beta[j] - 1.0) * logprof[c, j]
    return lp


@njit(cache=True)
def _keep_draw(s, nc, ct, pi, logpi, prof, logprof, alpha, beta, offsets, const, keep_pi, keep_prof, keep_nocc,
               keep_lp):
    """Store kept draw ``s`` (weights, profiles, occupied components, log joint): the one place both
    allocation kernels record a kept iteration (each stores its allocations in its own row order)."""
    occ = 0
    for c in range(nc.shape[0]):
        if nc[c] > 0:
            occ += 1
    keep_nocc[s] = occ
    keep_lp[s] = _log_joint(nc, ct, logpi, logprof, alpha, beta, offsets, const)
    keep_pi[s] = pi
    keep_prof[s] = prof


def log_joint(codes, n_modalities, z, pi, profiles, alpha_local, beta_local) -> float:
    """Complete-data log joint ``log p(X, z, pi, p)`` (the quantity stored as ``log_posterior``).

    A plain numpy implementation, independent of the kernel, for checks and for callers that relabel.
    """
    k = _check_modalities(n_modalities)
    x = _check_codes(codes, k)
    offsets = profile_offsets(k)
    z = np.asarray(z, dtype=np.int64)
    pi = np.asarray(pi, dtype=np.float64)
    profiles = np.asarray(profiles, dtype=np.float64)
    from vcmc.model import log_likelihood_rows

    with np.errstate(divide="ignore"):
        ll = log_likelihood_rows(x, pi, profiles, k)[np.arange(x.shape[0]), z].sum()
        prior = (np.sum((alpha_local - 1.0) * np.log(pi)) + np.sum((beta_local - 1.0)[None, :]
                                                                   * np.log(profiles)))
    return float(ll + prior + _dirichlet_normaliser(np.asarray(alpha_local, float),
                                                    np.asarray(beta_local, float), offsets))


def _dirichlet_normaliser(alpha: np.ndarray, beta: np.ndarray, offsets: np.ndarray) -> float:
    """Sum of the log normalising constants of the Dirichlet priors (constant along the chain)."""
    lg = np.vectorize(math.lgamma, otypes=[float])
    const = float(lg(alpha.sum()) - lg(alpha).sum())
    n_comp = alpha.size
    for q in range(offsets.size - 1):
        b = beta[offsets[q]:offsets[q + 1]]
        const += n_comp * float(lg(b.sum()) - lg(b).sum())
    return const


@njit(cache=True)
def _count(pidx, z, nc, ct):
    """Component sizes and (column x component) counts of an allocation (missing -> dummy rows)."""
    nc[:] = 0
    ct[:, :] = 0
    n, n_var = pidx.shape
    for i in range(n):
        c = z[i]
        nc[c] += 1
        for q in range(n_var):
            ct[pidx[i, q], c] += 1
