"""Compiled loops of the relaxed ELBO in the pair layout (see ``elbo.Objective``).

Written with numba because the numpy forms of these sums build (R, M, N, P) temporaries: tens of MB per
call at 30 silos x 80 binary variables, whose allocation and first touch (page faults) cost more than the
arithmetic. Each loop adds in the same order as the numpy expression it replaces (pairs in silo order,
tuples in order), so the results are the same numbers; the innermost loops run over contiguous columns.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def aggregate_pairs(wcol, x, seg_start, seg_end, out):  # pragma: no cover - compiled
    """``out[r, m, c, j] = sum_{k in cluster c} wcol[r, k, j] x[m, k, j]`` (pairs of c are contiguous)."""
    n_r = wcol.shape[0]
    n_m = x.shape[0]
    n_c = seg_start.size
    n_p = x.shape[2]
    for r in range(n_r):
        for m in range(n_m):
            for c in range(n_c):
                k0 = seg_start[c]
                for j in range(n_p):
                    out[r, m, c, j] = wcol[r, k0, j] * x[m, k0, j]
                for k in range(k0 + 1, seg_end[c]):
                    for j in range(n_p):
                        out[r, m, c, j] += wcol[r, k, j] * x[m, k, j]


@njit(cache=True)
def pair_sums(g, x, pair_cluster, out):  # pragma: no cover - compiled
    """``out[r, k, j] = sum_m g[r, m, c_k, j] x[m, k, j]`` (``out`` starts at 0)."""
    n_r = g.shape[0]
    n_m, n_k, n_p = x.shape
    for r in range(n_r):
        for m in range(n_m):
            for k in range(n_k):
                c = pair_cluster[k]
                for j in range(n_p):
                    out[r, k, j] += g[r, m, c, j] * x[m, k, j]


@njit(cache=True)
def gram_rows(x, sb, clusters, seg_start, cols, out):  # pragma: no cover - compiled
    """Rows of the curvature's Gram matrices: ``out[r, g, v, a, m K + i] = x[m, k, j] sb[r, m, c, j]``.

    For cluster ``c = clusters[g]``, its a-th pair ``k = seg_start[c] + a`` and column ``j = cols[v, i]``
    (variable v of the modality group, modality i): ``out @ out^T`` is then the block's Gram matrix.
    """
    n_r, n_g, n_v, n_a, _ = out.shape
    n_m = x.shape[0]
    kk = cols.shape[1]
    for r in range(n_r):
        for g in range(n_g):
            c = clusters[g]
            for v in range(n_v):
                for a in range(n_a):
                    k = seg_start[c] + a
                    for m in range(n_m):
                        for i in range(kk):
                            j = cols[v, i]
                            out[r, g, v, a, m * kk + i] = x[m, k, j] * sb[r, m, c, j]


# reassociation lets LLVM vectorise the dot products (the order of a sum of 100 terms changes, as it does
# between BLAS implementations); no other fast-math assumption is made
@njit(cache=True, fastmath={"reassoc", "contract"})
def gram_sym(rows, out):  # pragma: no cover - compiled
    """``out[..., a, b] = rows[..., a, :] . rows[..., b, :]`` for stacked (R, G, V, n, L) rows.

    Replaces a stacked matmul of thousands of tiny matrices (one BLAS call each) and uses the symmetry.
    """
    n_r, n_g, n_v, n_a, n_l = rows.shape
    for r in range(n_r):
        for g in range(n_g):
            for v in range(n_v):
                for a in range(n_a):
                    for b in range(a, n_a):
                        acc = 0.0
                        for t in range(n_l):
                            acc += rows[r, g, v, a, t] * rows[r, g, v, b, t]
                        out[r, g, v, a, b] = acc
                        out[r, g, v, b, a] = acc


@njit(cache=True)
def gather_pairs(src, rows, local, dest, out):  # pragma: no cover - compiled
    """``out[m, dest[i], :] = src[rows[m], local[i], :]``: one silo's draws into the pair layout."""
    n_p = src.shape[2]
    for m in range(rows.size):
        t = rows[m]
        for i in range(local.size):
            l = local[i]
            k = dest[i]
            for j in range(n_p):
                out[m, k, j] = src[t, l, j]



@njit(cache=True)
def push_pairs(src, rows, local, clusters, wcol, out):  # pragma: no cover - compiled
    """``out[t, clusters[i], :] += wcol[i, :] * src[rows[t], local[i], :]``: one silo's push-forward term."""
    n_p = src.shape[2]
    for t in range(rows.size):
        r = rows[t]
        for i in range(local.size):
            l = local[i]
            c = clusters[i]
            for j in range(n_p):
                out[t, c, j] += wcol[i, j] * src[r, l, j]
