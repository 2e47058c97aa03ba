"""Explicit vector operations of the allocation kernels, emitted through llvmlite (numba's own backend).

``_v8_*``: 8 float32 lanes (an AVX2 register), used by the dense path on tables whose component axis is
padded to a multiple of ``_LANES``; hand-written because numba's loop vectoriser leaves 16-lane loops scalar.
``_v4d_*``: 4 float64 lanes for the sparse path's running products (their range needs float64), the product
of a row's exceptions, the categorical draw and the per-row count update, each kept in registers.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

_LANES = 8  # float32 lanes of an AVX2 register: pad the component axis to a multiple of this


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


_LANES64 = 4  # float64 lanes of an AVX2 register


# ------------------------------------------------------------------------ 4-lane float64 vector ops
# LLVM IR intrinsics, as the float32 ops of vcmc.mcmc.sampler: numba's loop vectoriser leaves these short
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
    from them, not reloaded. Exceptions are taken two at a time, ``acc * (r1 * r2)``: the chain through
    each accumulator is one multiplication per two exceptions (the loop is latency-bound: a pattern has ~6
    exceptions); the rounding differs from one factor at a time by a few ulps."""

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
            one = ir.Constant(i64, 1)

            def row(e):  # the table row of exception e, from lane off
                return builder.add(builder.zext(builder.load(builder.gep(ip, [e])), i64), off_v)

            # exceptions two at a time, acc * (r1 * r2): the pair's product does not wait for acc, so the
            # dependency chain through each accumulator is one multiplication per two exceptions
            pre_bb = builder.basic_block
            loop_bb = builder.append_basic_block("prod.loop")
            mid_bb = builder.append_basic_block("prod.mid")
            tail_bb = builder.append_basic_block("prod.tail")
            exit_bb = builder.append_basic_block("prod.exit")
            builder.cbranch(builder.icmp_signed("<", builder.add(e0_v, one), e1_v), loop_bb, mid_bb)
            builder.position_at_end(loop_bb)
            e_phi = builder.phi(i64)
            e_phi.add_incoming(e0_v, pre_bb)
            acc = []
            for k in range(n_chunks):
                ph = builder.phi(_V4D)
                ph.add_incoming(start[k], pre_bb)
                acc.append(ph)
            b1 = row(e_phi)
            b2 = row(builder.add(e_phi, one))
            new = [builder.fmul(acc[k], builder.fmul(builder.load(vptr(tp, b1, k), align=8),
                                                     builder.load(vptr(tp, b2, k), align=8)))
                   for k in range(n_chunks)]
            e_next = builder.add(e_phi, ir.Constant(i64, 2))
            e_phi.add_incoming(e_next, loop_bb)
            for k in range(n_chunks):
                acc[k].add_incoming(new[k], loop_bb)
            builder.cbranch(builder.icmp_signed("<", builder.add(e_next, one), e1_v), loop_bb, mid_bb)
            builder.position_at_end(mid_bb)  # at most one exception left
            e_mid = builder.phi(i64)
            e_mid.add_incoming(e0_v, pre_bb)
            e_mid.add_incoming(e_next, loop_bb)
            mid = []
            for k in range(n_chunks):
                ph = builder.phi(_V4D)
                ph.add_incoming(start[k], pre_bb)
                ph.add_incoming(new[k], loop_bb)
                mid.append(ph)
            builder.cbranch(builder.icmp_signed("<", e_mid, e1_v), tail_bb, exit_bb)
            builder.position_at_end(tail_bb)
            bt = row(e_mid)
            last = [builder.fmul(mid[k], builder.load(vptr(tp, bt, k), align=8)) for k in range(n_chunks)]
            builder.branch(exit_bb)
            builder.position_at_end(exit_bb)
            fin = []
            for k in range(n_chunks):  # all phis first (LLVM groups them at the top of the block)
                f = builder.phi(_V4D)
                f.add_incoming(mid[k], mid_bb)
                f.add_incoming(last[k], tail_bb)
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


# ----------------------------------------------------------------- Gaussian items (the mixed kernel)
# The Gaussian part of a row's log weights is a quadratic in its values with per-component coefficients, so a
# row costs two fused multiply-adds per (item, lane) and one exponential per lane. Both are emitted as 4-lane
# vectors: numba calls libm's scalar exp once per lane, which cost more than the whole categorical product.

