"""Gamma and Dirichlet draws that do not underflow for tiny concentrations: one implementation, shared.

The numba kernels (``_gamma_ge1``, ``_dirichlet_block``) run inside the Gibbs sampler's parameter step
(``vcmc.mcmc.sampler.draws``); ``draw_dirichlet`` and ``sample_dirichlet_blocks`` expose the same algorithm to
the rest of the library (the study's oracle posteriors, the server's placeholder slots, tests). A leaf
module: it imports only numpy, numba and ``vcmc.model``.

Gamma draws use an inlined Marsaglia-Tsang generator, ``G(a) = G(a + 1) exp(-E / a)`` below shape 1. Sparse
Dirichlet draws are made in log space: ``Gamma(a)`` with a tiny shape is exactly 0 in about half the draws
at ``a = 1e-3``, so for shapes below ``_LOG_PATH_SHAPE`` we use ``log G(a) = log G(a + 1) - E / a``
(``E ~ Exp(1)``) and normalise with log-sum-exp. The kernels draw from a numpy Generator or directly from its
bit generator (``_unit`` and friends, dispatched on the argument's type at compile time).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.random.distributions import random_standard_exponential, random_standard_normal
from numba.np.random.generator_core import next_uint64

from vcmc._rng import as_generator
from vcmc.exceptions import ConfigError
from vcmc.model import profile_offsets

# Shapes below this use the log-space Gamma draw. Above it P(Gamma(a) < 1e-300) < 1e-70, so the direct
# draw cannot underflow and saves a log per entry.
_LOG_PATH_SHAPE = 0.25


# ------------------------------------------------------------------------------ random variate sources
# The kernels draw from a numpy Generator (dense path, the calls numba provides) or directly from its bit
# generator (sparse path): numba's ``Generator.random`` reaches numpy's ``next_double`` through a slower
# function-pointer path than ``next_uint64``, and PCG64's ``next_double`` is ``(next_uint64 >> 11) * 2^-53``,
# so the bit-generator uniform costs ~2 ns instead of ~6 (per row and per Gamma draw). Dispatch is on the
# argument's type at compile time: the dense path compiles exactly the Generator calls.
def _unit(r):
    """Uniform on [0, 1) (53 bits)."""


def _std_normal(r):
    """Standard normal (numpy's ziggurat)."""


def _std_exponential(r):
    """Standard exponential (numpy's ziggurat)."""


@overload(_unit, inline="always")
def _ol_unit(r):
    if isinstance(r, types.NumPyRandomGeneratorType):
        return lambda r: r.random()
    if isinstance(r, types.NumPyRandomBitGeneratorType):
        return lambda r: np.float64(next_uint64(r) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return None


@overload(_std_normal, inline="always")
def _ol_std_normal(r):
    if isinstance(r, types.NumPyRandomGeneratorType):
        return lambda r: r.standard_normal()
    if isinstance(r, types.NumPyRandomBitGeneratorType):
        return lambda r: random_standard_normal(r)
    return None


@overload(_std_exponential, inline="always")
def _ol_std_exponential(r):
    if isinstance(r, types.NumPyRandomGeneratorType):
        return lambda r: r.standard_exponential()
    if isinstance(r, types.NumPyRandomBitGeneratorType):
        return lambda r: random_standard_exponential(r)
    return None


# ------------------------------------------------------------------------------------- numba kernels
@njit(cache=True, inline="always")
def _gamma_ge1(a, rng):
    """``Gamma(a)`` for ``a >= 1``: Marsaglia & Tsang (2000) squeeze/rejection with a ziggurat normal.

    Hand-written rather than ``rng.standard_gamma`` (the same algorithm in numpy and numba) because numba
    compiles that one out of line and it costs about twice as much per draw; the parameter step makes
    ~400 draws per sweep for the paper's setting, so this is a quarter of the sweep.
    """
    b = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * b)
    while True:
        x = _std_normal(rng)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = _unit(rng)
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2:  # squeeze: accepts ~98% without a log
            return b * v
        if math.log(u) < 0.5 * x2 + b * (1.0 - v + math.log(v)):
            return b * v


@njit(cache=True, inline="always")
def _dirichlet_block(shp, lo, hi, out, logout, want_log, rng):
    """Draw ``Dir(shp[lo:hi])`` into ``out[lo:hi]``; no allocation.

    Shapes below 1 use ``G(a) = G(a + 1) U^(1/a)`` with ``log U = -E``, ``E ~ Exp(1)`` (Marsaglia & Tsang's
    boost; one exponential and one ``exp`` instead of numpy's rejection loop with ``pow``). Log-space path
    when any shape is below ``_LOG_PATH_SHAPE`` (docs/design.md §12.5): ``log G(a) = log G(a+1) - E/a``
    then log-sum-exp, so a component with a tiny weight gets ``exp(-800)`` (an exact 0 in float64 at worst)
    while its log in ``logout`` stays finite and correct. ``logout[lo:hi]`` is always filled on the log
    path and, on the direct path, only if ``want_log``.
    """
    small = False
    for i in range(lo, hi):
        if shp[i] < _LOG_PATH_SHAPE:
            small = True
            break
    if small:
        mx = -np.inf
        for i in range(lo, hi):
            a = shp[i]
            if a < 1.0:
                lg = math.log(_gamma_ge1(a + 1.0, rng)) - _std_exponential(rng) / a
            else:
                lg = math.log(_gamma_ge1(a, rng))
            logout[i] = lg
            if lg > mx:
                mx = lg
        s = 0.0
        for i in range(lo, hi):
            e = math.exp(logout[i] - mx)
            out[i] = e
            s += e
        inv = 1.0 / s
        lsum = mx + math.log(s)
        for i in range(lo, hi):
            out[i] *= inv
            logout[i] -= lsum
    else:
        s = 0.0
        for i in range(lo, hi):
            a = shp[i]
            # a >= _LOG_PATH_SHAPE here: exp(-E/a) < 1e-300 needs E > 170, probability e^-170
            g = (_gamma_ge1(a + 1.0, rng) * math.exp(-_std_exponential(rng) / a) if a < 1.0
                 else _gamma_ge1(a, rng))
            out[i] = g
            s += g
        inv = 1.0 / s
        for i in range(lo, hi):
            out[i] *= inv
        if want_log:
            for i in range(lo, hi):
                logout[i] = math.log(out[i])


@njit(cache=True)
def _dirichlet_many(alpha, n_draws, out, rng):
    logout = np.empty(alpha.shape[0])
    for d in range(n_draws):
        _dirichlet_block(alpha, 0, alpha.shape[0], out[d], logout, False, rng)


def draw_dirichlet(alpha, rng=None, size: int | None = None) -> np.ndarray:
    """Dirichlet draws with the kernel's log-space algorithm (no underflow for tiny ``alpha``).

    Parameters
    ----------
    alpha : array_like of shape (k,)
        Positive concentration parameters.
    rng : int, Generator or None
    size : int or None
        Number of draws; ``None`` returns one draw of shape (k,).

    Returns
    -------
    ndarray of shape (k,) or (size, k)
        Rows on the simplex; entries may be exactly 0 in float64 only when their log is below -745.
    """
    a = np.ascontiguousarray(alpha, dtype=np.float64)
    if a.ndim != 1 or a.size < 1 or not np.all(a > 0) or not np.all(np.isfinite(a)):
        raise ConfigError("The 'alpha' argument of draw_dirichlet must be a 1-d array of positive finite "
                          f"floats. Got shape {a.shape}.")
    gen = as_generator(rng)
    n = 1 if size is None else int(size)
    out = np.empty((n, a.size))
    _dirichlet_many(a, n, out, gen)
    return out[0] if size is None else out


@njit(cache=True)
def _dirichlet_blocks(conc, offsets, n_draws, out, rng):
    k, n_col = conc.shape
    logout = np.empty(n_col)
    for d in range(n_draws):
        for c in range(k):
            for q in range(offsets.shape[0] - 1):
                _dirichlet_block(conc[c], offsets[q], offsets[q + 1], out[d, c], logout, False, rng)


def sample_dirichlet_blocks(concentration: np.ndarray, n_modalities, n_draws: int, rng=None) -> np.ndarray:
    """Independent Dirichlet draws for every variable block of every cluster (the kernel's algorithm).

    Parameters
    ----------
    concentration : ndarray of shape (K, P)
        Dirichlet parameters; the columns of variable q are ``offsets[q]:offsets[q+1]``.
    n_modalities : sequence of int
    n_draws : int
    rng : int, Generator or None

    Returns
    -------
    ndarray of shape (n_draws, K, P)
        Each variable block sums to 1.
    """
    conc = np.ascontiguousarray(concentration, dtype=np.float64)
    if conc.ndim != 2 or not np.all(conc > 0) or not np.all(np.isfinite(conc)):
        raise ConfigError("The 'concentration' argument of sample_dirichlet_blocks must be a 2-d array of "
                          f"positive finite floats. Got shape {conc.shape}.")
    offsets = profile_offsets(n_modalities)
    if int(offsets[-1]) != conc.shape[1]:
        raise ConfigError(f"sample_dirichlet_blocks: {conc.shape[1]} columns of concentration but the "
                          f"modalities add up to {int(offsets[-1])}.")
    out = np.empty((int(n_draws), *conc.shape))
    _dirichlet_blocks(conc, offsets, int(n_draws), out, as_generator(rng))
    return out


@njit(cache=True)
def _log_dirichlet_blocks(conc, offsets, out, logout, rng):
    for c in range(conc.shape[0]):
        for q in range(offsets.shape[0] - 1):
            _dirichlet_block(conc[c], offsets[q], offsets[q + 1], out[c], logout[c], True, rng)


def log_dirichlet_blocks(concentration: np.ndarray, offsets: np.ndarray, rng=None) -> np.ndarray:
    """The log of one Dirichlet draw for every variable block (``offsets``) of every row of
    ``concentration`` (K, P); finite where the draw itself underflows (shapes far below 1). A single block
    spanning the row (``offsets = [0, P]``) is one Dirichlet draw of the whole row, e.g. mixture weights."""
    conc = np.ascontiguousarray(np.atleast_2d(concentration), dtype=np.float64)
    if not np.all(conc > 0) or not np.all(np.isfinite(conc)):
        raise ConfigError("log_dirichlet_blocks: the concentration must be positive and finite")
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    if int(off[-1]) != conc.shape[1]:
        raise ConfigError(f"log_dirichlet_blocks: {conc.shape[1]} columns but the blocks end at {int(off[-1])}")
    out = np.empty_like(conc)
    logout = np.empty_like(conc)
    _log_dirichlet_blocks(conc, off, out, logout, as_generator(rng))
    return logout
