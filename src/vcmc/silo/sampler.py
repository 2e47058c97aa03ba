"""Gibbs sampler of the over-fitted latent class model (method.md sections 2 and 4.1).

One compiled kernel (:func:`_gibbs_block`) runs a block of Gibbs iterations; one driver (:func:`run_chain`)
owns the loop: random initialisation, burn-in, thinning, progress and the hand-over of kept draws to the
caller (``on_block``), so that the allocations of kept iterations are streamed and never accumulated.

One iteration (a systematic-scan Gibbs sweep, method.md section 4.1):

1. allocations ``z_i | pi, p`` for every row, ``P(z_i = c) ∝ pi_c prod_q p^q_{x_iq, c}`` (missing values
   contribute the factor 1);
2. weights ``pi | z ~ Dir(alpha_local + n_c)``;
3. profiles ``p^q_c | z, X ~ Dir(beta_local^q + n^q_{c, .})``.

The state after an iteration is ``(z, pi, p)`` with ``(pi, p)`` drawn given that ``z``; it is what a kept
draw records.

Speed (architecture.md "Performance shape"): the allocation step multiplies float32 probabilities from a
(modality x component) table whose component axis is contiguous and padded to a multiple of 8, with
explicit 8-lane vector operations (``_v8_*``: numba's loop vectoriser leaves 16-lane loops scalar), instead
of adding log-probabilities and exponentiating per row and component; each table column is divided by its
maximum over components (a constant per modality cancels in the categorical), the product is renormalised
every ``_VARS_PER_BLOCK`` variables so that many variables never underflow, and a row whose best component
still falls below ``_FALLBACK_BELOW`` is recomputed exactly in float64 log space. Consecutive variables are
grouped and each group gets a joint table per iteration (one lookup per group instead of one per variable:
3 instead of 10 for the paper's variables, 10 instead of 80 for 80 binary ones), counts are kept per group
code and expanded once per sweep, and rows with identical patterns share one likelihood computation. The
categorical draw is branch-free (running sums per block of 4 lanes).

Gamma draws (about ``C+ (P + 1)`` per sweep: 405 for the paper's setting) use an inlined Marsaglia-Tsang
generator, ``G(a) = G(a + 1) exp(-E / a)`` below shape 1, and one flat loop per component. Sparse Dirichlet
draws are made in log space (ecosystem.md section 3): ``Gamma(a)`` with a tiny shape is exactly 0 in about
half the draws at ``a = 1e-3``, so for shapes below ``_LOG_PATH_SHAPE`` we use
``log G(a) = log G(a + 1) - E / a`` (``E ~ Exp(1)``, i.e. ``log U``) and normalise with log-sum-exp.

Two allocation paths. The grouped tables above cost per row in proportion to the number of variables. For
data where most cells hold one code per variable (electronic health records: ~80 binary conditions, ~6
present per person) the sparse path of :mod:`vcmc.silo.sparse` multiplies, per row, only the ratios of its
non-baseline (and missing) cells to a per-variable baseline code, in float64 (the ratios' range needs it),
with the same exact log-space fallback; its counts are kept per exception and the baseline counts derived.
``run_chain`` picks the path from the data (``layout="auto"``: the sparse one when its estimated work per
sweep is below half the dense path's, :func:`vcmc.silo.sparse.choose_layout`); the paper's data stay on the
dense path, whose draws are unchanged. Both paths sample the same model exactly but consume the random
stream differently.

Measured (``benchmarks/sampler.py``, one core shared with other jobs, medians of 5 chains):

* (a) n = 1000, 4 binary + 6 ternary variables, C+ = 15, dense path: about 5.3 times faster than a
  straightforward numba loop, i.e. ~35 us per iteration (~44 us at the issue's 235 us reference); roughly
  75% allocation (a quarter of it the likelihood products, the rest the per-row uniform, draw and
  counts), 20% Gamma draws, 10% tables and count expansion (``--breakdown``);
* (b) n = 10,000, 80 binary variables (Dirichlet(0.5) profiles, 31 non-baseline values per row), C+ = 30:
  sparse path (chosen) ~0.92 ms per iteration, dense path ~2.3 ms;
* (c) an EHR-like silo, n = 9,700, 80 binary conditions (6.1 present per person, 2 to 33), 27 clusters,
  C+ = 30: sparse path (chosen) ~0.39 ms per iteration, dense path ~1.7 ms (4.4 times); ~75% allocation,
  ~20% Gamma draws (bound by the bit generator: ~13,000 variates per sweep), 5% uniforms. Building the
  sparse layout of 290,000 x 80 such rows takes ~0.1 s.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload
from numba.np.random.distributions import random_standard_exponential, random_standard_normal
from numba.np.random.generator_core import next_uint64

from vcmc._rng import as_generator
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DataError
from vcmc.model import MISSING, beta_per_column, fractionate, profile_offsets

__all__ = [
    "ChainDraws",
    "KeptBlock",
    "conditional_draws",
    "draw_dirichlet",
    "kept_iterations",
    "local_prior",
    "log_joint",
    "run_chain",
    "sample_chains",
]

# Shapes below this use the log-space Gamma draw. Above it P(Gamma(a) < 1e-300) < 1e-70, so the direct
# draw cannot underflow and saves a log per entry.
_LOG_PATH_SHAPE = 0.25
# Renormalise the running float32 product every this many variables (a product of 10 column-max-scaled
# probabilities of the best component stays far above the float32 range limit of 1e-38).
_VARS_PER_BLOCK = 10
# A row whose best component is below this (relative to the running scale) is recomputed in float64 logs:
# the float32 path is then exact up to about 1e-38 / 1e-20 relative error, far below float32 rounding.
_FALLBACK_BELOW = 1e-20
# Table entries (relative to their column maximum) below this are stored as 0 instead of a float32
# subnormal (slow arithmetic); such a component's weight is < 1e-30 of the best one for that modality.
_TABLE_FLUSH = 1e-30
# Largest joint table of a group of variables (rows of L float32 lanes; 256 x 32 lanes = 32 KiB).
_MAX_GROUP_TABLE = 256
_LANES = 8  # float32 lanes of an AVX2 register: pad the component axis to a multiple of this


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class KeptBlock:
    """Kept draws of one block of iterations, handed to ``on_block`` (then dropped by the driver).

    Attributes
    ----------
    start : int
        Index (0-based, within the chain's kept draws) of the first draw of this block.
    z : ndarray of shape (m, n), int16
        Component ``0..C+-1`` of every row at each kept iteration (raw labels).
    pi : ndarray of shape (m, C+), float64
        Weights.
    profiles : ndarray of shape (m, C+, P), float64
        Flat profiles (``vcmc.model`` layout).
    n_occupied : ndarray of shape (m,), int64
        Number of non-empty components.
    log_posterior : ndarray of shape (m,), float64
        Complete-data log joint ``log p(X, z, pi, p)`` under the (fractionated) prior actually used; label
        invariant.
    """

    start: int
    z: np.ndarray
    pi: np.ndarray
    profiles: np.ndarray
    n_occupied: np.ndarray
    log_posterior: np.ndarray

    @property
    def size(self) -> int:
        return int(self.pi.shape[0])


@dataclass(frozen=True)
class ChainDraws:
    """All kept draws of one chain except the allocations (streamed through ``on_block`` only).

    Attributes
    ----------
    pi : ndarray of shape (T, C+)
    profiles : ndarray of shape (T, C+, P)
    n_occupied : ndarray of shape (T,), int64
    log_posterior : ndarray of shape (T,)
    final_z : ndarray of shape (n,), int16
        Allocation after the last iteration.
    seconds : float
        Sampling wall time (compilation or cache loading excluded).
    """

    pi: np.ndarray
    profiles: np.ndarray
    n_occupied: np.ndarray
    log_posterior: np.ndarray
    final_z: np.ndarray
    seconds: float


# ------------------------------------------------------------------------- 8-lane float32 vector ops
# numba compiles with LLVM's SLP vectoriser off, and the loop vectoriser leaves a 16-lane loop scalar (its
# vector body needs at least 32 iterations), so the allocation step's per-pattern products (16 lanes for
# C+ = 15) would run one lane at a time. These intrinsics emit the <8 x float> operations directly. Plain
# IEEE multiplications and additions (no fast-math flags): every lane gets exactly the value the scalar
# code would compute. Offsets are in elements from the start of a C-contiguous float32 array.
_V8 = ir.VectorType(ir.FloatType(), 8)


def _check_f32(*arrs):
    for a in arrs:
        if not (isinstance(a, types.Array) and a.dtype == types.float32 and a.layout == "C"):
            raise TypingError("8-lane vector ops need C-contiguous float32 arrays")


def _v8_ptr(context, builder, arr_t, arr_v, off):
    ary = context.make_array(arr_t)(context, builder, arr_v)
    return builder.bitcast(builder.gep(ary.data, [off]), _V8.as_pointer())


@intrinsic
def _v8_mul(typingctx, dst, doff, a, aoff, b, boff):
    """``dst[doff:doff+8] = a[aoff:aoff+8] * b[boff:boff+8]``."""
    _check_f32(dst, a, b)
    sig = types.void(dst, types.intp, a, types.intp, b, types.intp)

    def codegen(context, builder, signature, args):
        dst_v, doff_v, a_v, aoff_v, b_v, boff_v = args
        dst_t, _, a_t, _, b_t, _ = signature.args
        va = builder.load(_v8_ptr(context, builder, a_t, a_v, aoff_v), align=4)
        vb = builder.load(_v8_ptr(context, builder, b_t, b_v, boff_v), align=4)
        builder.store(builder.fmul(va, vb), _v8_ptr(context, builder, dst_t, dst_v, doff_v), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _v8_scale(typingctx, dst, doff, s):
    """``dst[doff:doff+8] *= s`` (s float32)."""
    _check_f32(dst)
    sig = types.void(dst, types.intp, types.float32)

    def codegen(context, builder, signature, args):
        dst_v, doff_v, s_v = args
        ptr = _v8_ptr(context, builder, signature.args[0], dst_v, doff_v)
        vs = builder.insert_element(ir.Constant(_V8, ir.Undefined), s_v, ir.Constant(ir.IntType(32), 0))
        vs = builder.shuffle_vector(vs, vs, ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8))
        builder.store(builder.fmul(builder.load(ptr, align=4), vs), ptr, align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _v8_copy(typingctx, dst, doff, a, aoff):
    """``dst[doff:doff+8] = a[aoff:aoff+8]``."""
    _check_f32(dst, a)
    sig = types.void(dst, types.intp, a, types.intp)

    def codegen(context, builder, signature, args):
        dst_v, doff_v, a_v, aoff_v = args
        va = builder.load(_v8_ptr(context, builder, signature.args[2], a_v, aoff_v), align=4)
        builder.store(va, _v8_ptr(context, builder, signature.args[0], dst_v, doff_v), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _v8_sum(typingctx, src, soff):
    """Sum of ``src[soff:soff+8]`` as ``((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7))``, in registers."""
    _check_f32(src)
    sig = types.float32(src, types.intp)

    def codegen(context, builder, signature, args):
        v = builder.load(_v8_ptr(context, builder, signature.args[0], args[0], args[1]), align=4)
        e = [builder.extract_element(v, ir.Constant(ir.IntType(32), i)) for i in range(8)]
        pairs = [builder.fadd(e[i], e[i + 1]) for i in range(0, 8, 2)]
        return builder.fadd(builder.fadd(pairs[0], pairs[1]), builder.fadd(pairs[2], pairs[3]))

    return sig, codegen


@intrinsic
def _v8_cumsum4(typingctx, src, soff, dst, doff):
    """Running sums inside the two blocks of 4 lanes of ``src[soff:soff+8]`` into ``dst[doff:doff+8]``
    (``dst[i] = src[4b] + ... + src[i]`` left to right); returns the two block totals (= dst[3], dst[7]).
    The vector is loaded whole (a narrow reload of a wide store stalls store-to-load forwarding) and the
    sums are made in registers and stored lane by lane."""
    _check_f32(src, dst)
    sig = types.UniTuple(types.float32, 2)(src, types.intp, dst, types.intp)

    def codegen(context, builder, signature, args):
        src_v, soff_v, dst_v, doff_v = args
        v = builder.load(_v8_ptr(context, builder, signature.args[0], src_v, soff_v), align=4)
        ary = context.make_array(signature.args[2])(context, builder, dst_v)
        totals = []
        for blk in range(2):
            acc = None
            for i in range(4 * blk, 4 * blk + 4):
                e = builder.extract_element(v, ir.Constant(ir.IntType(32), i))
                acc = e if acc is None else builder.fadd(acc, e)
                off = builder.add(doff_v, ir.Constant(doff_v.type, i))
                builder.store(acc, builder.gep(ary.data, [off]))
            totals.append(acc)
        return context.make_tuple(builder, signature.return_type, totals)

    return sig, codegen


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
    when any shape is below ``_LOG_PATH_SHAPE`` (ecosystem.md section 3): ``log G(a) = log G(a+1) - E/a``
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
def _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, want_log, rng):
    """Weights and profiles from their full conditionals given counts (method.md section 4.1, steps 2-3).

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
def _dirichlet_many(alpha, n_draws, out, rng):
    logout = np.empty(alpha.shape[0])
    for d in range(n_draws):
        _dirichlet_block(alpha, 0, alpha.shape[0], out[d], logout, False, rng)


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


@njit(cache=True)
def _fill_tables(pi, prof, wpi, tab):
    """float32 tables of one iteration: weights and profile columns divided by their max over components.

    Dividing a modality's column by a constant cancels in the allocation probabilities and keeps every
    factor in [0, 1] with 1 for the best component, so the running product underflows only for rows that
    fit no component. Entries below ``_TABLE_FLUSH`` become 0 rather than slow float32 subnormals.
    """
    n_comp, n_col = prof.shape
    mx = 0.0
    for c in range(n_comp):
        mx = max(mx, pi[c])
    inv = 1.0 / mx
    for c in range(n_comp):
        v = pi[c] * inv
        wpi[c] = v if v >= _TABLE_FLUSH else 0.0
    for j in range(n_col):
        mx = 0.0
        for c in range(n_comp):
            mx = max(mx, prof[c, j])
        inv = 1.0 / mx
        for c in range(n_comp):
            v = prof[c, j] * inv
            tab[j, c] = v if v >= _TABLE_FLUSH else 0.0


@njit(cache=True)
def _fill_logtab(prof, logtab):
    n_comp, n_col = prof.shape
    for j in range(n_col):
        for c in range(n_comp):
            logtab[j, c] = math.log(prof[c, j]) if prof[c, j] > 0.0 else -np.inf


@njit(cache=True)
def _fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab):
    """Joint tables of groups of variables: row ``grp_off[g] + code`` holds ``prod_q tab[x_q]`` over the
    group's variables for the mixed-radix ``code`` of their values (a missing value is the extra digit
    ``K^q``, factor 1). A row then needs one lookup per group instead of one per variable. Group 0 also
    carries the weights. Built as successive outer products (about 1.5 multiplications per entry); products
    below ``_TABLE_FLUSH`` are flushed to 0 as they are made (all factors are <= 1, so a flushed entry
    would stay below the threshold anyway), with a select the loop vectoriser handles.
    """
    n_grp = grp_var.shape[0] - 1
    n_lane = gtab.shape[1]
    flush = np.float32(_TABLE_FLUSH)
    zero = np.float32(0.0)
    for g in range(n_grp):
        base = grp_off[g]
        for c in range(n_lane):
            gtab[base, c] = wpi[c] if g == 0 else np.float32(1.0)
        size = 1
        for q in range(grp_var[g], grp_var[g + 1]):
            for d in range(radix[q] - 1, -1, -1):  # descending: digit 0 overwrites the sources last
                dst0 = base + d * size
                if d < kmod[q]:
                    t = offsets[q] + d
                    for a in range(size):
                        for c in range(n_lane):
                            v = gtab[base + a, c] * tab[t, c]
                            gtab[dst0 + a, c] = v if v >= flush else zero
                elif d > 0:
                    for a in range(size):
                        for c in range(n_lane):
                            gtab[dst0 + a, c] = gtab[base + a, c]
            size *= radix[q]