# exp(r) on |r| <= log(2) / 2 (slightly widened): degree-10 interpolation at the Chebyshev nodes, relative error
# below 5e-16 over the interval in float64 Horner evaluation (checked against long double exp).
_EXP_COEFS = (1.0, 1.0000000000000069, 0.5000000000000006, 0.16666666666553523, 0.04166666666657328,
              0.008333333385977233, 0.001388888893255523, 0.00019841169876987102, 2.480150419341122e-05,
              2.7640344776993707e-06, 2.7626437131258733e-07)
_LOG2E = 1.4426950408889634
# log(2) split so that k * _LN2_HI is exact for |k| < 2^11 (Cody and Waite)
_LN2_HI = 0.693145751953125
_LN2_LO = 1.42860682030941723212e-06
# x + 1.5 * 2^52 rounds x to an integer held in the low mantissa bits (|x| < 2^51)
_ROUND_MAGIC = 6755399441055744.0
# below this a weight relative to the row's best is stored as 0 (e^-700 ~ 1e-304, the sparse path's flush)
_EXP_FLOOR = -700.0


def _bcast(builder, x):
    i32 = ir.IntType(32)
    v = builder.insert_element(ir.Constant(_V4D, ir.Undefined), x, ir.Constant(i32, 0))
    return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, 4), [0] * 4))


def _vfma(builder):
    """``llvm.fma.v4f64`` declared in the builder's module (llvmlite names scalar intrinsics only)."""
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V4D, [_V4D] * 3), "llvm.fma.v4f64")


def _vconst(x):
    return ir.Constant(_V4D, [float(x)] * 4)


def _make_v4d_quad(n_chunks: int):
    """Intrinsic ``m = quad(dst, off, kvec, coef, xv, xoff, n_items)``: for the ``4 m`` lanes from ``off``,
    ``dst[l] = kvec[l] + sum_g x_g (coef[g, l] x_g + coef[g, L + l])`` over ``x_g = xv[xoff + g]``,
    ``g < n_items`` (``coef`` is (G, 2L): the quadratic, then the linear coefficients); returns the largest of
    those lanes. Accumulators stay in registers across the items."""

    @intrinsic
    def _quad(typingctx, dst, off, kvec, coef, xv, xoff, n_items):
        _check_f64(dst, kvec, xv)
        if not (isinstance(coef, types.Array) and coef.dtype == types.float64 and coef.layout == "C"
                and coef.ndim == 2):
            raise TypingError("coef must be a C-contiguous 2-d float64 array")
        sig = types.float64(dst, types.intp, kvec, coef, xv, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            dst_v, off_v, kvec_v, coef_v, xv_v, xoff_v, n_v = args
            dst_t, _, kvec_t, coef_t, xv_t = signature.args[:5]
            dp = context.make_array(dst_t)(context, builder, dst_v).data
            kp = context.make_array(kvec_t)(context, builder, kvec_v).data
            carr = context.make_array(coef_t)(context, builder, coef_v)
            cp = carr.data
            xp = context.make_array(xv_t)(context, builder, xv_v).data
            i64 = off_v.type
            width = builder.extract_value(carr.shape, 1)      # 2L
            half = builder.sdiv(width, ir.Constant(i64, 2))
            fma = _vfma(builder)

            def vptr(p, o, k):
                o = builder.add(o, ir.Constant(i64, 4 * k))
                return builder.bitcast(builder.gep(p, [o]), _V4D.as_pointer())

            start = [builder.load(vptr(kp, off_v, k), align=8) for k in range(n_chunks)]
            pre_bb = builder.basic_block
            loop_bb = builder.append_basic_block("quad.loop")
            exit_bb = builder.append_basic_block("quad.exit")
            builder.cbranch(builder.icmp_signed("<", ir.Constant(i64, 0), n_v), loop_bb, exit_bb)
            builder.position_at_end(loop_bb)
            g_phi = builder.phi(i64)
            g_phi.add_incoming(ir.Constant(i64, 0), pre_bb)
            acc = []
            for k in range(n_chunks):
                ph = builder.phi(_V4D)
                ph.add_incoming(start[k], pre_bb)
                acc.append(ph)
            xg = _bcast(builder, builder.load(builder.gep(xp, [builder.add(xoff_v, g_phi)])))
            qrow = builder.add(builder.mul(g_phi, width), off_v)
            lrow = builder.add(qrow, half)
            new = []
            for k in range(n_chunks):
                t = builder.call(fma, [builder.load(vptr(cp, qrow, k), align=8), xg,
                                       builder.load(vptr(cp, lrow, k), align=8)])
                new.append(builder.call(fma, [t, xg, acc[k]]))
            g_next = builder.add(g_phi, ir.Constant(i64, 1))
            g_phi.add_incoming(g_next, loop_bb)
            for k in range(n_chunks):
                acc[k].add_incoming(new[k], loop_bb)
            builder.cbranch(builder.icmp_signed("<", g_next, n_v), loop_bb, exit_bb)
            builder.position_at_end(exit_bb)
            fin = []
            for k in range(n_chunks):
                f = builder.phi(_V4D)
                f.add_incoming(start[k], pre_bb)
                f.add_incoming(new[k], loop_bb)
                fin.append(f)
            for k in range(n_chunks):
                builder.store(fin[k], vptr(dp, off_v, k), align=8)

            def vmax(a, b):
                return builder.select(builder.fcmp_ordered(">", a, b), a, b)

            while len(fin) > 1:
                fin = [vmax(fin[i], fin[i + 1]) for i in range(0, len(fin), 2)]
            i32 = ir.IntType(32)
            v = fin[0]
            h = vmax(v, builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, 4), [2, 3, 0, 1])))
            e0 = builder.extract_element(h, ir.Constant(i32, 0))
            e1 = builder.extract_element(h, ir.Constant(i32, 1))
            return builder.select(builder.fcmp_ordered(">", e0, e1), e0, e1)

        return sig, codegen

    return _quad


