"""The aggregation family: block-wise convex weights, their block layout and the simplex projection.

docs/design.md §6.2: one weight per silo for the pi block and for each (variable q, global cluster c)
block; the weights of a block lie on the simplex over the silos where the block's cluster is present
(structural zeros, section 5.5). Every aggregated draw is then a convex combination of points of the
same simplices, so it satisfies the constraints by construction. With ``tie="per_cluster"`` the Q profile
blocks of a cluster share one weight per silo.

Internally the free weights of all blocks are stored as one padded array ``blocks`` of shape
``(R, n_blocks, S)`` (R starts optimised together), with a boolean ``mask`` of shape ``(n_blocks, S)``
saying which silos belong to each block; masked-out entries are 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc._rng import as_generator
from vcmc.exceptions import ConfigError
from vcmc.matching.types import MatchedDraws, take_profiles
from vcmc.model import profile_offsets, variable_of_column


@dataclass(frozen=True)
class AggregationWeights:
    """Optimised (or baseline) aggregation weights.

    Attributes
    ----------
    pi : ndarray of shape (S,)
        Weight of each silo in the pi block (on the simplex).
    profiles : ndarray of shape (S, C, Q)
        Weight of silo s in the (q, c) profile block; for each (c, q) the present silos' weights sum
        to 1 and absent silos have weight 0. Under ``tie="per_cluster"`` all q share the same value.
    """

    pi: np.ndarray
    profiles: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "pi", np.asarray(self.pi, dtype=np.float64))
        object.__setattr__(self, "profiles", np.asarray(self.profiles, dtype=np.float64))

    def to_dict(self) -> dict:
        """Plain lists, for JSON outputs."""
        return {"pi": self.pi.tolist(), "profiles": self.profiles.tolist()}


class BlockLayout:
    """Block structure of the weights of one matched problem (docs/design.md §6.2).

    Parameters
    ----------
    present : ndarray of shape (S, C), bool
    n_modalities : sequence of int
    tie : {"per_block", "per_cluster"}

    Attributes
    ----------
    mask : ndarray of shape (n_blocks, S), bool
        Block 0 is the pi block (every silo); then one block per (c, q) in the order ``1 + c Q + q``
        (``per_block``) or one per cluster ``1 + c`` (``per_cluster``).
    dims : ndarray of shape (n_blocks,)
        Intrinsic dimension d_b of the quantity each block aggregates: C - 1 for pi, K^q - 1 for a
        (q, c) block, D = sum_q (K^q - 1) for a tied cluster block.
    entropy_coef : ndarray of shape (n_blocks,)
        ``d_b / |S_b|``, the coefficient of the per-block relaxed entropy of docs/design.md §6.3.
    """

    def __init__(self, present, n_modalities, tie: str = "per_block"):
        if tie not in ("per_block", "per_cluster"):
            raise ConfigError(f"The 'tie' parameter must be one of 'per_block', 'per_cluster'. Got {tie!r}.")
        self.present = np.asarray(present, dtype=bool)
        self.n_modalities = tuple(int(k) for k in n_modalities)
        self.tie = tie
        self.n_silos, self.n_clusters = self.present.shape
        self.n_vars = len(self.n_modalities)
        self.offsets = profile_offsets(self.n_modalities)
        self.var_of_col = variable_of_column(self.n_modalities)
        k = np.asarray(self.n_modalities)
        s, c, q = self.n_silos, self.n_clusters, self.n_vars
        if tie == "per_block":
            prof_mask = np.repeat(self.present.T, q, axis=0)                  # (C Q, S)
            prof_dims = np.tile(k - 1, c).astype(np.float64)
        else:
            prof_mask = self.present.T.copy()                                   # (C, S)
            prof_dims = np.full(c, float(np.sum(k - 1)))
        self.mask = np.vstack([np.ones((1, s), dtype=bool), prof_mask])
        self.dims = np.concatenate([[float(c - 1)], prof_dims])
        self.block_size = self.mask.sum(axis=1)
        self.entropy_coef = self.dims / self.block_size
        self.n_blocks = self.mask.shape[0]

    @classmethod
    def from_matched(cls, matched: MatchedDraws, tie: str = "per_block") -> BlockLayout:
        return cls(matched.present, matched.n_modalities, tie)

    # -- conversions between the padded block array and the (pi, profiles) weights -------------------
    def split(self, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(R, n_blocks, S)`` -> pi weights ``(R, S)`` and profile weights ``(R, S, C, Q)``."""
        r = blocks.shape[0]
        w0 = blocks[:, 0, :]
        rest = blocks[:, 1:, :]
        if self.tie == "per_block":
            w = rest.reshape(r, self.n_clusters, self.n_vars, self.n_silos).transpose(0, 3, 1, 2)
        else:
            w = np.broadcast_to(rest.transpose(0, 2, 1)[:, :, :, None],
                                (r, self.n_silos, self.n_clusters, self.n_vars))
        return w0, w

    def join(self, w0: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Inverse of ``split`` (for tied weights the first variable's value is taken)."""
        r = w0.shape[0]
        if self.tie == "per_block":
            rest = w.transpose(0, 2, 3, 1).reshape(r, self.n_clusters * self.n_vars, self.n_silos)
        else:
            rest = w[:, :, :, 0].transpose(0, 2, 1)
        return np.concatenate([w0[:, None, :], rest], axis=1) * self.mask

    def reduce_profiles(self, g: np.ndarray) -> np.ndarray:
        """Profile-weight quantities ``(R, C, Q, ...)`` -> block rows ``(R, n_prof_blocks, ...)``.

        Under tying the Q blocks of a cluster share a weight, so their derivatives add up.
        """
        r = g.shape[0]
        if self.tie == "per_block":
            return g.reshape(r, self.n_clusters * self.n_vars, *g.shape[3:])
        return g.sum(axis=2)

    def to_weights(self, blocks: np.ndarray) -> AggregationWeights:
        """One start's blocks ``(n_blocks, S)`` as ``AggregationWeights``."""
        w0, w = self.split(np.asarray(blocks)[None])
        return AggregationWeights(pi=w0[0].copy(), profiles=np.array(w[0]))

    def from_weights(self, weights: AggregationWeights) -> np.ndarray:
        """``AggregationWeights`` -> blocks ``(n_blocks, S)``; checks shapes and constraints."""
        s, c, q = self.n_silos, self.n_clusters, self.n_vars
        if weights.pi.shape != (s,) or weights.profiles.shape != (s, c, q):
            raise ConfigError(f"weights must have shapes pi ({s},) and profiles ({s}, {c}, {q}); got "
                              f"{weights.pi.shape} and {weights.profiles.shape}")
        if self.tie == "per_cluster" and not np.allclose(weights.profiles, weights.profiles[:, :, :1]):
            raise ConfigError("tie='per_cluster' needs the same profile weight for every variable of a "
                              "(silo, cluster)")
        blocks = self.join(weights.pi[None], weights.profiles[None])[0]
        sums = blocks.sum(axis=1)
        if np.any(blocks < 0) or not np.allclose(sums, 1.0, atol=1e-8):
            raise ConfigError("every weight block must be non-negative and sum to 1 over its present silos")
        return blocks


def project_simplex(v: np.ndarray, mask: np.ndarray | None = None, floor: float = 0.0) -> np.ndarray:
    """Euclidean projection of each row of ``v`` onto ``{w : w >= floor, sum w = 1}`` over its mask.

    Duchi, Shalev-Shwartz, Singer & Chandra (2008), Algorithm 1 (sort-based, as in Blondel et al. 2014),
    vectorised over all leading axes (docs/design.md §6.6). The floor is handled by projecting
    ``v - floor`` onto the simplex of total ``1 - k floor`` (k = silos in the block) and adding it back.
    Hand-written because neither numpy nor scipy has a simplex projection.

    Parameters
    ----------
    v : ndarray of shape (..., S)
    mask : ndarray broadcastable to ``v``, bool, optional
        Entries outside the mask are excluded (returned as 0).
    floor : float
        Lower bound of every kept entry; must satisfy ``k * floor < 1``.
    """
    v = np.asarray(v, dtype=np.float64)
    if mask is None:
        mask = np.ones(v.shape, dtype=bool)
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), v.shape)
    k = mask.sum(axis=-1, keepdims=True)
    z = 1.0 - k * floor
    # excluded entries sort last and never enter the support
    x = np.where(mask, v - floor, -np.inf)
    u = -np.sort(-x, axis=-1)
    finite = np.isfinite(u)
    css = np.cumsum(np.where(finite, u, 0.0), axis=-1)
    j = np.arange(1, v.shape[-1] + 1)
    cond = finite & (u - (css - z) / j > 0)
    rho = np.maximum(np.sum(cond, axis=-1, keepdims=True), 1)   # the condition holds exactly for j <= rho
    tau = (np.take_along_axis(css, rho - 1, axis=-1) - z) / rho
    return np.where(mask, np.maximum(x - tau, 0.0) + floor, 0.0)