@njit(cache=True)
def _expand_counts(cnt_g, grp_var, grp_off, radix, kmod, offsets, ct):
    """Per-(column, component) counts from the per-(group code, component) counts of the sweep: the count
    of modality d of a variable at stride s in its group sums the codes whose digit (code // s) % r is d
    (enumerated as hi * s * r + d * s + lo, without divisions). Both arrays have the component axis
    contiguous, so the innermost loop is a vector add."""
    n_grp = grp_var.shape[0] - 1
    n_lane = ct.shape[1]
    ct[:, :] = 0
    for g in range(n_grp):
        base = grp_off[g]
        size = grp_off[g + 1] - base
        stride = 1
        for q in range(grp_var[g], grp_var[g + 1]):
            r = radix[q]
            block = stride * r
            for d in range(kmod[q]):  # digit kmod[q] (missing) is not counted
                col = offsets[q] + d
                for hi in range(0, size, block):
                    for code in range(base + hi + d * stride, base + hi + d * stride + stride):
                        for c in range(n_lane):
                            ct[col, c] += cnt_g[code, c]
            stride = block


@njit(cache=True, inline="always")
def _row_weights(gtab, gcode, u, check, w, cum, pre):
    """Unnormalised float32 allocation weights of row pattern ``u`` into ``w``; running sums inside each
    block of 4 lanes into ``cum`` and running sums over blocks into ``pre`` (``pre[0] = 0``,
    ``pre[b + 1] = pre[b] + cum[4b + 3]``). Returns the total ``pre[-1]``, or -1.0 when the float32 path
    cannot represent the weights (the caller then uses :func:`_pattern_logweights`).

    The running product is renormalised (sum 1) after the groups flagged in ``check`` (every
    ``_VARS_PER_BLOCK`` variables), so any number of variables is safe.
    """
    n_lane = w.shape[0]
    n_grp = gcode.shape[1]
    # (straight-line structure on purpose: an early return inside the group loop, or a separate path
    # fusing the first two groups, made LLVM compile this 2-3 times slower)
    j = gcode[u, 0] * n_lane
    for b in range(0, n_lane, 8):
        _v8_copy(w, b, gtab, j + b)
    ok = True
    for g in range(1, n_grp):
        if check[g - 1]:
            s = np.float32(0.0)
            for b in range(0, n_lane, 8):
                s += _v8_sum(w, b)
            ok = ok and s >= _FALLBACK_BELOW
            inv = np.float32(1.0) / s if s > 0.0 else np.float32(0.0)
            for b in range(0, n_lane, 8):
                _v8_scale(w, b, inv)
        j = gcode[u, g] * n_lane
        for b in range(0, n_lane, 8):
            _v8_mul(w, b, w, b, gtab, j + b)
    acc = np.float32(0.0)
    pre[0] = acc
    for b in range(0, n_lane, 8):
        t0, t1 = _v8_cumsum4(w, b, cum, b)
        acc += t0
        pre[b // 4 + 1] = acc
        acc += t1
        pre[b // 4 + 2] = acc
    if acc < _FALLBACK_BELOW or not ok:
        return np.float32(-1.0)
    return acc


@njit(cache=True, inline="always")
def _pick(cum, pre, t):
    """Index of the component whose interval contains ``t`` in [0, total), without data-dependent
    branches (the draws are unpredictable; a mispredicted branch costs more than the comparisons).

    Breakpoints: block ``b`` of 4 lanes covers ``[pre[b], pre[b + 1])`` and its lane ``i`` ends at
    ``pre[b] + cum[4b + i]`` (the same float32 sum as ``pre[b + 1]`` for ``i = 3``). They are
    non-decreasing, so counting those ``<= t`` gives the interval, and a lane of weight 0 has an empty
    interval (``x + 0 == x``), so it is never drawn.
    """
    n_part = pre.shape[0] - 1
    b = 0
    for i in range(1, n_part):
        b += pre[i] <= t
    base = pre[b]
    k = 4 * b
    return k + (base + cum[k] <= t) + (base + cum[k + 1] <= t) + (base + cum[k + 2] <= t)


@njit(cache=True)
def _pattern_logweights(logtab, logpi, idx, lw):
    """Exact float64 weights (max 1) of one row pattern into ``lw`` via log-sum-exp."""
    n_comp = lw.shape[0]
    lmx = -np.inf
    for c in range(n_comp):
        s = logpi[c]
        for qq in range(idx.shape[0]):
            s += logtab[idx[qq], c]
        lw[c] = s
        lmx = max(lmx, s)
    for c in range(n_comp):
        lw[c] = math.exp(lw[c] - lmx)


@njit(cache=True)
def _allocation_probabilities(lay_gcode, lay_pidx, grp_var, grp_off, radix, kmod, offsets, check, pi,
                              logpi, prof, out):
    """Normalised allocation probabilities of every pattern through the kernel's code path (tests);
    returns how many patterns took the exact log-space fallback."""
    n_pat = lay_gcode.shape[0]
    n_comp, n_col = prof.shape
    n_var = offsets.shape[0] - 1
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    tab = np.zeros((n_col, n_lane), dtype=np.float32)
    gtab = np.zeros((grp_off[grp_off.shape[0] - 1], n_lane), dtype=np.float32)
    wpi = np.zeros(n_lane, dtype=np.float32)
    w = np.empty(n_lane, dtype=np.float32)
    cum = np.empty(n_lane, dtype=np.float32)
    pre = np.empty(n_lane // 4 + 1, dtype=np.float32)
    lw = np.empty(n_comp)
    logtab = np.zeros((n_col + n_var, n_comp))
    _fill_tables(pi, prof, wpi, tab)
    _fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab)
    _fill_logtab(prof, logtab)
    n_fallback = 0
    for u in range(n_pat):
        tot = _row_weights(gtab, lay_gcode, u, check, w, cum, pre)
        if tot > 0.0:
            for c in range(n_comp):
                out[u, c] = w[c] / tot
        else:
            n_fallback += 1
            _pattern_logweights(logtab, logpi, lay_pidx[u], lw)
            out[u] = lw / lw.sum()
    return n_fallback


@njit(cache=True, inline="always")
def _allocate(gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw, logtab,
              rng):
    """Step 1 of a sweep: draw every row's component given the tables of this iteration, into ``z``,
    ``nc`` (component sizes) and ``cnt_g`` (per group code and component); one likelihood computation per
    distinct row pattern.
    """
    n_pat, n_grp = gcode.shape
    n_comp = nc.shape[0]
    have_logtab = False
    nc[:] = 0
    cnt_g[:, :] = 0
    for u in range(n_pat):
        tot = _row_weights(gtab, gcode, u, check, w, cum, pre)
        if tot > 0.0:
            for r in range(pat_start[u], pat_start[u + 1]):
                k = _pick(cum, pre, rng.random() * tot)
                z[row_of[r]] = k
                nc[k] += 1
                for g in range(n_grp):
                    cnt_g[gcode[u, g], k] += 1
        else:
            # exact float64 log space for a row that no component explains within float32 range
            if not have_logtab:
                _fill_logtab(prof, logtab)
                have_logtab = True
            _pattern_logweights(logtab, logpi, pidx[u], lw)
            tot64 = 0.0
            for c in range(n_comp):
                tot64 += lw[c]
            for r in range(pat_start[u], pat_start[u + 1]):
                t = rng.random() * tot64
                acc64 = 0.0
                k = n_comp - 1
                for c in range(n_comp):
                    acc64 += lw[c]
                    if acc64 > t:
                        k = c
                        break
                while lw[k] == 0.0:
                    k -= 1
                z[row_of[r]] = k
                nc[k] += 1
                for g in range(n_grp):
                    cnt_g[gcode[u, g], k] += 1


@njit(cache=True)
def _gibbs_block(gcode, pidx, pat_start, row_of, grp_var, grp_off, radix, kmod, check, z, pi, logpi,
                 prof, logprof, alpha, beta, offsets, const, n_iter, first_iter, burn_in, thin, keep_z,
                 keep_pi, keep_prof, keep_nocc, keep_lp, keep_at, rng):
    """Run ``n_iter`` Gibbs iterations in place; store kept ones from index ``keep_at``; return #kept.

    Row patterns (unique rows) ``u`` have group codes ``gcode[u]`` (rows of the joint group tables) and
    per-variable table rows ``pidx[u]`` (``offsets[q] + x`` or ``P + q`` if missing; for the exact
    fallback). Rows of pattern ``u`` are ``row_of[pat_start[u]:pat_start[u + 1]]``.
    """
    n_pat, n_grp = gcode.shape
    n_var = pidx.shape[1]
    n_comp = pi.shape[0]
    n_col = offsets[n_var]
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_gt = grp_off[n_grp]
    tab = np.zeros((n_col, n_lane), dtype=np.float32)
    gtab = np.zeros((n_gt, n_lane), dtype=np.float32)
    wpi = np.zeros(n_lane, dtype=np.float32)  # padding lanes stay 0: never drawn
    w = np.empty(n_lane, dtype=np.float32)
    cum = np.empty(n_lane, dtype=np.float32)
    pre = np.empty(n_lane // 4 + 1, dtype=np.float32)
    lw = np.empty(n_comp)
    logtab = np.zeros((n_col + n_var, n_comp))  # rows P.. (missing) stay 0
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt_g = np.zeros((n_gt, n_lane), dtype=np.int64)
    ct = np.zeros((n_col + n_var, n_lane), dtype=np.int64)
    shp = np.empty(max(n_comp, n_col))
    n_kept = 0
    for it in range(first_iter, first_iter + n_iter):
        _fill_tables(pi, prof, wpi, tab)
        _fill_group_tables(tab, wpi, grp_var, grp_off, radix, kmod, offsets, gtab)
        # ---- 1. allocations
        _allocate(gtab, gcode, pidx, pat_start, row_of, check, prof, logpi, z, nc, cnt_g, w, cum, pre, lw,
                  logtab, rng)
        _expand_counts(cnt_g, grp_var, grp_off, radix, kmod, offsets, ct)
        # ---- 2-3. weights and profiles given the allocations
        keep = it >= burn_in and (it - burn_in) % thin == thin - 1
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, keep, rng)
        if keep:
            s = keep_at + n_kept
            occ = 0
            for c in range(n_comp):
                if nc[c] > 0:
                    occ += 1
            keep_nocc[s] = occ
            keep_lp[s] = _log_joint(nc, ct, logpi, logprof, alpha, beta, offsets, const)
            keep_pi[s] = pi
            keep_prof[s] = prof
            keep_z[n_kept] = z
            n_kept += 1
    return n_kept


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


# ------------------------------------------------------------------------------------------- helpers
def local_prior(prior: PriorConfig, n_modalities, n_silos: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Dirichlet parameters of one silo's chain after prior fractionation (method.md section 4.1).

    Parameters
    ----------
    prior : PriorConfig
    n_modalities : sequence of int
        ``K^q`` of every variable.
    n_silos : int
        S; the local parameters are ``(a - 1)/S + 1`` when ``prior.fractionate`` (else ``a``).

    Returns
    -------
    alpha_local : ndarray of shape (C+,)
    beta_local : ndarray of shape (P,)
    """
    if not isinstance(n_silos, int | np.integer) or n_silos < 1:
        raise ConfigError(f"The 'n_silos' parameter of local_prior must be an int >= 1. Got {n_silos!r} "
                          "instead.")
    k = _check_modalities(n_modalities)
    if isinstance(prior.beta, tuple) and len(prior.beta) != k.size:
        raise ConfigError(f"The 'beta' parameter of PriorConfig must be one float or one per variable "
                          f"({k.size} variables). Got {len(prior.beta)} values instead.")
    alpha = np.full(prior.n_components, float(prior.alpha))
    beta = beta_per_column(prior.beta, k)
    s = int(n_silos)
    return (np.asarray(fractionate(alpha, s, prior.fractionate), dtype=np.float64).copy(),
            np.asarray(fractionate(beta, s, prior.fractionate), dtype=np.float64).copy())


def _check_modalities(n_modalities) -> np.ndarray:
    k = np.asarray(n_modalities)
    if k.ndim != 1 or k.size == 0 or not np.issubdtype(k.dtype, np.integer) or np.any(k < 1):
        raise DataError("The 'n_modalities' argument must be a non-empty sequence of positive ints (the "
                        f"number of modalities K^q of each variable). Got shape {k.shape}, dtype {k.dtype}.")
    return k.astype(np.int64)


def _check_codes(codes, k: np.ndarray) -> np.ndarray:
    """Validate integer codes (n, Q) in ``[-1, K^q - 1]``; messages carry no data values."""
    x = np.asarray(codes)
    if x.ndim != 2:
        raise DataError(f"The 'codes' argument must be a 2-d array (rows x variables). Got {x.ndim} "
                        "dimension(s).")
    if x.shape[1] != k.size:
        raise DataError(f"The 'codes' argument has {x.shape[1]} columns but 'n_modalities' describes "
                        f"{k.size} variables.")
    if x.shape[0] == 0:
        raise DataError("The 'codes' argument has no rows.")
    if not np.issubdtype(x.dtype, np.integer):
        raise DataError(f"The 'codes' argument must hold integer codes (0..K^q-1, {MISSING} = missing). "
                        f"Got dtype {x.dtype}.")
    bad = (x < MISSING) | (x >= k[None, :])
    if bad.any():
        cols = np.flatnonzero(bad.any(axis=0))
        raise DataError(f"The 'codes' argument has {int(bad.sum())} value(s) outside 0..K^q-1 (or "
                        f"{MISSING} for missing) in column(s) {cols.tolist()}.")
    return x.astype(np.int16)


def _table_index(codes16: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Row of the probability table (and count column) of every entry: ``offsets[q] + x``, ``P + q`` if
    missing (a dummy row of ones / a dummy count column)."""
    n_var = codes16.shape[1]
    p = int(offsets[-1])
    idx = codes16.astype(np.int32) + offsets[:-1].astype(np.int32)[None, :]
    miss = codes16 == MISSING
    return np.where(miss, p + np.arange(n_var, dtype=np.int32)[None, :], idx).astype(np.int32)


@dataclass(frozen=True)
class _Layout:
    """Kernel view of the data: unique row patterns, variable groups and their joint-table codes."""

    gcode: np.ndarray  # (U, G) int32 rows of the joint group tables
    pidx: np.ndarray  # (U, Q) int32 per-variable table rows (exact fallback)
    pat_start: np.ndarray  # (U + 1,) int64
    row_of: np.ndarray  # (n,) int64 rows sorted by pattern
    grp_var: np.ndarray  # (G + 1,) int64 variable range of each group
    grp_off: np.ndarray  # (G + 1,) int64 first joint-table row of each group
    radix: np.ndarray  # (Q,) int64 K^q, +1 if the variable has missing values
    kmod: np.ndarray  # (Q,) int64 K^q
    check: np.ndarray  # (G,) bool renormalise after this group


def _group_cap(n_rows: int) -> int:
    """Largest joint table of a group of variables: building it costs about its size per iteration, so it
    must stay well below the number of rows it saves work on (and within the L1/L2 caches)."""
    return int(min(_MAX_GROUP_TABLE, max(1, n_rows // 8)))


def _group_bounds(radix: np.ndarray, cap: int) -> list[int]:
    """Variable ranges of the groups: consecutive variables while their joint table stays within ``cap``."""
    bounds = [0]
    size = 1
    for q in range(radix.size):
        if q > bounds[-1] and size * radix[q] > cap:
            bounds.append(q)
            size = 1
        size *= int(radix[q])
    bounds.append(int(radix.size))
    return bounds


def _layout(x: np.ndarray, k: np.ndarray, offsets: np.ndarray) -> _Layout:
    n, n_var = x.shape
    miss = x == MISSING
    radix = k + miss.any(axis=0)
    bounds = _group_bounds(radix, _group_cap(n))
    grp_var = np.asarray(bounds, dtype=np.int64)
    sizes = [int(np.prod(radix[a:b])) for a, b in itertools.pairwise(bounds)]
    grp_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    digits = np.where(miss, k[None, :], x).astype(np.int64)
    gcode = np.empty((n, len(sizes)), dtype=np.int64)
    for g, (a, b) in enumerate(itertools.pairwise(bounds)):
        strides = np.concatenate([[1], np.cumprod(radix[a:b - 1])])
        gcode[:, g] = grp_off[g] + digits[:, a:b] @ strides
    # renormalise every _VARS_PER_BLOCK variables (flag the group that crosses each multiple)
    ends = grp_var[1:]
    check = (ends // _VARS_PER_BLOCK) > (grp_var[:-1] // _VARS_PER_BLOCK)
    # rows with identical patterns share one likelihood computation
    patterns, first, inverse, mult = np.unique(gcode, axis=0, return_index=True, return_inverse=True,
                                               return_counts=True)
    pidx = _table_index(x[first], offsets)
    return _Layout(gcode=np.ascontiguousarray(patterns, dtype=np.int32), pidx=pidx,
                   pat_start=np.concatenate([[0], np.cumsum(mult)]).astype(np.int64),
                   row_of=np.argsort(inverse.ravel(), kind="stable").astype(np.int64), grp_var=grp_var,
                   grp_off=grp_off, radix=radix.astype(np.int64), kmod=k.astype(np.int64), check=check)


def _dirichlet_normaliser(alpha: np.ndarray, beta: np.ndarray, offsets: np.ndarray) -> float:
    """Sum of the log normalising constants of the Dirichlet priors (constant along the chain)."""
    lg = np.vectorize(math.lgamma, otypes=[float])
    const = float(lg(alpha.sum()) - lg(alpha).sum())
    n_comp = alpha.size
    for q in range(offsets.size - 1):
        b = beta[offsets[q]:offsets[q + 1]]
        const += n_comp * float(lg(b.sum()) - lg(b).sum())
    return const


def kept_iterations(sampler: SamplerConfig) -> np.ndarray:
    """0-based iteration indices kept after burn-in and thinning (``sampler.n_kept`` of them)."""
    return np.arange(sampler.burn_in + sampler.thin - 1, sampler.n_iter, sampler.thin)


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


# -------------------------------------------------------------------------------------------- driver
def run_chain(codes: np.ndarray, n_modalities, *, prior: PriorConfig, sampler: SamplerConfig,
              n_silos: int = 1, rng=None, on_block: Callable[[KeptBlock], None] | None = None,
              progress: Callable[[int], None] | None = None, layout: str = "auto") -> ChainDraws:
    """Run one Gibbs chain of the (fractionated) over-fitted latent class model.

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        Integer codes ``0..K^q - 1``, ``-1`` for missing (skipped in the likelihood and the counts).
    n_modalities : sequence of int
        ``K^q`` of every variable.
    prior : PriorConfig
        C+, alpha, beta and whether to fractionate.
    sampler : SamplerConfig
        ``n_iter``, ``burn_in``, ``thin`` and ``block_size`` (iterations per compiled call).
    n_silos : int
        S of the fractionation (1 for pooled data).
    rng : int, Generator or None
        This chain's stream (spawn one per chain from the root seed with ``vcmc._rng.spawn_generators``).
    on_block : callable or None
        Called after every block that kept at least one draw with a :class:`KeptBlock`; the only place
        where allocations of kept iterations are available (they are not stored).
    progress : callable or None
        Called after every block with the number of iterations just completed (an increment, as
        ``tqdm.update`` expects).
    layout : {"auto", "dense", "sparse"}
        Allocation-step path. ``"auto"`` (default) picks it from the data by estimated work per sweep
        (:func:`vcmc.silo.sparse.choose_layout`): the dense grouped tables, or the sparse path whose cost
        per row grows with the row's non-baseline values (electronic health records). Both sample the same
        model exactly; they consume the random stream differently, so the draws of one seed differ.

    Returns
    -------
    ChainDraws

    Notes
    -----
    Random initialisation: allocations uniform over the C+ components, then weights and profiles from
    their full conditionals given them. Kept iterations are ``burn_in + thin - 1, burn_in + 2 thin - 1,
    ...`` (0-based), i.e. ``sampler.n_kept`` draws.
    """
    k = _check_modalities(n_modalities)
    x = _check_codes(codes, k)
    n, _ = x.shape
    n_comp = prior.n_components
    if n_comp > np.iinfo(np.int16).max:
        raise ConfigError(f"The 'n_components' parameter of PriorConfig must be at most "
                          f"{np.iinfo(np.int16).max} (allocations are int16). Got {n_comp}.")
    alpha, beta = local_prior(prior, k, n_silos)
    offsets = profile_offsets(k)
    n_col = int(offsets[-1])
    const = _dirichlet_normaliser(alpha, beta, offsets)
    gen = as_generator(rng)

    from vcmc.silo import sparse  # imports this module: deferred

    path, slay, _ = sparse.choose_layout(x, k, offsets, n_comp, layout)

    # Random initialisation (paper section 5.1): uniform allocations, parameters given them.
    z = gen.integers(0, n_comp, size=n).astype(np.int16)
    pi = np.empty(n_comp)
    logpi = np.empty(n_comp)
    prof = np.empty((n_comp, n_col))
    logprof = np.empty((n_comp, n_col))
    if path == "dense":
        lay = _layout(x, k, offsets)
        nc = np.zeros(n_comp, dtype=np.int64)
        ct = np.zeros((n_col + k.size, n_comp), dtype=np.int64)
        _count(_table_index(x, offsets), z.astype(np.int64), nc, ct)
    else:
        nc, ct = sparse.initial_counts(slay, z, n_comp, n_col + k.size)
    _draw_parameters(nc, ct, alpha, beta, offsets, np.empty(max(n_comp, n_col)), pi, logpi, prof, logprof,
                     False, gen)

    n_kept_total = sampler.n_kept
    out_pi = np.empty((n_kept_total, n_comp))
    out_prof = np.empty((n_kept_total, n_comp, n_col))
    out_nocc = np.empty(n_kept_total, dtype=np.int64)
    out_lp = np.empty(n_kept_total)
    block = sampler.block_size
    z_buf = np.empty((-(-block // sampler.thin), n), dtype=np.int16)  # most kept iterations in one block

    def call(first, n_it, keep_at):
        if path == "sparse":
            return sparse._gibbs_block_sparse(slay.base_col, slay.ecol, slay.evar, slay.pat_start, slay.row_of,
                                              slay.pexc_start, slay.pexc, z, pi, logpi, prof, logprof, alpha,
                                              beta, offsets, const, n_it, first, sampler.burn_in, sampler.thin,
                                              z_buf, out_pi, out_prof, out_nocc, out_lp, keep_at, gen)
        return _gibbs_block(lay.gcode, lay.pidx, lay.pat_start, lay.row_of, lay.grp_var, lay.grp_off,
                            lay.radix, lay.kmod, lay.check, z, pi, logpi, prof, logprof, alpha, beta,
                            offsets, const, n_it, first, sampler.burn_in, sampler.thin, z_buf, out_pi,
                            out_prof, out_nocc, out_lp, keep_at, gen)

    call(0, 0, 0)  # compile or load from cache outside the timed loop (draws nothing)
    t0 = time.perf_counter()
    done = 0
    kept = 0
    while done < sampler.n_iter:
        n_it = min(block, sampler.n_iter - done)
        m = call(done, n_it, kept)
        if m and on_block is not None:
            sl = slice(kept, kept + m)
            on_block(KeptBlock(start=kept, z=z_buf[:m].copy(), pi=out_pi[sl].copy(),
                               profiles=out_prof[sl].copy(), n_occupied=out_nocc[sl].copy(),
                               log_posterior=out_lp[sl].copy()))
        kept += m
        done += n_it
        if progress is not None:
            progress(n_it)
    seconds = time.perf_counter() - t0
    return ChainDraws(pi=out_pi, profiles=out_prof, n_occupied=out_nocc, log_posterior=out_lp,
                      final_z=z.copy(), seconds=seconds)


def _chain_worker(task: tuple) -> ChainDraws:
    codes, n_modalities, prior, sampler, n_silos, seed = task
    return run_chain(codes, n_modalities, prior=prior, sampler=sampler, n_silos=n_silos, rng=seed)


def sample_chains(codes: np.ndarray, n_modalities, *, prior: PriorConfig, sampler: SamplerConfig,
                  n_silos: int = 1, rng=None, jobs: int | None = 1) -> list[ChainDraws]:
    """Run ``sampler.n_chains`` independent chains, in parallel processes when ``jobs > 1``.

    One Generator stream per chain is spawned from ``rng`` (``SeedSequence.spawn``), so the draws do not
    depend on ``jobs`` and adding a chain never changes the others. Allocations of kept iterations are not
    returned (use :func:`run_chain` with ``on_block`` inside a worker for that).

    Returns
    -------
    list of ChainDraws
        One per chain, in chain order.
    """
    from vcmc._rng import as_seed_sequence
    from vcmc.parallel import parallel_map

    seeds = as_seed_sequence(rng).spawn(sampler.n_chains)
    tasks = [(codes, n_modalities, prior, sampler, n_silos, s) for s in seeds]
    return parallel_map(_chain_worker, tasks, jobs=jobs)