_v4d_quad8 = _make_v4d_quad(8)


_v4d_quad4 = _make_v4d_quad(4)


_v4d_quad2 = _make_v4d_quad(2)


@intrinsic
def _v4d_expmul(typingctx, dst, bvec, n_lane, m):
    """``dst[l] = bvec[l] * exp(dst[l] - m)`` for ``l < n_lane`` (a multiple of 4), 0 where ``dst[l] - m`` is
    below ``_EXP_FLOOR`` (``-inf`` included); ``dst[l] <= m`` is assumed. The exponential is ``2^k exp(r)``,
    ``k`` the nearest integer to ``y / log 2`` and ``exp(r)`` the polynomial ``_EXP_COEFS``: within 3 ulps of
    the correctly rounded value."""
    _check_f64(dst, bvec)
    sig = types.void(dst, bvec, types.intp, types.float64)

    def codegen(context, builder, signature, args):
        dst_v, bvec_v, n_v, m_v = args
        dp = context.make_array(signature.args[0])(context, builder, dst_v).data
        bp = context.make_array(signature.args[1])(context, builder, bvec_v).data
        i64 = n_v.type
        vi64 = ir.VectorType(ir.IntType(64), 4)
        fma = _vfma(builder)
        mv = _bcast(builder, m_v)
        pre_bb = builder.basic_block
        loop_bb = builder.append_basic_block("exp.loop")
        exit_bb = builder.append_basic_block("exp.exit")
        builder.cbranch(builder.icmp_signed("<", ir.Constant(i64, 0), n_v), loop_bb, exit_bb)
        builder.position_at_end(loop_bb)
        l_phi = builder.phi(i64)
        l_phi.add_incoming(ir.Constant(i64, 0), pre_bb)
        ptr = builder.bitcast(builder.gep(dp, [l_phi]), _V4D.as_pointer())
        y = builder.fsub(builder.load(ptr, align=8), mv)
        low = builder.fcmp_unordered("<", y, _vconst(_EXP_FLOOR))  # -inf and NaN too: weight 0
        yc = builder.select(low, _vconst(_EXP_FLOOR), y)
        kk = builder.fadd(builder.fmul(yc, _vconst(_LOG2E)), _vconst(_ROUND_MAGIC))
        k = builder.fsub(kk, _vconst(_ROUND_MAGIC))
        r = builder.call(fma, [k, _vconst(-_LN2_HI), yc])
        r = builder.call(fma, [k, _vconst(-_LN2_LO), r])
        p = _vconst(_EXP_COEFS[-1])
        for c in reversed(_EXP_COEFS[:-1]):
            p = builder.call(fma, [p, r, _vconst(c)])
        bits = builder.shl(builder.add(builder.bitcast(kk, vi64), ir.Constant(vi64, [1023] * 4)),
                           ir.Constant(vi64, [52] * 4))
        e = builder.fmul(p, builder.bitcast(bits, _V4D))
        e = builder.select(low, _vconst(0.0), e)
        b = builder.load(builder.bitcast(builder.gep(bp, [l_phi]), _V4D.as_pointer()), align=8)
        builder.store(builder.fmul(e, b), ptr, align=8)
        l_next = builder.add(l_phi, ir.Constant(i64, 4))
        l_phi.add_incoming(l_next, loop_bb)
        builder.cbranch(builder.icmp_signed("<", l_next, n_v), loop_bb, exit_bb)
        builder.position_at_end(exit_bb)
        return context.get_dummy_value()

    return sig, codegen
