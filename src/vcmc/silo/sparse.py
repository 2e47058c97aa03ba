"""Sparse path of the Gibbs sampler: per-row cost grows with the row's exceptions, not with the variables.

Used by :func:`vcmc.silo.sampler.run_chain` when the data are mostly one code per variable (electronic health
records: ~80 binary conditions, a handful present per person); the choice is made from the data by
:func:`choose_layout`. The sampled model, the parameter step and the kept-draw bookkeeping are those of the
dense path (:mod:`vcmc.silo.sampler`); only the allocation step and the counts differ.

Baseline coding. Per variable ``q`` the *baseline* code ``b_q`` is the most frequent observed code in this
silo's data. A cell is an *exception* when it is missing or differs from the baseline; each (variable,
non-baseline code) pair and each (variable, missing) pair that occurs is an exception *slot* ``e``. For a
component ``c``::

    pi_c prod_q p^q_{x_iq, c} = B_c * prod_{e in exceptions(i)} R_{e, c},
    B_c = pi_c prod_q p^q_{b_q, c},   R_{e, c} = p^q_{x, c} / p^q_{b_q, c}   (1 / p^q_{b_q, c} if missing),

so one sweep computes the baseline vector ``B`` and the ratio table ``R`` once (over the C+ lanes) and each
row multiplies only its exceptions. Counts are kept per slot and component; the baseline code's count is
derived once per sweep as ``n_c`` minus the variable's exception counts (missing ones included).

Exactness. ``B`` is divided by its maximum and each ratio column by its maximum over components, so every
factor is in [0, 1] and a row's weights can only shrink. The shrinkage of the best component is much larger
than on the dense path (a column's maximum ratio often belongs to an empty component drawn from the prior:
on an EHR-like silo a third of the rows shrink below 1e-20 and some to 1e-65), which float32 cannot hold,
so the products are float64 (4-lane vectors ``_v4d_*``): entries below ``_FLUSH`` are stored as 0 and a
row whose total falls below ``_FALLBACK_BELOW`` is recomputed exactly in float64 log space. A flushed factor
was below 1e-300 of a column maximum and the products only shrink, so it changes a probability by less than
``_FLUSH / _FALLBACK_BELOW`` = 1e-100. A baseline probability below ``_TINY_BASE`` (0 included: sparse
Dirichlet draws) would make its ratios overflow; those ratios are stored as NaN, which propagates to the
row's total, so every row with such an exception takes the exact fallback (where an exact zero of the
baseline is handled by counting). Rows with identical exception lists (= identical rows) share one
likelihood computation.

Random variates. The allocation uniforms (one per row, drawn for the whole sweep before the row loop: a
bit-generator call inside it costs twice as much) and the parameter step's variates come straight from the
chain's bit generator (``vcmc.silo.sampler._unit`` and friends), so for one seed the sparse path's draws
differ from the dense path's; their law is the same (tests/silo/test_sampler_sparse.py).

Speed: see the module docstring of :mod:`vcmc.silo.sampler` (figures) and ``benchmarks/sampler.py``
(case c, ``--breakdown``, ``--layout-model``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from vcmc.exceptions import ConfigError
from vcmc.silo.sampler import (
    _LANES,
    _draw_parameters,
    _group_bounds,
    _group_cap,
    _log_joint,
    _unit,
)

__all__ = ["SparseLayout", "choose_layout", "sparse_layout"]

# Float64 products of factors in [0, 1]: a row whose total is below this is recomputed in log space.
_FALLBACK_BELOW = 1e-200
# Table entries (relative to their column maximum) below this are stored as 0 (never a subnormal).
_FLUSH = 1e-300
# A baseline probability below this makes the ratios of its variable NaN for that component (exact fallback
# for the rows concerned): p / b stays below 1e280, far from the float64 limit.
_TINY_BASE = 1e-280
# The baseline product multiplies probabilities >= this directly and rescales the running product below
# _RESCALE_BELOW (so it never leaves the normal float64 range); smaller ones are added as logs.
_DIRECT_MIN = 1e-100
_RESCALE_BELOW = 1e-200
_LANES64 = 4  # float64 lanes of an AVX2 register


# ------------------------------------------------------------------------ 4-lane float64 vector ops
# LLVM IR intrinsics, as the float32 ops of vcmc.silo.sampler: numba's loop vectoriser leaves these short
# loops scalar, and a numba helper taking arrays pays reference counting at every call. Plain IEEE
# operations (no fast-math flags).
_V4D = ir.VectorType(ir.DoubleType(), 4)


def _check_f64(*arrs):
    for a in arrs:
        if not (isinstance(a, types.Array) and a.dtype == types.float64 and a.layout == "C"):
            raise TypingError("4-lane vector ops need C-contiguous float64 arrays")


@intrinsic
def _v4d_pick(typingctx, w, woff, pre, qoff, n_cmp, t):
    """Component of the categorical draw ``t`` in [0, total) given the lane weights ``w[woff:]`` and the
    block prefix sums ``pre[qoff:]`` (see :func:`_sparse_pass`), without data-dependent branches (the draws
    are unpredictable). The block is the number of ``pre[1:1 + 4 max(n_cmp, 2)]`` entries ``<= t`` (vector
    compares and popcounts; ``pre[n_blk] = total > t`` and the padding is +inf), the lane the number of
    in-block lane ends ``pre[b] + w0``, ``pre[b] + (w0 + w1)``, ``pre[b] + ((w0 + w1) + w2)`` that are
    ``<= t``. Written in IR: the same code in numba carries negative-index wrap-around on every access and
    spills registers."""
    _check_f64(w, pre)
    sig = types.uintp(w, types.intp, pre, types.intp, types.intp, types.float64)

    def codegen(context, builder, signature, args):
        w_v, woff_v, pre_v, qoff_v, n_v, t_v = args
        wp = builder.gep(context.make_array(signature.args[0])(context, builder, w_v).data, [woff_v])
        pp = builder.gep(context.make_array(signature.args[2])(context, builder, pre_v).data, [qoff_v])
        i64 = n_v.type
        i32 = ir.IntType(32)
        tv = builder.insert_element(ir.Constant(_V4D, ir.Undefined), t_v, ir.Constant(i32, 0))
        tv = builder.shuffle_vector(tv, tv, ir.Constant(ir.VectorType(i32, 4), [0] * 4))
        ctpop = builder.module.declare_intrinsic("llvm.ctpop", [i64])

        def count(chunk_index):  # entries pre[1 + 4i .. 4 + 4i] <= t
            off = builder.add(builder.mul(chunk_index, ir.Constant(i64, 4)), ir.Constant(i64, 1))
            v = builder.load(builder.bitcast(builder.gep(pp, [off]), _V4D.as_pointer()), align=8)
            bits = builder.bitcast(builder.fcmp_ordered("<=", v, tv), ir.IntType(4))
            return builder.call(ctpop, [builder.zext(bits, i64)])

        # the first two compares unconditionally (pre holds at least 8 entries after pre[0]: up to 32 lanes
        # without a loop), the others (more than 32 lanes) in a loop
        two = ir.Constant(i64, 2)
        first = builder.add(count(ir.Constant(i64, 0)), count(ir.Constant(i64, 1)))
        pre_bb = builder.basic_block
        loop_bb = builder.append_basic_block("pick.loop")
        exit_bb = builder.append_basic_block("pick.exit")
        builder.cbranch(builder.icmp_signed(">", n_v, two), loop_bb, exit_bb)
        builder.position_at_end(loop_bb)
        i_phi = builder.phi(i64)
        i_phi.add_incoming(two, pre_bb)
        acc = builder.phi(i64)
        acc.add_incoming(first, pre_bb)
        new = builder.add(acc, count(i_phi))
        i_next = builder.add(i_phi, ir.Constant(i64, 1))
        i_phi.add_incoming(i_next, loop_bb)
        acc.add_incoming(new, loop_bb)
        builder.cbranch(builder.icmp_signed("<", i_next, n_v), loop_bb, exit_bb)
        builder.position_at_end(exit_bb)
        blk = builder.phi(i64)
        blk.add_incoming(first, pre_bb)
        blk.add_incoming(new, loop_bb)
        base = builder.load(builder.gep(pp, [blk]))
        k0 = builder.mul(blk, ir.Constant(i64, 4))
        lanes = [builder.load(builder.gep(wp, [builder.add(k0, ir.Constant(i64, i))])) for i in range(3)]
        s1 = builder.fadd(lanes[0], lanes[1])
        s2 = builder.fadd(s1, lanes[2])
        k = k0
        for part in (lanes[0], s1, s2):
            le = builder.fcmp_ordered("<=", builder.fadd(base, part), t_v)
            k = builder.add(k, builder.zext(le, i64))
        return k

    return sig, codegen


@intrinsic
def _count_row(typingctx, cnt, poff, e0, e1, k):
    """``cnt[poff[e] + k] += 1`` for ``e`` in ``[e0, e1)`` (int32 counts, uint32 offsets), in IR for the
    reason given in :func:`_v4d_pick`."""
    if not (isinstance(cnt, types.Array) and cnt.dtype == types.int32 and cnt.layout == "C"
            and isinstance(poff, types.Array) and poff.dtype == types.uint32 and poff.layout == "C"):
        raise TypingError("cnt must be C-contiguous int32 and poff C-contiguous uint32")
    sig = types.void(cnt, poff, types.intp, types.intp, types.uintp)

    def codegen(context, builder, signature, args):
        cnt_v, poff_v, e0_v, e1_v, k_v = args
        cp = context.make_array(signature.args[0])(context, builder, cnt_v).data
        op = context.make_array(signature.args[1])(context, builder, poff_v).data
        i64 = e0_v.type
        pre_bb = builder.basic_block
        loop_bb = builder.append_basic_block("count.loop")
        exit_bb = builder.append_basic_block("count.exit")
        builder.cbranch(builder.icmp_signed("<", e0_v, e1_v), loop_bb, exit_bb)
        builder.position_at_end(loop_bb)
        e_phi = builder.phi(i64)
        e_phi.add_incoming(e0_v, pre_bb)
        idx = builder.add(builder.zext(builder.load(builder.gep(op, [e_phi])), i64), k_v)
        ptr = builder.gep(cp, [idx])
        builder.store(builder.add(builder.load(ptr), ir.Constant(ir.IntType(32), 1)), ptr)
        e_next = builder.add(e_phi, ir.Constant(i64, 1))
        e_phi.add_incoming(e_next, loop_bb)
        builder.cbranch(builder.icmp_signed("<", e_next, e1_v), loop_bb, exit_bb)
        builder.position_at_end(exit_bb)
        return context.get_dummy_value()

    return sig, codegen


def _make_v4d_prod(n_chunks: int):
    """Intrinsic ``dst[doff+off : doff+off+4m] = beta[off:off+4m] * prod_e tab.flat[idx[e]+off : ...+4m]``
    over ``e`` in ``[e0, e1)`` for ``m = n_chunks`` (even) vectors of 4 float64 lanes, then the running
    totals of those blocks of 4 lanes: block ``b = off / 4 + i`` sums to ``(s0 + s1) + (s2 + s3)`` and
    ``pre[qoff + b + 1] = acc + (totals of blocks off / 4 .. b)``, summed left to right from ``acc``; returns
    the last one. The running products are held in registers across the loop (with a store and reload per
    exception, the loop would be bound by the store-to-load forwarding latency) and the totals are made
    from them, not reloaded."""

    @intrinsic
    def _prod(typingctx, dst, doff, off, beta, tab, idx, e0, e1, pre, qoff, acc_in):
        _check_f64(dst, beta, tab, pre)
        if not (isinstance(idx, types.Array) and idx.dtype == types.uint32 and idx.layout == "C"):
            raise TypingError("idx must be a C-contiguous uint32 array")
        sig = types.float64(dst, types.intp, types.intp, beta, tab, idx, types.intp, types.intp, pre, types.intp,
                            types.float64)

        def codegen(context, builder, signature, args):
            dst_v, doff_v, off_v, beta_v, tab_v, idx_v, e0_v, e1_v, pre_v, qoff_v, acc_v = args
            dst_t, _, _, beta_t, tab_t, idx_t, _, _, pre_t = signature.args[:9]
            dp = context.make_array(dst_t)(context, builder, dst_v).data
            bp = context.make_array(beta_t)(context, builder, beta_v).data
            tp = context.make_array(tab_t)(context, builder, tab_v).data
            ip = context.make_array(idx_t)(context, builder, idx_v).data
            pp = context.make_array(pre_t)(context, builder, pre_v).data
            i64 = off_v.type
            i32 = ir.IntType(32)

            def vptr(p, o, k):
                o = builder.add(o, ir.Constant(i64, 4 * k))
                return builder.bitcast(builder.gep(p, [o]), _V4D.as_pointer())

            def shuf(x, y, mask):
                return builder.shuffle_vector(x, y, ir.Constant(ir.VectorType(i32, 4), mask))

            start = [builder.load(vptr(bp, off_v, k), align=8) for k in range(n_chunks)]
            pre_bb = builder.basic_block
            loop_bb = builder.append_basic_block("prod.loop")
            exit_bb = builder.append_basic_block("prod.exit")
            builder.cbranch(builder.icmp_signed("<", e0_v, e1_v), loop_bb, exit_bb)
            builder.position_at_end(loop_bb)
            e_phi = builder.phi(i64)
            e_phi.add_incoming(e0_v, pre_bb)
            acc = []
            for k in range(n_chunks):
                ph = builder.phi(_V4D)
                ph.add_incoming(start[k], pre_bb)
                acc.append(ph)
            base = builder.add(builder.zext(builder.load(builder.gep(ip, [e_phi])), i64), off_v)
            new = [builder.fmul(acc[k], builder.load(vptr(tp, base, k), align=8)) for k in range(n_chunks)]
            e_next = builder.add(e_phi, ir.Constant(i64, 1))
            e_phi.add_incoming(e_next, loop_bb)
            for k in range(n_chunks):
                acc[k].add_incoming(new[k], loop_bb)
            builder.cbranch(builder.icmp_signed("<", e_next, e1_v), loop_bb, exit_bb)
            builder.position_at_end(exit_bb)
            fin = []
            for k in range(n_chunks):  # all phis first (LLVM groups them at the top of the block)
                f = builder.phi(_V4D)
                f.add_incoming(start[k], pre_bb)
                f.add_incoming(new[k], loop_bb)
                fin.append(f)
            dst_off = builder.add(doff_v, off_v)
            for k in range(n_chunks):
                builder.store(fin[k], vptr(dp, dst_off, k), align=8)
            # block totals of pairs of blocks: [a0+a1, b0+b1, a2+a3, b2+b3], then lanes 0, 1 + lanes 2, 3
            run = acc_v
            first = builder.add(builder.add(qoff_v, builder.sdiv(off_v, ir.Constant(i64, 4))), ir.Constant(i64, 1))
            for k in range(0, n_chunks, 2):
                h = builder.fadd(shuf(fin[k], fin[k + 1], [0, 4, 2, 6]), shuf(fin[k], fin[k + 1], [1, 5, 3, 7]))
                t = builder.fadd(h, shuf(h, h, [2, 3, 0, 1]))
                for i in range(2):
                    run = builder.fadd(run, builder.extract_element(t, ir.Constant(i32, i)))
                    builder.store(run, builder.gep(pp, [builder.add(first, ir.Constant(i64, k + i))]))
            return run

        return sig, codegen

    return _prod


_v4d_prod8 = _make_v4d_prod(8)  # 32 lanes: 8 accumulators fit the 16 AVX2 registers
_v4d_prod4 = _make_v4d_prod(4)
_v4d_prod2 = _make_v4d_prod(2)


# ---------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class SparseLayout:
    """Baseline coding of one silo's data (see the module docstring).

    Attributes
    ----------
    base_col : ndarray of shape (Q,), int64
        Profile column ``offsets[q] + b_q`` of each variable's baseline code.
    ecol : ndarray of shape (E,), int64
        Count column of each exception slot: ``offsets[q] + x`` or ``P + q`` (missing).
    evar : ndarray of shape (E,), int64
        Variable of each slot (slots of a variable are consecutive).
    pat_start : ndarray of shape (U + 1,), int64
        Rows of pattern ``u`` are ``row_of[pat_start[u]:pat_start[u + 1]]``.
    row_of : ndarray of shape (n,), int64
    pexc_start : ndarray of shape (U + 1,), int64
        Slots of pattern ``u`` are ``pexc[pexc_start[u]:pexc_start[u + 1]]`` (ascending variable).
    pexc : ndarray, uint32 (unsigned: indexing needs no negative-index wrap-around code)
    n_row_exceptions : int
        Exceptions summed over rows (count updates per sweep).
    """

    base_col: np.ndarray
    ecol: np.ndarray
    evar: np.ndarray
    pat_start: np.ndarray
    row_of: np.ndarray
    pexc_start: np.ndarray
    pexc: np.ndarray
    n_row_exceptions: int

    @property
    def n_patterns(self) -> int:
        return int(self.pat_start.size - 1)

    @property
    def n_slots(self) -> int:
        return int(self.ecol.size)


@njit(cache=True)
def _encode(x, offsets):
    """Baselines, exception slots and per-row exception lists (CSR) with a 64-bit hash of each list."""
    n, n_var = x.shape
    n_col = offsets[n_var]
    freq = np.zeros(n_col + n_var, dtype=np.int64)
    for i in range(n):
        for q in range(n_var):
            v = x[i, q]
            if v < 0:
                freq[n_col + q] += 1
            else:
                freq[offsets[q] + v] += 1
    base_col = np.empty(n_var, dtype=np.int64)
    for q in range(n_var):
        b = offsets[q]
        for j in range(offsets[q] + 1, offsets[q + 1]):
            if freq[j] > freq[b]:  # ties: the smallest code
                b = j
        base_col[q] = b
    slot = np.full(n_col + n_var, -1, dtype=np.int64)
    n_slot = 0
    for q in range(n_var):
        for j in range(offsets[q], offsets[q + 1]):
            if j != base_col[q] and freq[j] > 0:
                slot[j] = n_slot
                n_slot += 1
        if freq[n_col + q] > 0:
            slot[n_col + q] = n_slot
            n_slot += 1
    ecol = np.empty(n_slot, dtype=np.int64)
    evar = np.empty(n_slot, dtype=np.int64)
    for q in range(n_var):
        for j in range(offsets[q], offsets[q + 1]):
            if slot[j] >= 0:
                ecol[slot[j]] = j
                evar[slot[j]] = q
        if slot[n_col + q] >= 0:
            ecol[slot[n_col + q]] = n_col + q
            evar[slot[n_col + q]] = q
    row_start = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        m = 0
        for q in range(n_var):
            v = x[i, q]
            if v < 0 or offsets[q] + v != base_col[q]:
                m += 1
        row_start[i + 1] = row_start[i] + m
    rexc = np.empty(row_start[n], dtype=np.uint32)
    hashes = np.empty(n, dtype=np.uint64)
    mul = np.uint64(0x9E3779B97F4A7C15)
    for i in range(n):
        pos = row_start[i]
        h = np.uint64(row_start[i + 1] - row_start[i])
        for q in range(n_var):
            v = x[i, q]
            j = n_col + q if v < 0 else offsets[q] + v
            if j != base_col[q]:
                s = slot[j]
                rexc[pos] = np.uint32(s)
                pos += 1
                h = (h ^ np.uint64(s + 1)) * mul
                h ^= h >> np.uint64(29)
        hashes[i] = h
    return base_col, ecol, evar, row_start, rexc, hashes


@njit(cache=True)
def _patterns(row_start, rexc, hashes, order):
    """Group rows with identical exception lists along ``order`` (rows sorted by hash, stably), each list
    checked, so exact; pattern ids in order of first appearance, rows in increasing order within a
    pattern."""
    n = hashes.shape[0]
    pid = np.empty(n, dtype=np.int64)
    rep = np.empty(n, dtype=np.int64)  # representative row of each pattern
    n_pat = 0
    a = 0
    while a < n:
        b = a + 1
        while b < n and hashes[order[b]] == hashes[order[a]]:
            b += 1
        first = n_pat
        for t in range(a, b):
            i = order[t]
            li = row_start[i + 1] - row_start[i]
            found = -1
            for u in range(first, n_pat):  # usually one pattern per hash value
                r = rep[u]
                if row_start[r + 1] - row_start[r] != li:
                    continue
                same = True
                for m in range(li):
                    if rexc[row_start[i] + m] != rexc[row_start[r] + m]:
                        same = False
                        break
                if same:
                    found = u
                    break
            if found < 0:
                found = n_pat
                rep[n_pat] = i
                n_pat += 1
            pid[i] = found
        a = b
    pat_start = np.zeros(n_pat + 1, dtype=np.int64)
    for i in range(n):
        pat_start[pid[i] + 1] += 1
    for u in range(n_pat):
        pat_start[u + 1] += pat_start[u]
    fill = pat_start[:-1].copy()
    row_of = np.empty(n, dtype=np.int64)
    for i in range(n):  # increasing i: rows ascending within each pattern
        row_of[fill[pid[i]]] = i
        fill[pid[i]] += 1
    pexc_start = np.zeros(n_pat + 1, dtype=np.int64)
    for u in range(n_pat):
        r = rep[u]
        pexc_start[u + 1] = pexc_start[u] + row_start[r + 1] - row_start[r]
    pexc = np.empty(pexc_start[n_pat], dtype=np.uint32)
    for u in range(n_pat):
        r = rep[u]
        pexc[pexc_start[u]:pexc_start[u + 1]] = rexc[row_start[r]:row_start[r + 1]]
    return pat_start, row_of, pexc_start, pexc


def sparse_layout(x16: np.ndarray, offsets: np.ndarray) -> SparseLayout:
    """Baseline coding of validated int16 codes (n, Q) (``-1`` missing); no Python loop over rows."""
    base_col, ecol, evar, row_start, rexc, hashes = _encode(x16, offsets.astype(np.int64))
    # rows sorted by hash with numpy's stable sort (a radix sort for integer keys), ties in row order
    order = np.argsort(hashes, kind="stable")
    pat_start, row_of, pexc_start, pexc = _patterns(row_start, rexc, hashes, order)
    return SparseLayout(base_col=base_col, ecol=ecol, evar=evar, pat_start=pat_start, row_of=row_of,
                        pexc_start=pexc_start, pexc=pexc, n_row_exceptions=int(row_start[-1]))


# ------------------------------------------------------------------------------------ path choice
def choose_layout(x16: np.ndarray, k: np.ndarray, offsets: np.ndarray, n_comp: int,
                  layout: str = "auto") -> tuple[str, SparseLayout | None, dict]:
    """Pick the dense or the sparse path from the data (deterministic: never from timings).

    ``"auto"`` takes the sparse path when its estimated allocation work per sweep (:func:`work_estimates`)
    is below ``_SPARSE_IF_BELOW`` (one half) of the dense path's: the margin keeps the dense path, whose
    draws earlier versions reproduce, wherever the two are within a factor 2 (the estimates are good to
    about 25%).

    Returns
    -------
    path : {"dense", "sparse"}
    layout : SparseLayout or None
        Built for ``"auto"`` (the estimates need it) and ``"sparse"``.
    estimates : dict
        Both work estimates (ns per sweep) and the data features behind them; empty for ``"dense"``.
    """
    if layout not in ("auto", "dense", "sparse"):
        raise ConfigError(f"The 'layout' argument of run_chain must be 'auto', 'dense' or 'sparse'. Got "
                          f"{layout!r} instead.")
    if layout == "dense":
        return "dense", None, {}
    lay = sparse_layout(x16, offsets)
    est = work_estimates(x16, k, n_comp, lay)
    if layout == "sparse":
        return "sparse", lay, est
    return ("sparse" if est["sparse_ns"] < _SPARSE_IF_BELOW * est["dense_ns"] else "dense"), lay, est


# The sparse path is chosen when its estimated work is below this fraction of the dense path's. At 0.5
# the paper's data (4 binary + 6 ternary variables, C+ = 15) stay on the dense path whatever their number of
# distinct rows: the dense path's per-row work there (three group lookups and counts, ~14 ns) is never
# twice the sparse path's (~9 ns).
_SPARSE_IF_BELOW = 0.5


def work_estimates(x16: np.ndarray, k: np.ndarray, n_comp: int, lay: SparseLayout) -> dict:
    """Estimated allocation-step work of both paths, in ns per sweep on the reference machine (the
    parameter step, common to both, excluded).

    Dense: per row pattern and group, 2.5 ns per 8-lane float32 vector; per row, 7.9 ns (uniform, draw)
    and 2.1 ns per group count; 1.4 ns per joint-table entry, variable of its group and vector (tables and
    count expansion); and 1 ns more per lookup and count for each doubling of the tables and counts beyond
    32 KiB (cache misses). Sparse: per pattern, 12 ns and 2 ns per 4-lane float64 vector (totals, loop);
    0.28 ns per exception and vector (products); 8.75 ns per row (uniform, draw, counts). Constants fitted
    (nonnegative least squares on relative errors) to the allocation step of both paths timed in isolation
    on 22 data sets, from the paper's silos to EHR-like ones: within 25% of 43 of the 44 timings.
    """
    n, n_var = x16.shape
    radix = k + (x16 == -1).any(axis=0)
    bounds = np.asarray(_group_bounds(radix, _group_cap(n)))
    sizes = np.array([int(np.prod(radix[a:b])) for a, b in itertools.pairwise(bounds)])
    n_grp = int(sizes.size)
    lanes = -(-n_comp // _LANES) * _LANES
    v8, v4 = lanes / 8, lanes / _LANES64
    n_pat = lay.n_patterns
    grp_work = float((sizes * np.diff(bounds)).sum())
    spill = max(0.0, math.log2(sizes.sum() * lanes * 12 / _L1_BYTES))  # float32 tables + int64 counts
    dense = (2.5 * n_pat * n_grp * v8 + 7.9 * n + 2.1 * n * n_grp + 1.4 * grp_work * v8
             + 1.0 * (n_pat + n) * n_grp * spill)
    e_pat = int(lay.pexc.size)
    sparse = 12.0 * n_pat + 2.0 * n_pat * v4 + 0.28 * e_pat * v4 + 8.75 * n
    return {"dense_ns": float(dense), "sparse_ns": float(sparse), "groups": n_grp, "patterns": n_pat,
            "exceptions_per_row": lay.n_row_exceptions / n, "exceptions_per_pattern": e_pat / max(n_pat, 1)}


_L1_BYTES = 32 * 1024


# ---------------------------------------------------------------------------------------- kernels
@njit(cache=True)
def _fill_sparse_tables(logpi, prof, base_col, ecol, evar, n_col, beta, rho, lbase, nzero, tmp):
    """Baseline vector and ratio table of one iteration (see the module docstring).

    ``lbase[c]`` receives ``log pi_c + sum_q log p^q_{b_q, c}`` over the non-zero baseline probabilities and
    ``nzero[c]`` the number of zero ones (exact, for the fallback). ``beta`` is ``B / max B`` and row ``e``
    of ``rho`` is ``R_{e, .} / max R_{e, .}``, entries below ``_FLUSH`` set to 0, NaN where the baseline
    probability is below ``_TINY_BASE`` and the numerator positive. Lanes ``>= C+`` are left untouched (0).
    """
    n_comp = prof.shape[0]
    n_var = base_col.shape[0]
    lmx = -np.inf
    for c in range(n_comp):
        lacc = logpi[c]
        acc = 1.0
        nz = 0
        for q in range(n_var):
            p = prof[c, base_col[q]]
            if p >= _DIRECT_MIN:
                acc *= p
                if acc < _RESCALE_BELOW:
                    lacc += math.log(acc)
                    acc = 1.0
            elif p > 0.0:
                lacc += math.log(p)
            else:
                nz += 1
        lb = lacc + math.log(acc)
        lbase[c] = lb
        nzero[c] = nz
        if nz == 0 and lb > lmx:
            lmx = lb
    for c in range(n_comp):
        v = math.exp(lbase[c] - lmx) if nzero[c] == 0 else 0.0
        beta[c] = v if v >= _FLUSH else 0.0
    for e in range(ecol.shape[0]):
        j = ecol[e]
        b = base_col[evar[e]]
        mx = 0.0
        for c in range(n_comp):
            px = prof[c, j] if j < n_col else 1.0
            pb = prof[c, b]
            if px == 0.0:
                r = 0.0
            elif pb < _TINY_BASE:
                r = np.nan
            else:
                r = px / pb
                if r > mx:
                    mx = r
            tmp[c] = r
        inv = 1.0 / mx if mx > 0.0 else 0.0
        for c in range(n_comp):
            v = tmp[c] * inv  # NaN stays NaN
            rho[e, c] = 0.0 if v < _FLUSH else v


@njit(cache=True)
def _sparse_logweights(lbase, nzero, prof, base_col, ecol, evar, n_col, pexc, e0, e1, lrat, zhit, stamp,
                       sweep, lw):
    """Exact float64 weights (max 1) of one pattern via log-sum-exp.

    ``log w_c = lbase_c + sum_e (log p_{x_e, c} - log p_{b, c})``; a zero baseline probability is not in
    ``lbase`` but counted in ``nzero`` and must be covered by an exception of its variable, else
    ``w_c = 0``. Per-slot logs are computed once per sweep (``stamp``) in ``lrat``/``zhit``.
    """
    n_comp = lw.shape[0]
    for e in range(e0, e1):
        s = pexc[e]
        if stamp[s] != sweep:
            stamp[s] = sweep
            j = ecol[s]
            b = base_col[evar[s]]
            for c in range(n_comp):
                px = prof[c, j] if j < n_col else 1.0
                pb = prof[c, b]
                lx = math.log(px) if px > 0.0 else -np.inf
                if pb > 0.0:
                    lrat[s, c] = lx - math.log(pb)
                    zhit[s, c] = 0
                else:
                    lrat[s, c] = lx
                    zhit[s, c] = 1
    lmx = -np.inf
    for c in range(n_comp):
        v = lbase[c]
        z = nzero[c]
        for e in range(e0, e1):
            s = pexc[e]
            v += lrat[s, c]
            z -= zhit[s, c]
        if z > 0:
            v = -np.inf
        lw[c] = v
        lmx = max(lmx, v)
    for c in range(n_comp):
        lw[c] = math.exp(lw[c] - lmx)


@njit(cache=True)
def _count_sparse(z, pat_start, row_of, pexc_start, pexc, n_lane, nc, cnt):
    """Component sizes and exception counts ``cnt[s * n_lane + c]`` of an allocation."""
    nc[:] = 0
    cnt[:] = 0
    for u in range(pat_start.shape[0] - 1):
        for r in range(pat_start[u], pat_start[u + 1]):
            k = z[row_of[r]]
            nc[k] += 1
            for e in range(pexc_start[u], pexc_start[u + 1]):
                cnt[np.intp(pexc[e]) * n_lane + k] += 1


@njit(cache=True)
def _expand_sparse(nc, cnt, ecol, evar, base_col, ct):
    """Per-(column, component) counts: exception slots copied, each baseline code's count derived as
    ``n_c`` minus the exception (and missing) counts of its variable. Rows ``P + q`` hold missing counts."""
    n_comp = nc.shape[0]
    n_lane = ct.shape[1]
    ct[:, :] = 0
    for q in range(base_col.shape[0]):
        b = base_col[q]
        for c in range(n_comp):
            ct[b, c] = nc[c]
    for e in range(ecol.shape[0]):
        j = ecol[e]
        b = base_col[evar[e]]
        for c in range(n_comp):
            v = cnt[e * n_lane + c]
            ct[j, c] = v
            ct[b, c] -= v


@njit(cache=True)
def _pre_size(n_blk):
    """Entries of the block prefix sums: pre[0..n_blk], then +inf up to whole 4-lane compares (two at least,
    made without a loop by the draw)."""
    return 1 + _LANES64 * max(2, (n_blk + _LANES64 - 1) // _LANES64)


@njit(cache=True)
def _sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar, n_col,
                 sweep, ubuf, draw, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, probs):
    """Step 1 of a sweep on the sparse path: every row's component into ``zp``, ``nc`` (sizes) and ``cnt``
    (flat, ``cnt[s * L + c]`` per slot and component lane), one likelihood computation per pattern; ``poff``
    is ``pexc * L``, the offset of each slot's row in ``rho`` and ``cnt``. Rows are in pattern order: ``zp[r]``
    and the uniform ``ubuf[r]`` belong to row ``row_of[r]`` (sequential stores; the caller scatters ``zp``
    when it needs the allocations). With ``draw`` False it draws nothing and writes each pattern's normalised
    probabilities to ``probs[u]`` instead (the tests' view of this very code). Returns how many patterns
    took the exact log-space fallback.

    Software-pipelined: the weights of pattern ``u + 1`` are computed (into the other half of the
    double-length ``w`` and ``pre``) before the rows of pattern ``u`` are drawn, so that the two long
    dependency chains (products then running totals; draw then counts) overlap instead of running one after
    the other. One function for the whole pass, the pieces being intrinsics: numba inlines a helper taking
    arrays with reference-count updates at every call.
    """
    n_lane = bvec.shape[0]
    n_comp = nc.shape[0]
    n_blk = n_lane // _LANES64
    n_cmp = (n_blk + _LANES64 - 1) // _LANES64
    n_pre = _pre_size(n_blk)
    if pre.shape[0] != 2 * n_pre or w.shape[0] != 2 * n_lane:
        raise ValueError("w and pre must hold two buffers of L and _pre_size(L / 4) entries")
    for h in range(2):
        pre[h * n_pre + n_blk + 1:(h + 1) * n_pre] = np.inf  # never counted by the draw's block search
    if draw:
        nc[:] = 0
        cnt[:] = 0
    n_fallback = 0
    n_pat = pat_start.shape[0] - 1
    tot_c = 0.0
    e0_c = 0
    e1_c = 0
    for step in range(n_pat + 1):
        # ---- the pattern drawn at this step is the one whose weights the previous step computed
        u = step - 1
        tot, e0, e1 = tot_c, e0_c, e1_c
        if step < n_pat:
            e0_c = pexc_start[step]
            e1_c = pexc_start[step + 1]
            woff = (step & 1) * n_lane
            qoff = (step & 1) * n_pre
            # products, block totals (s0 + s1) + (s2 + s3) and their running sums pre[b] (blocks of 4 lanes)
            tot_c = 0.0
            pre[qoff] = tot_c
            b = 0
            while b + 32 <= n_lane:
                tot_c = _v4d_prod8(w, woff, b, bvec, rho, poff, e0_c, e1_c, pre, qoff, tot_c)
                b += 32
            if b + 16 <= n_lane:
                tot_c = _v4d_prod4(w, woff, b, bvec, rho, poff, e0_c, e1_c, pre, qoff, tot_c)
                b += 16
            if b + 8 <= n_lane:  # n_lane is a multiple of 8
                tot_c = _v4d_prod2(w, woff, b, bvec, rho, poff, e0_c, e1_c, pre, qoff, tot_c)
        if u < 0:
            continue
        woff = (u & 1) * n_lane
        qoff = (u & 1) * n_pre
        if tot >= _FALLBACK_BELOW:  # False for NaN
            if not draw:
                for c in range(n_comp):
                    probs[u, c] = w[woff + c] / tot
                continue
            for r in range(pat_start[u], pat_start[u + 1]):
                # Categorical draw. Lane i of block b ends at pre[b] + (w0 + ... + wi) summed left to right,
                # the block at pre[b + 1] = pre[b] + ((w0 + w1) + (w2 + w3)) >= pre[b] + ((w0 + w1) + w2): the
                # breakpoints never decrease (rounding is monotone and fadd commutative), so counting those
                # <= t gives the interval, and a lane of weight 0 has an empty one.
                k = _v4d_pick(w, woff, pre, qoff, n_cmp, ubuf[r] * tot)
                zp[r] = k
                nc[k] += 1
                _count_row(cnt, poff, e0, e1, k)
            continue
        # exact float64 log space: a NaN ratio (tiny baseline probability) or a total below range
        n_fallback += 1
        _sparse_logweights(lbase, nzero, prof, base_col, ecol, evar, n_col, pexc, e0, e1, lrat, zhit, stamp,
                           sweep, lw)
        tot64 = 0.0
        for c in range(n_comp):
            tot64 += lw[c]
        if not draw:
            for c in range(n_comp):
                probs[u, c] = lw[c] / tot64
            continue
        for r in range(pat_start[u], pat_start[u + 1]):
            t = ubuf[r] * tot64
            acc64 = 0.0
            k = n_comp - 1
            for c in range(n_comp):
                acc64 += lw[c]
                if acc64 > t:
                    k = c
                    break
            while lw[k] == 0.0:
                k -= 1
            zp[r] = k
            nc[k] += 1
            _count_row(cnt, poff, e0, e1, np.uintp(k))
    return n_fallback


@njit(cache=True)
def _allocation_probabilities_sparse(base_col, ecol, evar, pat_start, pexc_start, pexc, n_col, logpi, prof,
                                     out):
    """Normalised allocation probabilities of every pattern through the sparse code path (tests); returns
    how many patterns took the exact log-space fallback."""
    n_comp = prof.shape[0]
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_slot = ecol.shape[0]
    bvec = np.zeros(n_lane)
    rho = np.zeros((n_slot, n_lane))
    lbase = np.empty(n_comp)
    nzero = np.empty(n_comp, dtype=np.int64)
    _fill_sparse_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, np.empty(n_comp))
    poff = pexc * np.uint32(n_lane)
    return _sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar,
                        n_col, 0, np.empty(0), False, np.empty(0, dtype=np.int16),
                        np.zeros(n_comp, dtype=np.int64), np.zeros(n_slot * n_lane, dtype=np.int32),
                        np.empty(2 * n_lane), np.empty(2 * _pre_size(n_lane // _LANES64)), np.empty(n_comp),
                        np.empty((n_slot, n_comp)), np.zeros((n_slot, n_comp), dtype=np.int64),
                        np.full(n_slot, -1, dtype=np.int64), out)


@njit(cache=True)
def _gibbs_block_sparse(base_col, ecol, evar, pat_start, row_of, pexc_start, pexc, z, pi, logpi, prof,
                        logprof, alpha, beta, offsets, const, n_iter, first_iter, burn_in, thin, keep_z, keep_pi,
                        keep_prof, keep_nocc, keep_lp, keep_at, rng):
    """Sparse-path twin of :func:`vcmc.silo.sampler._gibbs_block` (same arguments after the layout)."""
    n_var = offsets.shape[0] - 1
    n_comp = pi.shape[0]
    n_col = offsets[n_var]
    n_lane = ((n_comp + _LANES - 1) // _LANES) * _LANES
    n_slot = ecol.shape[0]
    bvec = np.zeros(n_lane)  # padding lanes stay 0: never drawn
    rho = np.zeros((n_slot, n_lane))
    lbase = np.empty(n_comp)
    nzero = np.empty(n_comp, dtype=np.int64)
    tmp = np.empty(n_comp)
    w = np.empty(2 * n_lane)  # two buffers: see _sparse_pass
    pre = np.empty(2 * _pre_size(n_lane // _LANES64))
    lw = np.empty(n_comp)
    lrat = np.empty((n_slot, n_comp))
    zhit = np.zeros((n_slot, n_comp), dtype=np.int64)
    stamp = np.full(n_slot, -1, dtype=np.int64)
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(n_slot * n_lane, dtype=np.int32)  # int32: with rho, within the L1 cache
    poff = pexc * np.uint32(n_lane)
    ct = np.zeros((n_col + n_var, n_lane), dtype=np.int64)
    shp = np.empty(max(n_comp, n_col))
    ubuf = np.empty(row_of.shape[0])
    zp = np.empty(row_of.shape[0], dtype=z.dtype)  # allocations in pattern order
    for r in range(row_of.shape[0]):
        zp[r] = z[row_of[r]]
    no_probs = np.empty((0, n_comp))
    bg = rng.bit_generator
    n_kept = 0
    for it in range(first_iter, first_iter + n_iter):
        _fill_sparse_tables(logpi, prof, base_col, ecol, evar, n_col, bvec, rho, lbase, nzero, tmp)
        # ---- 1. allocations (the uniforms first, in a tight loop: a bit-generator call inside the row loop
        # costs twice as much, every live register being spilled around it)
        for r in range(ubuf.shape[0]):
            ubuf[r] = _unit(bg)
        _sparse_pass(bvec, rho, pexc_start, pexc, poff, pat_start, lbase, nzero, prof, base_col, ecol, evar, n_col,
                     it, ubuf, True, zp, nc, cnt, w, pre, lw, lrat, zhit, stamp, no_probs)
        _expand_sparse(nc, cnt, ecol, evar, base_col, ct)
        # ---- 2-3. weights and profiles given the allocations (variates straight from the bit generator)
        keep = it >= burn_in and (it - burn_in) % thin == thin - 1
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, keep, bg)
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
            for r in range(row_of.shape[0]):
                keep_z[n_kept, row_of[r]] = zp[r]
            n_kept += 1
    for r in range(row_of.shape[0]):
        z[row_of[r]] = zp[r]
    return n_kept


def initial_counts(lay: SparseLayout, z: np.ndarray, n_comp: int, n_rows_ct: int) -> tuple[np.ndarray, np.ndarray]:
    """``(nc, ct)`` of an allocation as :func:`vcmc.silo.sampler._count` gives them, from the layout."""
    nc = np.zeros(n_comp, dtype=np.int64)
    cnt = np.zeros(lay.n_slots * n_comp, dtype=np.int32)
    _count_sparse(z.astype(np.int64), lay.pat_start, lay.row_of, lay.pexc_start, lay.pexc, n_comp, nc, cnt)
    ct = np.zeros((n_rows_ct, n_comp), dtype=np.int64)
    _expand_sparse(nc, cnt, lay.ecol, lay.evar, lay.base_col, ct)
    return nc, ct