# -- baseline and starting weights --------------------------------------------------------------------
def _normalised_blocks(layout: BlockLayout, scores: np.ndarray, floor: float) -> np.ndarray:
    """Blocks proportional to non-negative ``scores`` (n_blocks, S) within each mask, then floored."""
    scores = np.where(layout.mask, np.maximum(scores, 0.0), 0.0)
    tot = scores.sum(axis=1, keepdims=True)
    uniform = layout.mask / layout.block_size[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(tot > 0, scores / np.where(tot > 0, tot, 1.0), uniform)
    if floor > 0:
        w = project_simplex(w, layout.mask, floor)
    return w


def _layout(matched: MatchedDraws, tie: str) -> BlockLayout:
    return BlockLayout.from_matched(matched, tie)


def count_blocks(layout: BlockLayout, n_rows, sizes, floor: float = 0.0) -> np.ndarray:
    """Count weights as blocks: ``omega_0 ∝ n_s``, ``omega_{q,c} ∝ n_{s,c}`` (docs/design.md §6.2)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    prof = sizes.T                                                   # (C, S)
    if layout.tie == "per_block":
        prof = np.repeat(prof, layout.n_vars, axis=0)
    scores = np.vstack([np.asarray(n_rows, dtype=np.float64)[None, :], prof])
    return _normalised_blocks(layout, scores, floor)


def count_weights(matched: MatchedDraws, *, tie: str = "per_block") -> AggregationWeights:
    """Count weights: ``omega_0 ∝ n_s`` and ``omega_{q,c} ∝ n_{s,c}`` over the silos where c is present.

    Reproduces linear pooling of the silos' posterior means up to prior pseudo-counts (docs/design.md §6.2), so
    it is both the default starting point and a CMC-like baseline. A present cluster whose members all
    sit in silos reporting size 0 gets uniform weights.
    """
    layout = _layout(matched, tie)
    return layout.to_weights(count_blocks(layout, matched.n_rows, matched.sizes))


def uniform_blocks(layout: BlockLayout) -> np.ndarray:
    return layout.mask / layout.block_size[:, None]


def uniform_weights(matched: MatchedDraws, *, tie: str = "per_block") -> AggregationWeights:
    """Equal weights: ``1/S`` for pi and ``1/|S_c|`` for every profile block."""
    layout = _layout(matched, tie)
    return layout.to_weights(uniform_blocks(layout))


def random_blocks(layout: BlockLayout, n: int, rng=None, floor: float = 0.0) -> np.ndarray:
    """``n`` starts, each block uniform (Dirichlet(1)) on its simplex; shape (n, n_blocks, S)."""
    gen = as_generator(rng)
    e = gen.exponential(size=(n, layout.n_blocks, layout.n_silos)) * layout.mask
    w = e / e.sum(axis=2, keepdims=True)
    if floor > 0:
        w = project_simplex(w, layout.mask, floor)
    return w


def random_weights(matched: MatchedDraws, *, tie: str = "per_block", rng=None) -> AggregationWeights:
    """Weights drawn uniformly on every block simplex (a random starting point)."""
    layout = _layout(matched, tie)
    return layout.to_weights(random_blocks(layout, 1, rng)[0])


def inverse_variance_weights(matched: MatchedDraws) -> AggregationWeights:
    """Scott et al.'s consensus weights restricted to the simplex (docs/design.md §11.3).

    Scalar weights ``omega^s_b ∝ 1 / tr Cov_s(theta_b)`` per block (the scalar member of Scott et al.'s
    family, the only linear one that keeps every draw on the simplex, docs/design.md §11.3), normalised over
    the silos present in the block. A silo whose draws do not vary in a block (zero trace) gets the
    largest weight of the block's other silos rather than an infinite one.
    """
    layout = _layout(matched, "per_block")
    s, c = layout.n_silos, layout.n_clusters
    var_pi = np.array([np.var(p, axis=0, ddof=1).sum() if p.shape[0] > 1 else 0.0 for p in matched.pi])
    var_prof = np.zeros((s, c, layout.n_vars))
    starts = layout.offsets[:-1]
    for i, prof in enumerate(matched.profiles):        # a loop over silos only
        if prof.shape[0] > 1:
            # only the present clusters: absent ones are outside every block's mask
            present = np.flatnonzero(layout.present[i])
            v = np.var(take_profiles(prof, np.arange(prof.shape[0]), present), axis=0, ddof=1)   # (C_s, P)
            var_prof[i, present] = np.add.reduceat(v, starts, axis=1)
    traces = np.vstack([var_pi[None, :], var_prof.transpose(1, 2, 0).reshape(c * layout.n_vars, s)])
    with np.errstate(divide="ignore"):
        inv = np.where(layout.mask & (traces > 0), 1.0 / traces, 0.0)
    top = inv.max(axis=1, keepdims=True)
    inv = np.where(layout.mask & (traces <= 0), np.where(top > 0, top, 1.0), inv)
    return layout.to_weights(_normalised_blocks(layout, inv, 0.0))
