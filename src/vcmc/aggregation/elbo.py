"""Relaxed ELBO of the aggregation family, its gradient and a curvature estimate (docs/design.md §6.3-6.5).

``L(omega) = E[g(F_omega(theta^1..theta^S))] + H(omega)`` where the expectation is a sample average over
draw tuples (one draw per silo; the silos' chains are independent, so any pairing is valid), ``H`` is the
per-block relaxed entropy ``sum_b (d_b / |S_b|) sum_{s in S_b} log omega^s_b`` (section 6.3) and g is

* (a) ``"complete"``: ``sum_c A_c log pihat_c + sum_{c,j} B_{c,j} log phat_{c,j}`` with fixed tables
  ``A = N + alpha - 1``, ``B = N^q + beta - 1`` from the matched contingency counts (server side) or from
  silo-side hard counts summed over silos;
* (b) ``"observed"``: ``sum_s l_s(thetahat) + log prior(thetahat)``, with the silos' log-likelihoods and
  E-step soft counts obtained through ``counts_fn`` (one round trip per call).

One formula gives both gradients (section 6.5): with per-draw tables ``A^(m)`` (soft counts plus prior
for (b)), ``dL/domega^s_0 = mean_m sum_c A_c pi^s_c / pihat_c + d_0 / (S omega^s_0)`` and likewise for the
profile blocks (summed over the block's columns). Everything is vectorised over R sets of weights
(multi-start), M tuples, clusters and columns; the only Python loop is over silos when draws are gathered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vcmc._rng import as_generator
from vcmc.aggregation._kernels import (
    aggregate_pairs,
    gather_pairs,
    gram_rows,
    gram_sym,
    pair_sums,
)
from vcmc.aggregation.weights import AggregationWeights, BlockLayout
from vcmc.config import PriorConfig
from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.matching.types import MatchedDraws, MatchedProfiles, take_profiles
from vcmc.model import beta_per_column, profile_offsets

CountsFn = Callable[[np.ndarray | None, np.ndarray | None], tuple[np.ndarray, np.ndarray, np.ndarray]]

# aggregated probabilities are clipped here before logs (only exact zeros are affected: draws from the
# samplers are strictly positive, and every global cluster has weight >= floor in some silo)
_TINY = 1e-300
_DEFAULT_PRIOR = PriorConfig()
# starts are evaluated in chunks of about this many numbers per work array (memory, cache)
_CHUNK_ELEMENTS = 2 ** 21


@dataclass(frozen=True)
class Tuples:
    """Draw tuples: for each silo s the draws ``idx[s]`` of its chain, gathered.

    Attributes
    ----------
    idx : ndarray of shape (S, M), int
    pi : ndarray of shape (S, M, C)
        Weights of every silo's draw (0 for absent clusters).
    profiles : ndarray of shape (M, N, P)
        Profiles in the pair layout of ``Objective`` (one row per present (silo, cluster) pair).
    """

    idx: np.ndarray
    pi: np.ndarray
    profiles: np.ndarray

    @property
    def size(self) -> int:
        return int(self.idx.shape[1])


@dataclass(frozen=True)
class Evaluation:
    """Relaxed ELBO of R weight sets on one set of tuples, with optional gradient and curvature.

    Attributes
    ----------
    value : ndarray of shape (R,)
    grad : ndarray of shape (R, n_blocks, S) or None
        Derivative with respect to every (block, silo) weight (0 off the mask).
    curv : BlockCurvature or None
        Positive semi-definite curvature ``-Hessian`` of each block with the count tables held fixed:
        exact for objective (a) (clipping negative table entries at 0), the complete-data (EM) curvature
        for (b), which bounds the observed-data curvature from above.
    per_tuple : ndarray of shape (R, M) or None
        The relaxed ELBO of each tuple (data term of that tuple plus the entropy); ``value`` is its mean.
    """

    value: np.ndarray
    grad: np.ndarray | None = None
    curv: BlockCurvature | None = None
    per_tuple: np.ndarray | None = None


class BlockCurvature:
    """Curvature of every weight block restricted to the block's present silos.

    A block only couples the silos where its cluster is present, so it is stored as a ``k x k`` matrix
    with ``k = |S_b|`` instead of an ``S x S`` one padded with zeros: with 136 global clusters present in
    a few of 30 silos each, that is the difference between 10,000 dense 30 x 30 systems to solve per
    iteration and mostly tiny ones. Blocks of equal size are stacked in one group.

    Attributes
    ----------
    groups : list of (blocks, silos, mats)
        ``blocks`` (B,) block indices, ``silos`` (B, k) their present silos (increasing), ``mats``
        (R, B, k, k) the curvature of each start and block.
    n_blocks, n_silos : int
    """

    def __init__(self, groups, n_blocks: int, n_silos: int):
        self.groups = list(groups)
        self.n_blocks = int(n_blocks)
        self.n_silos = int(n_silos)

    @property
    def n_starts(self) -> int:
        return int(self.groups[0][2].shape[0])

    def subset(self, keep) -> BlockCurvature:
        """The curvature of the starts selected by ``keep`` (boolean or indices)."""
        return BlockCurvature([(b, s, m[keep]) for b, s, m in self.groups], self.n_blocks, self.n_silos)

    @staticmethod
    def concatenate(parts) -> BlockCurvature:
        """Stack the starts of curvatures with the same block structure."""
        first = parts[0]
        if len(parts) == 1:
            return first
        groups = [(b, s, np.concatenate([p.groups[i][2] for p in parts]))
                  for i, (b, s, _) in enumerate(first.groups)]
        return BlockCurvature(groups, first.n_blocks, first.n_silos)

    def dense(self) -> np.ndarray:
        """``(R, n_blocks, S, S)``, zero outside each block's present silos."""
        out = np.zeros((self.n_starts, self.n_blocks, self.n_silos, self.n_silos))
        for blk, silos, mat in self.groups:
            out[:, blk[:, None, None], silos[:, :, None], silos[:, None, :]] = mat
        return out


