"""Online relabelling of a Gibbs chain: pivot / ECR assignment per kept draw (docs/design.md §4.2).

Label switching makes raw component labels meaningless across draws. Following the equivalence-classes
representatives (ECR) idea of Papastamoulis & Iliopoulos (2010), each kept draw's labels are permuted so
that its allocation vector agrees as much as possible with a fixed pivot allocation: the permutation
maximising ``sum_i 1[nu(z_i) = pivot_i]`` is a linear assignment on the C+ x C+ confusion matrix
(a Stephens-type assignment per draw, solved with ``scipy.optimize.linear_sum_assignment``).

Everything here works block by block, as an ``on_block`` consumer of the sampler driver, so a silo never
stores all allocations: memory is the n x C+ table of relabelled allocation counts plus the thinned
parameter draws (and an n x n similarity matrix only when explicitly asked for, small silos only).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.optimize import linear_sum_assignment

from vcmc.exceptions import ConfigError

# The co-clustering matrix (small silos only) is accumulated in chunks of draws whose one-hot matrices stay
# near this many elements.
_CHUNK_ELEMENTS = 2_000_000

PSM_MAX_ROWS = 5000
"""Largest silo for which a posterior similarity matrix (n x n) may be accumulated."""


def confusion_matrices(z: np.ndarray, reference: np.ndarray, n_components: int) -> np.ndarray:
    """Confusion matrices of several allocation vectors against one reference, vectorised over draws.

    Parameters
    ----------
    z : ndarray of shape (m, n), int
        Allocations of m draws, labels in ``0..n_components-1``.
    reference : ndarray of shape (n,), int
        Reference allocation (same label range).
    n_components : int

    Returns
    -------
    ndarray of shape (m, n_components, n_components), int64
        ``out[t, c, k] = #{i : z[t, i] = c, reference[i] = k}``.
    """
    z = np.ascontiguousarray(z)
    out = np.zeros((z.shape[0], n_components, n_components), dtype=np.int64)
    _confusion(z, np.ascontiguousarray(reference, dtype=np.int64), out)
    return out


# The loops below (confusion counts, relabelled draws, relabelled row counts) are compiled: done with numpy (flat
# indices and bincount) they cost 0.27 ms per kept draw of a 9,700-row silo, 7% of its whole apply step at the
# paper's protocol (5,000 kept draws), against ~0.02 ms here; the assignment itself stays scipy's.
@njit(cache=True)
def _confusion(z, reference, out):
    """``out[t, z[t, i], reference[i]] += 1`` over draws t and rows i (``out`` zeroed by the caller)."""
    for t in range(z.shape[0]):
        for i in range(z.shape[1]):
            out[t, z[t, i], reference[i]] += 1


@njit(cache=True)
def _permute_in_place(pi, profiles, perms, at):
    """Relabel draws ``at .. at + len(perms)`` of ``pi`` and ``profiles`` in place: draw t's component c
    becomes component ``perms[t, c]``."""
    n_comp = perms.shape[1]
    tmp_pi = np.empty(n_comp)
    tmp = np.empty((n_comp, profiles.shape[2]))
    for t in range(perms.shape[0]):
        s = at + t
        tmp_pi[:] = pi[s]
        tmp[:, :] = profiles[s]
        for c in range(n_comp):
            k = perms[t, c]
            pi[s, k] = tmp_pi[c]
            profiles[s, k, :] = tmp[c, :]


@njit(cache=True)
def _accumulate_relabelled(z, perms, counts, sizes):
    """Row counts ``counts[i, perms[t, z[t, i]]] += 1`` and component sizes ``sizes[t, .]`` of the relabelled
    draws, without building the relabelled allocations."""
    for t in range(z.shape[0]):
        for i in range(z.shape[1]):
            k = perms[t, z[t, i]]
            counts[i, k] += 1
            sizes[t, k] += 1


def best_permutations(confusion: np.ndarray) -> np.ndarray:
    """Per draw, the relabelling ``perm[t, c]`` (new label of old label c) maximising agreement.

    Parameters
    ----------
    confusion : ndarray of shape (m, C, C)
        ``confusion[t, c, k]``: rows with label c in draw t and label k in the reference.

    Returns
    -------
    ndarray of shape (m, C), int64
        A permutation of ``0..C-1`` per draw.
    """
    m, c, _ = confusion.shape
    perms = np.empty((m, c), dtype=np.int64)
    # One C x C assignment per draw: no library solves a batch of them, and C+ is small (15-30), so the
    # loop is over draws only (each solve is a few microseconds), never over rows.
    for t in range(m):
        rows, cols = linear_sum_assignment(confusion[t], maximize=True)
        perms[t, rows] = cols
    return perms


@dataclass(frozen=True)
class RelabelledChain:
    """One chain after online relabelling (everything the post-processing needs, nothing row x draw).

    Attributes
    ----------
    pi : ndarray of shape (T, C+)
        Relabelled weight draws.
    profiles : ndarray of shape (T, C+, P)
        Relabelled profile draws.
    n_occupied : ndarray of shape (T,), int
    log_posterior : ndarray of shape (T,)
    counts : ndarray of shape (n, C+), int32
        Kept iterations in which row i was allocated to (relabelled) component c.
    pivot : ndarray of shape (n,), int
        The pivot allocation every draw was aligned to.
    psm : ndarray of shape (n, n), float32, or None
        Summed co-clustering indicators (divide by T for the posterior similarity), if accumulated.
    sizes : ndarray of shape (T, C+), int32, or None
        Members of each relabelled component at each kept draw.
    seconds : float
        Sampler wall time of the chain.
    n_iter : int
        Iterations the chain ran (fewer than ``SamplerConfig.n_iter`` when ``--iterations auto`` stopped
        it); 0 when unknown.
    converged : bool or None
        Whether it met the convergence targets (``--iterations auto``); None in fixed-length runs.
    """

    pi: np.ndarray
    profiles: np.ndarray
    n_occupied: np.ndarray
    log_posterior: np.ndarray
    counts: np.ndarray
    pivot: np.ndarray
    psm: np.ndarray | None = None
    sizes: np.ndarray | None = None
    seconds: float = 0.0
    n_iter: int = 0
    converged: bool | None = None

    @property
    def n_kept(self) -> int:
        return int(self.pi.shape[0])

    def permuted(self, perm: np.ndarray) -> RelabelledChain:
        """The same chain with component c renamed ``perm[c]`` everywhere (used to align chains)."""
        perm = np.asarray(perm, dtype=np.int64)
        inverse = np.argsort(perm)
        return RelabelledChain(pi=self.pi[:, inverse], profiles=self.profiles[:, inverse],
                               n_occupied=self.n_occupied, log_posterior=self.log_posterior,
                               counts=self.counts[:, inverse], pivot=perm[self.pivot], psm=self.psm,
                               sizes=None if self.sizes is None else self.sizes[:, inverse],
                               seconds=self.seconds, n_iter=self.n_iter, converged=self.converged)

    def head(self, n_kept: int) -> RelabelledChain:
        """The first ``n_kept`` draws (chains stopped at different lengths are pooled at the shortest).

        The membership counts keep every kept draw of the chain: they are per-row frequencies, not draws.
        """
        if n_kept >= self.n_kept:
            return self
        return dataclasses.replace(self, pi=self.pi[:n_kept], profiles=self.profiles[:n_kept],
                                   n_occupied=self.n_occupied[:n_kept],
                                   log_posterior=self.log_posterior[:n_kept],
                                   sizes=None if self.sizes is None else self.sizes[:n_kept])


class PivotRelabeller:
    """``on_block`` consumer relabelling kept draws online against a pivot allocation.

    The pivot is the allocation with the highest log posterior among the draws of the first non-empty
    kept block (a cheap stand-in for the MAP allocation of the whole chain: the chain is past burn-in).
    Every draw of that block and of each later block is relabelled to agree best with the pivot; the
    relabelled allocations are accumulated into an n x C+ count table and the relabelled (pi, p) stored.

    Parameters
    ----------
    n_rows : int
    n_components : int
        C+.
    accumulate_psm : bool
        Also accumulate the co-clustering counts (n x n float32). Refused when ``n_rows > 5000``.
    storage : (ndarray, ndarray), optional
        The chain's arrays of kept weights (T, C+) and profiles (T, C+, P), as given to ``run_chain``'s
        ``draw_storage``: each block is relabelled where it lies and the result holds them (no copy).
    """

    def __init__(self, n_rows: int, n_components: int, *, accumulate_psm: bool = False,
                 storage: tuple[np.ndarray, np.ndarray] | None = None):
        if accumulate_psm and n_rows > PSM_MAX_ROWS:
            raise ConfigError(
                f"The 'partition' parameter of PostprocessConfig is 'psm', which needs an n x n posterior "
                f"similarity matrix; it is allowed for silos of at most {PSM_MAX_ROWS} rows. Got a silo "
                f"of {n_rows} rows instead: use partition='modal'.")
        self.n_rows = int(n_rows)
        self.n_components = int(n_components)
        self.counts = np.zeros((self.n_rows, self.n_components), dtype=np.int32)
        self.psm = np.zeros((self.n_rows, self.n_rows), dtype=np.float32) if accumulate_psm else None
        self.pivot: np.ndarray | None = None
        # ``storage``: the chain's own arrays of kept weights and profiles (``run_chain(draw_storage=...)``),
        # relabelled in place block by block, so a silo holds its profile draws once (190 MB at the paper's
        # protocol) and never copies them; without it the relabelled draws go to buffers of their own, grown
        # by doubling
        self._storage = storage
        self._n = 0
        self._pi: np.ndarray | None = None if storage is None else storage[0]
        self._profiles: np.ndarray | None = None if storage is None else storage[1]
        self._sizes: np.ndarray | None = None
        self._n_occupied: np.ndarray | None = None
        self._log_posterior: np.ndarray | None = None

    def _reserve(self, m: int, n_col: int) -> None:
        """Room for ``m`` more draws in the buffers (allocated on the first block, doubled when full)."""
        need = self._n + m
        if self._sizes is not None and need <= self._sizes.shape[0]:
            return
        if self._storage is not None:
            if need > self._storage[0].shape[0]:
                raise ValueError(f"the relabeller's storage holds {self._storage[0].shape[0]} draws; {need} came")
            cap = self._storage[0].shape[0]
        else:
            cap = max(need, 2 * self._sizes.shape[0] if self._sizes is not None else 0)
        c = self.n_components
        fresh = {"_sizes": np.zeros((cap, c), dtype=np.int32), "_n_occupied": np.empty(cap, dtype=np.int64),
                 "_log_posterior": np.empty(cap)}
        if self._storage is None:
            fresh.update(_pi=np.empty((cap, c)), _profiles=np.empty((cap, c, n_col)))
        for name, new in fresh.items():
            old = getattr(self, name)
            if old is not None:
                new[:self._n] = old[:self._n]
            setattr(self, name, new)

    def __call__(self, block) -> None:
        """Consume one kept block (attributes ``start, z, pi, profiles, n_occupied, log_posterior``; with
        ``storage``, the block's draws are ``storage[start:start + m]``)."""
        z = np.asarray(block.z)
        m = z.shape[0]
        if m == 0:
            return
        if z.shape[1] != self.n_rows:
            raise ValueError(f"block allocations have {z.shape[1]} rows, expected {self.n_rows}")
        if self.pivot is None:
            self.pivot = z[int(np.argmax(np.asarray(block.log_posterior)))].astype(np.int64)
        z = np.ascontiguousarray(z)
        perms = best_permutations(confusion_matrices(z, self.pivot, self.n_components))
        at, end = self._n, self._n + m
        if self._storage is not None:
            if int(block.start) != at:
                raise ValueError(f"block of draws {block.start}.. came after {at} draws")
            self._reserve(m, self._storage[1].shape[2])
        else:                                   # the block's draws copied into the relabeller's own buffers
            self._reserve(m, np.shape(block.profiles)[2])
            self._pi[at:end] = block.pi
            self._profiles[at:end] = block.profiles
        _permute_in_place(self._pi, self._profiles, perms, at)
        _accumulate_relabelled(z, perms, self.counts, self._sizes[at:end])
        if self.psm is not None:
            self._accumulate_psm(z)
        self._n_occupied[at:end] = block.n_occupied
        self._log_posterior[at:end] = block.log_posterior
        self._n = end

    def _accumulate_psm(self, z: np.ndarray) -> None:
        # Co-clustering is label invariant: sum over draws of one-hot(z_t) one-hot(z_t)^T. Stacking the
        # one-hot matrices of several draws side by side turns the sum into one BLAS product.
        n, c = self.n_rows, self.n_components
        step = max(1, _CHUNK_ELEMENTS // (n * c))
        for s in range(0, z.shape[0], step):
            zz = z[s:s + step].astype(np.int64)
            onehot = np.zeros((n, zz.shape[0] * c), dtype=np.float32)
            onehot[np.arange(n)[None, :], (np.arange(zz.shape[0])[:, None] * c + zz)] = 1.0
            self.psm += onehot @ onehot.T

    def draws_so_far(self) -> tuple[np.ndarray, np.ndarray]:
        """Log posterior (T,) and relabelled weights (T, C+) of the draws consumed so far."""
        if self._n == 0:
            return np.empty(0), np.empty((0, self.n_components))
        return self._log_posterior[:self._n], self._pi[:self._n]

    def result(self, seconds: float = 0.0, n_iter: int = 0, converged: bool | None = None
               ) -> RelabelledChain:
        """The relabelled chain (raises if no draw was kept)."""
        if self.pivot is None:
            raise ValueError("no kept draw reached the relabeller: check burn_in, thin and n_iter")
        n = self._n
        return RelabelledChain(pi=self._pi[:n], profiles=self._profiles[:n], n_occupied=self._n_occupied[:n],
                               log_posterior=self._log_posterior[:n], counts=self.counts, pivot=self.pivot,
                               psm=self.psm, sizes=self._sizes[:n], seconds=float(seconds), n_iter=int(n_iter),
                               converged=converged)


def align_chains(chains: list[RelabelledChain]) -> list[RelabelledChain]:
    """Align chains 2.. to chain 1 by a Hungarian assignment on the overlap of their count tables.

    ``overlap[c, k] = sum_i counts_j[i, c] counts_1[i, k]``: how often rows sit together in component c of
    chain j and component k of chain 1. Maximising it is the chain-level analogue of the per-draw pivot
    assignment; it is computed with one (C+ x n) @ (n x C+) product (float64, exact for these counts).
    """
    if not chains:
        return []
    ref = chains[0].counts.astype(np.float64)
    out = [chains[0]]
    for ch in chains[1:]:
        overlap = ch.counts.astype(np.float64).T @ ref
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        perm = np.empty(ref.shape[1], dtype=np.int64)
        perm[rows] = cols
        out.append(ch.permuted(perm))
    return out
