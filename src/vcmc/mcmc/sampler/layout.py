"""How a silo's rows are laid out for the sampler, and which allocation path runs.

Dense layout (``_layout``): consecutive variables grouped into joint tables (one lookup per group instead
of one per variable), identical rows sharing one likelihood computation. Sparse layout (``sparse_layout``):
per variable a baseline code (the silo's most frequent one), every other cell an exception, rows with
identical exception lists grouped. ``choose_layout`` takes the sparse path when its estimated work per sweep
is below half the dense path's (a cost model fitted on measured timings, ``benchmarks/sampler.py
--layout-model``); the choice depends on the data only, never on timing, so a seed gives the same draws.
``_check_codes`` is the codes check of the sampler's entry points.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from vcmc.data.codes import check_codes, check_modalities
from vcmc.exceptions import ConfigError
from vcmc.mcmc.sampler.intrinsics import _LANES, _LANES64
from vcmc.model import MISSING

# Largest joint table of a group of variables (rows of L float32 lanes; 256 x 32 lanes = 32 KiB).
_MAX_GROUP_TABLE = 256


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


def row_layout(x16: np.ndarray, offsets: np.ndarray) -> SparseLayout:
    """The baseline coding of ``sparse_layout`` with one pattern per row, in order of their number of exceptions
    (the mixed kernel: a row's Gaussian values make it unique, so grouping identical categorical parts saves
    nothing there)."""
    base_col, ecol, evar, row_start, rexc, _ = _encode(x16, offsets.astype(np.int64))
    n = x16.shape[0]
    lay = SparseLayout(base_col=base_col, ecol=ecol, evar=evar, pat_start=np.arange(n + 1, dtype=np.int64),
                       row_of=np.arange(n, dtype=np.int64), pexc_start=row_start, pexc=rexc,
                       n_row_exceptions=int(row_start[-1]))
    return by_exception_count(lay)


def by_exception_count(lay: SparseLayout) -> SparseLayout:
    """The same layout with its patterns ordered by their number of exceptions (stably), for the sampler.

    The sparse allocation step loops over a pattern's exceptions; in the layout's order (first appearance)
    the trip count changes from one pattern to the next, so the loop's exit is hard to predict; in this
    order consecutive patterns have the same count (measured: benchmarks/sampler.py --against). The order
    of the patterns is immaterial to the draws' law (each row's allocation is drawn from its own uniform);
    it changes which uniform a row gets."""
    n_exc = np.diff(lay.pexc_start)
    perm = np.argsort(n_exc, kind="stable")
    sizes = np.diff(lay.pat_start)[perm]
    pat_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    row_of = lay.row_of[_ranges(lay.pat_start[:-1][perm], sizes)]
    pexc_start = np.concatenate([[0], np.cumsum(n_exc[perm])]).astype(np.int64)
    pexc = lay.pexc[_ranges(lay.pexc_start[:-1][perm], n_exc[perm])]
    return SparseLayout(base_col=lay.base_col, ecol=lay.ecol, evar=lay.evar, pat_start=pat_start,
                        row_of=row_of.astype(np.int64), pexc_start=pexc_start, pexc=pexc.astype(np.uint32),
                        n_row_exceptions=lay.n_row_exceptions)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + m) for s, m in zip(starts, lengths)])`` without a Python loop."""
    total = int(lengths.sum())
    lengths = lengths.astype(np.int64)
    first = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64) - first, lengths) + np.arange(total, dtype=np.int64)


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


def _check_modalities(n_modalities) -> np.ndarray:
    return check_modalities(n_modalities)


def _check_codes(codes, k: np.ndarray) -> np.ndarray:
    """The codes as the sampler's int16 layout needs them (``vcmc.data.codes.check_codes``)."""
    return check_codes(codes, k, dtype=np.int16)


# Renormalise the running float32 product every this many variables (a product of 10 column-max-scaled
# probabilities of the best component stays far above the float32 range limit of 1e-38).
_VARS_PER_BLOCK = 10