def check_matched(matched: MatchedDraws) -> None:
    """Raise ``InconsistentSiloSummaries`` if the matched draws' shapes disagree."""
    s = matched.n_silos
    c = matched.n_global
    p = int(np.sum(matched.n_modalities))
    if s < 1 or len(matched.profiles) != s or matched.present.shape != (s, c):
        raise InconsistentSiloSummaries(f"matched draws: {len(matched.pi)} pi arrays, "
                                        f"{len(matched.profiles)} profile arrays and presence "
                                        f"{matched.present.shape}; expected {s} and ({s}, {c})")
    for i, (pi, prof) in enumerate(zip(matched.pi, matched.profiles, strict=True)):
        name = matched.silos[i] if i < len(matched.silos) else str(i)
        if pi.ndim != 2 or pi.shape[1] != c or pi.shape[0] < 1:
            raise InconsistentSiloSummaries(f"silo {name!r}: pi draws have shape {pi.shape}, "
                                            f"expected (T, {c})")
        if prof.shape != (pi.shape[0], c, p):
            raise InconsistentSiloSummaries(f"silo {name!r}: profile draws have shape {prof.shape}, "
                                            f"expected ({pi.shape[0]}, {c}, {p})")
    if not np.all(matched.present.any(axis=0)):
        missing = np.nonzero(~matched.present.any(axis=0))[0].tolist()
        raise InconsistentSiloSummaries(f"global cluster(s) {missing} are present in no silo")


def evaluation_tuples(matched: MatchedDraws, n: int, rng=None) -> np.ndarray:
    """``n`` random draw tuples, shape (S, n): column m picks one draw of every silo's chain."""
    gen = as_generator(rng)
    return np.stack([gen.integers(0, p.shape[0], size=n) for p in matched.pi])


def relaxed_entropy(layout: BlockLayout, blocks: np.ndarray) -> np.ndarray:
    """Per-block relaxed entropy ``sum_b (d_b/|S_b|) sum_{s in S_b} log omega^s_b`` of (R, n_blocks, S)."""
    logs = np.log(np.where(layout.mask, np.maximum(blocks, _TINY), 1.0))
    return np.einsum("rbs,b->r", logs, layout.entropy_coef)


class Objective:
    """The relaxed ELBO of one matched problem (objective (a) or (b)), evaluated on draw tuples.

    Draws are held in a *pair layout*: one row per (silo, global cluster) pair where the cluster is present
    (``pair_cluster``, ``pair_silo``, sorted by cluster then silo). An aggregated profile is then a sum over
    a contiguous run of pairs (``np.add.reduceat``), which skips the structural zeros instead of
    multiplying uniform fillers by zero weights: with 30 silos and 136 global clusters present in a few
    silos each, the pairs are a few hundred where the dense (silo, cluster) grid has 4,080.

    Parameters
    ----------
    matched : MatchedDraws
    layout : BlockLayout
    objective : {"complete", "observed"}
    prior : PriorConfig
    counts_fn : CountsFn or None
        Needed for "observed"; for "complete" it is called once (hard counts) when ``matched.counts`` is
        None or ``use_counts_fn`` is True.
    use_counts_fn : bool
        Take the complete-data tables from ``counts_fn(None, None)`` (federated-gradient strategy).
    draw_dtype : numpy dtype
        Storage of the gathered profile draws of the tuples (float64 by default; float32 halves the memory
        of the evaluation tuples, arithmetic stays float64).

    Attributes
    ----------
    n_rounds : int
        Calls of ``counts_fn`` so far (each is one round trip to the silos).
    """

    def __init__(self, matched: MatchedDraws, layout: BlockLayout, objective: str, prior: PriorConfig,
                 counts_fn: CountsFn | None = None, use_counts_fn: bool = False, draw_dtype=np.float64):
        check_matched(matched)
        if objective not in ("complete", "observed"):
            raise ConfigError(f"The 'objective' parameter must be 'complete' or 'observed'. "
                              f"Got {objective!r}.")
        self.draw_dtype = np.dtype(draw_dtype)
        if self.draw_dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise ConfigError(f"The 'draw_dtype' parameter must be float64 or float32. Got {draw_dtype!r}.")
        self.matched = matched
        self.layout = layout
        self.objective = objective
        self.counts_fn = counts_fn
        self.n_rounds = 0
        c = matched.n_global
        self.alpha = float(prior.alpha)
        betas = prior.beta if isinstance(prior.beta, tuple) else (prior.beta,)
        if len(betas) not in (1, len(matched.n_modalities)):
            raise ConfigError(f"The 'beta' parameter of PriorConfig must be one value or one per variable "
                              f"({len(matched.n_modalities)}). Got {prior.beta!r} instead.")
        self.beta_col = beta_per_column(np.asarray(betas if len(betas) > 1 else betas[0]),
                                        matched.n_modalities)
        k = np.asarray(matched.n_modalities)
        # pair layout (sorted by cluster, then silo; every cluster has at least one pair, see check_matched)
        self.pair_cluster, self.pair_silo = np.nonzero(matched.present.T)
        self.n_pairs = int(self.pair_cluster.size)
        self.seg = np.searchsorted(self.pair_cluster, np.arange(c))
        self.seg_end = np.append(self.seg[1:], self.n_pairs)
        self.pairs_of_silo = [np.flatnonzero(self.pair_silo == s) for s in range(matched.n_silos)]
        # curvature: pairs grouped by the number of silos of their cluster (a batched Gram per group)
        # and columns grouped by the number of modalities of their variable
        n_per = np.bincount(self.pair_cluster, minlength=c)
        self._size_groups = [(int(n), np.flatnonzero(n_per == n)) for n in np.unique(n_per)]
        offsets = profile_offsets(matched.n_modalities)
        self._mod_groups = [(int(kk), np.flatnonzero(k == kk)) for kk in np.unique(k)]
        self._mod_cols = {kk: (offsets[qs][:, None] + np.arange(kk)[None, :]) for kk, qs in self._mod_groups}
        # sanitise the weights once: absent clusters get pi 0 (so they contribute exact zeros)
        self._pi = []
        for s in range(matched.n_silos):
            absent = ~matched.present[s]
            pi = np.asarray(matched.pi[s], dtype=np.float64)
            if np.any(absent):
                pi = pi.copy()
                pi[:, absent] = 0.0
            self._pi.append(pi)
        self.tables = None
        if objective == "complete":
            if use_counts_fn or matched.counts is None:
                if counts_fn is None:
                    raise ConfigError("the complete-data objective needs the matched contingency counts "
                                      "(matched.counts is None: a silo withheld its table) or a counts_fn "
                                      "returning hard counts; use strategy='federated-gradient'")
                cl, mod, _ = counts_fn(None, None)
                self.n_rounds += 1
                n_c = np.asarray(cl, dtype=np.float64).reshape(-1, c)[0]
                n_cj = np.asarray(mod, dtype=np.float64).reshape(-1, c, self.beta_col.size)[0]
            else:
                n_c = np.asarray(matched.sizes, dtype=np.float64).sum(axis=0)
                n_cj = np.asarray(matched.counts, dtype=np.float64).sum(axis=0)
            self.tables = (n_c + self.alpha - 1.0, n_cj + self.beta_col[None, :] - 1.0)
        elif counts_fn is None:
            raise ConfigError("the observed-data objective needs counts_fn (silo-side soft counts)")

    # -----------------------------------------------------------------------------------------------
    def tuples(self, idx: np.ndarray, out: np.ndarray | None = None) -> Tuples:
        """Gather the draws of tuples ``idx`` (S, M): weights (S, M, C), profiles in pair layout (M, N, P).

        ``out`` (M, N, P) of ``draw_dtype``, optional: a buffer to gather the profiles into (the optimiser
        reuses one for its minibatches instead of allocating tens of MB per iteration).
        """
        idx = np.asarray(idx, dtype=np.int64)
        pi = np.stack([p[i] for p, i in zip(self._pi, idx, strict=True)])
        shape = (idx.shape[1], self.n_pairs, self.beta_col.size)
        if out is None or out.shape != shape or out.dtype != self.draw_dtype:
            out = np.empty(shape, dtype=self.draw_dtype)
        for s, pairs in enumerate(self.pairs_of_silo):     # a loop over silos, one gather each
            if not pairs.size:
                continue
            prof = self.matched.profiles[s]
            clusters = self.pair_cluster[pairs]
            direct = prof.direct_local(clusters) if isinstance(prof, MatchedProfiles) else None
            if direct is not None:
                src, local = direct
                gather_pairs(src, idx[s], local, pairs, out)
            else:
                out[:, pairs] = take_profiles(prof, idx[s], clusters, self.draw_dtype)
        return Tuples(idx=idx, pi=pi, profiles=out)

    def _pair_columns(self, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """pi weights (R, S) and the profile weight of every pair and column (R, N, P)."""
        w0, w = self.layout.split(blocks)
        wpair = w[:, self.pair_silo, self.pair_cluster, :]                     # (R, N, Q)
        return w0, wpair[..., self.layout.var_of_col]

    def aggregate(self, blocks: np.ndarray, tup: Tuples) -> tuple[np.ndarray, np.ndarray]:
        """Aggregated draws for R weight sets: pihat (R, M, C), phat (R, M, C, P)."""
        w0, wcol = self._pair_columns(blocks)
        pihat = np.einsum("rs,smc->rmc", w0, tup.pi, optimize=True)
        r, (m, _, p) = blocks.shape[0], tup.profiles.shape
        phat = np.empty((r, m, self.matched.n_global, p))
        aggregate_pairs(np.ascontiguousarray(wcol), tup.profiles, self.seg, self.seg_end, phat)
        return pihat, phat

    def evaluate(self, blocks: np.ndarray, requests) -> list[Evaluation]:
        """Relaxed ELBO (and optionally gradient/curvature) of ``blocks`` (R, n_blocks, S) on tuple sets.

        ``requests`` is a sequence of ``(tuples, want)`` with ``want`` 0 (value only), 1 (and gradient)
        or 2 (and curvature). For the observed objective all requests share ONE call of ``counts_fn``
        (one round trip), as section 7.1 recommends. The starts are processed in chunks so that the
        work arrays stay near ``_CHUNK_ELEMENTS`` numbers (multi-start designs on large problems).
        """
        blocks = np.asarray(blocks, dtype=np.float64)
        r = blocks.shape[0]
        c = self.matched.n_global
        p = self.beta_col.size
        soft = None
        offsets = []
        if self.objective == "observed":
            agg = [self.aggregate(blocks, tup) for tup, _ in requests]
            pis = np.concatenate([a[0].reshape(-1, c) for a in agg])
            profs = np.concatenate([a[1].reshape(-1, c, p) for a in agg])
            del agg
            cl, mod, ll = self.counts_fn(np.maximum(pis, 0.0), np.maximum(profs, 0.0))
            self.n_rounds += 1
            soft = (np.asarray(cl, dtype=np.float64), np.asarray(mod, dtype=np.float64),
                    np.asarray(ll, dtype=np.float64))
            pos = 0
            for tup, _ in requests:
                offsets.append(pos)
                pos += r * tup.size
        m_max = max(tup.size for tup, _ in requests)
        per_start = m_max * (self.n_pairs + c) * p
        step = max(1, int(_CHUNK_ELEMENTS // max(per_start, 1)))
        parts = [self._evaluate_chunk(blocks[r0:r0 + step], requests, soft, offsets, r0)
                 for r0 in range(0, r, step)]
        out = []
        for k in range(len(requests)):
            evs = [part[k] for part in parts]
            out.append(Evaluation(
                value=np.concatenate([e.value for e in evs]),
                grad=None if evs[0].grad is None else np.concatenate([e.grad for e in evs]),
                curv=None if evs[0].curv is None else BlockCurvature.concatenate([e.curv for e in evs]),
                per_tuple=np.concatenate([e.per_tuple for e in evs])))
        return out

    def _evaluate_chunk(self, blocks, requests, soft, offsets, r0) -> list[Evaluation]:
        r = blocks.shape[0]
        c = self.matched.n_global
        p = self.beta_col.size
        entropy = relaxed_entropy(self.layout, blocks)
        out = []
        for k, (tup, want_grad) in enumerate(requests):
            m = tup.size
            pihat, phat = self.aggregate(blocks, tup)
            lpi = np.log(np.maximum(pihat, _TINY))
            lph = np.log(np.maximum(phat, _TINY))
            if soft is None:
                a_tab = self.tables[0][None, None, :]
                b_tab = self.tables[1][None, None, :, :]
                # 2-D products: one BLAS call each (a stacked 3-D @ 1-D product does not use BLAS)
                terms = ((lpi.reshape(r * m, -1) @ self.tables[0]).reshape(r, m),
                         (lph.reshape(r * m, -1) @ self.tables[1].ravel()).reshape(r, m))
                data = terms[0].mean(axis=1) + terms[1].mean(axis=1)
            else:
                # soft counts are ordered by request, then start, then tuple
                sl = slice(offsets[k] + r0 * m, offsets[k] + (r0 + r) * m)
                a_tab = soft[0][sl].reshape(r, m, c) + self.alpha - 1.0
                b_tab = soft[1][sl].reshape(r, m, c, p) + self.beta_col - 1.0
                ll = soft[2][sl].reshape(r, m)
                terms = (ll + (self.alpha - 1.0) * lpi.sum(axis=2) + (lph @ (self.beta_col - 1.0)).sum(axis=2),)
                data = terms[0].mean(axis=1)
            del lph
            value = data + entropy
            # per-tuple values (their mean is ``value``): the noise scale of the "plateau" stopping rule
            per_tuple = sum(terms) + entropy[:, None]
            if not want_grad:
                out.append(Evaluation(value=value, per_tuple=per_tuple))
                continue
            grad, curv = self._grad_curv(blocks, tup, pihat, phat, a_tab, b_tab, want_grad >= 2)
            out.append(Evaluation(value=value, grad=grad, curv=curv, per_tuple=per_tuple))
        return out

    def _pair_sums(self, per_cluster: np.ndarray, tup: Tuples) -> np.ndarray:
        """``sum_m per_cluster[r, m, c_k, j] x[m, k, j]`` for every pair k: (R, M, C, P) -> (R, N, P)."""
        out = np.zeros((per_cluster.shape[0], self.n_pairs, tup.profiles.shape[2]))
        pair_sums(np.ascontiguousarray(per_cluster), tup.profiles, self.pair_cluster, out)
        return out

    def _grad_curv(self, blocks, tup, pihat, phat, a_tab, b_tab, want_curv):
        lay = self.layout
        m = tup.size
        r, n_s = blocks.shape[0], lay.n_silos
        pc, ps = self.pair_cluster, self.pair_silo
        pih = np.maximum(pihat, _TINY)
        phh = np.maximum(phat, _TINY)
        gpi = np.broadcast_to(a_tab, pih.shape) / pih                          # (R, M, C)
        gph = np.broadcast_to(b_tab, phh.shape) / phh                          # (R, M, C, P)
        g0 = np.einsum("rmc,smc->rs", gpi, tup.pi, optimize=True) / m
        gpair = np.add.reduceat(self._pair_sums(gph, tup) / m, lay.offsets[:-1], axis=2)   # (R, N, Q)
        del gph
        gq = np.zeros((r, lay.n_clusters, lay.n_vars, n_s))
        gq[:, pc, :, ps] = gpair.transpose(1, 0, 2)                             # (R, C, Q, S)
        grad = np.concatenate([g0[:, None, :], lay.reduce_profiles(gq)], axis=1)
        w = np.where(lay.mask, np.maximum(blocks, _TINY), 1.0)
        grad = np.where(lay.mask, grad + lay.entropy_coef[None, :, None] / w, 0.0)
        if not want_curv:
            return grad, None
        # curvature: sum_j A_j x^s_j x^t_j / xhat_j^2 averaged over tuples, with A clipped at 0 so that it
        # is positive semi-definite (negative table entries come from beta < 1 on unseen modalities);
        # one batched Gram matrix per block, over the block's present silos only
        sa = np.sqrt(np.maximum(np.broadcast_to(a_tab, pih.shape), 0.0)) / pih      # (R, M, C)
        z0 = (tup.pi[None] * sa[:, None]).reshape(r, n_s, -1)                       # (R, S, M C)
        groups = [(np.zeros(1, dtype=np.int64), np.arange(n_s)[None, :],
                   (z0 @ z0.transpose(0, 2, 1))[:, None] / m)]
        del z0
        sb = np.sqrt(np.maximum(np.broadcast_to(b_tab, phh.shape), 0.0)) / phh      # (R, M, C, P)
        q_all = lay.n_vars
        for n, clusters in self._size_groups:       # a loop over the distinct numbers of silos per cluster
            pairs = self.seg[clusters][:, None] + np.arange(n)[None, :]             # (G, n)
            g = clusters.size
            mats = np.empty((r, g, q_all, n, n))
            for kk, qs in self._mod_groups:         # and over the distinct numbers of modalities
                rows = np.empty((r, g, qs.size, n, m * kk))
                gram_rows(tup.profiles, sb, clusters, self.seg, self._mod_cols[kk], rows)
                gram = np.empty((r, g, qs.size, n, n))
                gram_sym(rows, gram)
                mats[:, :, qs] = gram / m
            silos = ps[pairs]                                                        # (G, n)
            if lay.tie == "per_block":
                blk = (1 + clusters[:, None] * q_all + np.arange(q_all)[None, :]).ravel()
                groups.append((blk, np.repeat(silos, q_all, axis=0), mats.reshape(r, g * q_all, n, n)))
            else:
                groups.append((1 + clusters, silos, mats.sum(axis=2)))
        curv = BlockCurvature(groups, lay.n_blocks, n_s)
        # the relaxed entropy's curvature on the diagonal
        for blk, silos, mat in curv.groups:
            k = silos.shape[1]
            ii = np.arange(k)
            mat[:, :, ii, ii] += lay.entropy_coef[blk][None, :, None] / w[:, blk[:, None], silos] ** 2
        return grad, curv


def relaxed_elbo(matched: MatchedDraws, weights: AggregationWeights, *, objective: str = "complete",
                 prior: PriorConfig = _DEFAULT_PRIOR, tuples=None, counts_fn: CountsFn | None = None,
                 rng=None, n_tuples: int = 200) -> float:
    """Relaxed ELBO of ``weights`` (docs/design.md §6.4) on fixed draw tuples.

    Parameters
    ----------
    matched : MatchedDraws
    weights : AggregationWeights
    objective : {"complete", "observed"}
        (a) complete-data Dirichlet objective from ``matched.counts`` (or hard counts via
        ``counts_fn``), or (b) observed-data likelihood through ``counts_fn`` soft counts.
    prior : PriorConfig
    tuples : ndarray of shape (S, M), int, optional
        Draw indices of each tuple (see ``evaluation_tuples``); drawn from ``rng`` if omitted.
    counts_fn : CountsFn, optional
    rng : int, Generator or None
    n_tuples : int
        Number of tuples when ``tuples`` is omitted.

    Returns
    -------
    float
        Natural-log relaxed ELBO, up to a constant independent of the weights.
    """
    layout = BlockLayout.from_matched(matched, "per_block")
    obj = Objective(matched, layout, objective, prior, counts_fn,
                    use_counts_fn=matched.counts is None)
    if tuples is None:
        tuples = evaluation_tuples(matched, n_tuples, rng)
    blocks = layout.from_weights(weights)[None]
    return float(obj.evaluate(blocks, [(obj.tuples(tuples), False)])[0].value[0])
