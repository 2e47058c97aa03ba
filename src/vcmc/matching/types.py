"""The result of matching (``Matching``) and the matched draws it induces (``MatchedDraws``).

docs/design.md §5.5: for global cluster c and silo s with local clusters L = {l : m^s(l) = c},
pi^s_c = sum_{l in L} pi_l, p^s_c = sum_l pi_l p_l / sum_l pi_l (merged clusters combine exactly),
contingency rows are summed; a cluster absent from a silo is a structural zero (the silo is left out of
that block's weight simplex).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.model import profile_offsets


@dataclass(frozen=True)
class Matching:
    """For every (silo, local cluster) its global cluster.

    Attributes
    ----------
    assignment : tuple of ndarray
        ``assignment[s][l]`` is the global cluster (0-based) of local cluster ``l`` of silo ``s``.
    n_global : int
        Number of global clusters C.
    method : str
        Name of the algorithm that produced it.
    silos : tuple of str
        Silo names, in the order of ``assignment``.
    total_cost : float or None
        Objective value where the method has one (min-divergence: summed divergence).
    details : dict
        Method-specific diagnostics (e.g. the reference silo, the Ball radius per silo).
    """

    assignment: tuple[np.ndarray, ...]
    n_global: int
    method: str
    silos: tuple[str, ...]
    total_cost: float | None = None
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "assignment", tuple(np.asarray(a, dtype=np.int64) for a in self.assignment))
        if len(self.assignment) != len(self.silos):
            raise ValueError("Matching needs one assignment array per silo")
        used = np.concatenate([a for a in self.assignment]) if self.assignment else np.array([], int)
        if used.size and (used.min() < 0 or used.max() >= self.n_global):
            raise ValueError(f"global cluster indices must lie in [0, {self.n_global})")
        if self.n_global and np.unique(used).size != self.n_global:
            raise ValueError("every global cluster must receive at least one local cluster")

    def presence(self) -> np.ndarray:
        """Boolean (S, C): global cluster c has at least one local cluster in silo s."""
        out = np.zeros((len(self.assignment), self.n_global), dtype=bool)
        for s, a in enumerate(self.assignment):
            out[s, a] = True
        return out

    def relabel(self, silo_index: int, local_labels: np.ndarray) -> np.ndarray:
        """Global labels of a silo's rows from their local labels (done inside the silo)."""
        return self.assignment[silo_index][np.asarray(local_labels)]


class MatchedProfiles:
    """One silo's matched profile draws ``(T, C, P)``, computed from its local draws when indexed.

    Holding the dense array of every silo costs ``S T C P`` numbers (30 silos x 5,000 draws x 136 global
    clusters x 160 columns is 26 GB in float64) while almost all of it is either a copy of the local draws
    (a global cluster fed by one local cluster) or the uniform filler of an absent cluster. This view keeps
    a reference to the silo's local draws and builds the requested rows on demand, with exactly the values
    of docs/design.md §5.5: the local profile itself for a global cluster fed by one local cluster,
    ``sum_l pi_l p_l / sum_l pi_l`` for merged clusters (their plain average where that weight is exactly
    0), the uniform profile for an absent cluster.

    It behaves like a read-only array for what the library does with matched draws: ``shape``, ``len``,
    indexing (``prof[rows]``, ``prof[rows, clusters]``, ...), ``np.asarray(prof)`` (materialises it) and
    ``copy()``. ``take_clusters`` gathers selected rows and clusters without building the dense rows.
    """

    ndim = 3

    def __init__(self, pi_local: np.ndarray, profile_local: np.ndarray, assignment: np.ndarray,
                 n_global: int, n_modalities):
        self._pi = pi_local
        self._prof = profile_local
        self.n_modalities = tuple(int(k) for k in n_modalities)
        assignment = np.asarray(assignment, dtype=np.int64)
        n_draws, n_local, p = profile_local.shape
        self.shape = (int(n_draws), int(n_global), int(p))
        self.dtype = np.dtype(np.float64)
        self.uniform = np.repeat(1.0 / np.asarray(self.n_modalities, dtype=np.float64), self.n_modalities)
        members = np.bincount(assignment, minlength=n_global)
        # local cluster of each global cluster: >= 0 when it is the only one, -1 absent, -2 merged
        self._local_of = np.where(members == 0, -1, -2).astype(np.int64)
        single = members[assignment] == 1
        self._local_of[assignment[single]] = np.flatnonzero(single)
        self._merged = {int(c): np.flatnonzero(assignment == c) for c in np.flatnonzero(members > 1)}
        self.present = members > 0

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"MatchedProfiles(shape={self.shape}, merged={sorted(self._merged)})"

    def take_clusters(self, rows, clusters=None, dtype=np.float64) -> np.ndarray:
        """Draws ``rows`` of the global clusters ``clusters`` (default all), shape (len(rows), len(clusters), P)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        clusters = np.arange(self.shape[1]) if clusters is None else np.asarray(clusters, dtype=np.int64)
        loc = self._local_of[clusters]
        single = np.flatnonzero(loc >= 0)
        if single.size == clusters.size:            # the common case: one gather, no arithmetic
            return np.asarray(self._prof[rows[:, None], loc[None, :]], dtype=dtype)
        out = np.empty((rows.size, clusters.size, self.shape[2]), dtype=dtype)
        if single.size:
            out[:, single] = self._prof[rows[:, None], loc[single][None, :]]
        out[:, loc == -1] = self.uniform
        for j in np.flatnonzero(loc == -2):         # a loop over the few merged clusters
            local = self._merged[int(clusters[j])]
            w = np.asarray(self._pi[rows[:, None], local[None, :]], dtype=np.float64)       # (M, L)
            prof = np.asarray(self._prof[rows[:, None], local[None, :]], dtype=np.float64)  # (M, L, P)
            tot = w.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                merged = np.einsum("ml,mlp->mp", w, prof) / tot[:, None]
            zero = tot == 0
            if np.any(zero):
                # weight exactly 0 in a draw (underflow): the plain average of the merged profiles
                merged[zero] = prof[zero].mean(axis=1)
            out[:, j] = merged
        return out

    def direct_local(self, clusters):
        """``(local draws (T, K, P), local index of each cluster)`` when every cluster in ``clusters`` is fed
        by exactly one local cluster (its draws are then the local ones, gathered as they are); else None."""
        loc = self._local_of[np.asarray(clusters, dtype=np.int64)]
        return (self._prof, loc) if np.all(loc >= 0) else None

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        rows = np.arange(self.shape[0])[key[0]]
        rest = key[1:]
        scalar = np.ndim(rows) == 0
        if rest and not isinstance(rest[0], type(Ellipsis)):
            clusters = np.arange(self.shape[1])[rest[0]]
            one_cluster = np.ndim(clusters) == 0
            out = self.take_clusters(np.atleast_1d(rows), np.atleast_1d(clusters))
            out = out.reshape(out.shape[:1] + ((out.shape[2],) if one_cluster else out.shape[1:]))
            rest = rest[1:]
        else:
            out = self.take_clusters(np.atleast_1d(rows))
            rest = rest[1:] if rest else rest
        if rows.ndim > 1:
            out = out.reshape(rows.shape + out.shape[1:])
        if scalar:
            out = out[0]
        return out[(Ellipsis, *rest)] if rest else out

    def __array__(self, dtype=None, copy=None):
        out = self.take_clusters(np.arange(self.shape[0]))
        return out if dtype is None else out.astype(dtype, copy=False)

    def copy(self) -> np.ndarray:
        """The dense ``(T, C, P)`` array."""
        return np.asarray(self)


def take_profiles(profiles, rows, clusters, dtype=np.float64) -> np.ndarray:
    """Rows ``rows`` and clusters ``clusters`` of one silo's matched profiles (dense array or view)."""
    if isinstance(profiles, MatchedProfiles):
        return profiles.take_clusters(rows, clusters, dtype)
    rows = np.asarray(rows, dtype=np.int64)
    return np.asarray(profiles[rows[:, None], np.asarray(clusters, dtype=np.int64)[None, :]], dtype=dtype)


@dataclass(frozen=True)
class MatchedDraws:
    """Per-silo draws aligned on the global clusters: the input of aggregation.

    Attributes
    ----------
    pi : tuple of ndarray, each of shape (T_s, C)
        Weights of the global clusters in silo s (0 where absent); rows sum to 1.
    profiles : tuple of ndarray or MatchedProfiles, each of shape (T_s, C, P)
        Profiles in silo s (rows of absent clusters are undefined and set to the uniform profile).
        ``build_matched_draws`` returns ``MatchedProfiles`` views on the local draws, which compute the
        requested draws on demand instead of holding ``T C P`` numbers per silo.
    present : ndarray of shape (S, C), bool
    sizes : ndarray of shape (S, C), int
        Members of each global cluster in each silo (local partition propagated).
    counts : ndarray of shape (S, C, P), int, or None
        Matched contingency tables (None if some silo withheld its table).
    n_rows : ndarray of shape (S,), int
    n_modalities : tuple of int
    silos : tuple of str
    gaussian : tuple of ndarray, each of shape (T_s, C, 2G), or None
        With Gaussian items, their matched means and variances (``vcmc.matching.gaussian``; NaN where absent).
    """

    pi: tuple[np.ndarray, ...]
    profiles: tuple[np.ndarray | MatchedProfiles, ...]
    present: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray | None
    n_rows: np.ndarray
    n_modalities: tuple[int, ...]
    silos: tuple[str, ...]
    gaussian: tuple[np.ndarray, ...] | None = None

    @property
    def n_silos(self) -> int:
        return len(self.pi)

    @property
    def n_global(self) -> int:
        return int(self.present.shape[1])


def build_matched_draws(summaries, matching: Matching) -> MatchedDraws:
    """Assemble ``MatchedDraws`` from silo summaries and a matching (docs/design.md §5.5).

    The weights ``pi`` are computed (T x C numbers per silo); the profiles are ``MatchedProfiles`` views on
    the summaries' draws, so no ``(T, C, P)`` array is built.
    """
    if len(summaries) != len(matching.assignment):
        raise InconsistentSiloSummaries("one summary per silo of the matching is needed")
    n_mod = summaries[0].n_modalities
    offsets = profile_offsets(n_mod)
    c = matching.n_global
    pis, profs = [], []
    sizes = np.zeros((len(summaries), c), dtype=np.int64)
    have_counts = all(s.counts is not None for s in summaries)
    counts = np.zeros((len(summaries), c, int(offsets[-1])), dtype=np.int64) if have_counts else None
    for s, (summ, assign) in enumerate(zip(summaries, matching.assignment, strict=True)):
        if summ.n_modalities != n_mod:
            raise InconsistentSiloSummaries(f"silo {summ.silo!r} uses another schema")
        if assign.shape != (summ.n_clusters,):
            raise InconsistentSiloSummaries(f"matching of silo {summ.silo!r} has {assign.shape[0]} local "
                                            f"clusters, its summary {summ.n_clusters}")
        # merged local clusters add up their weights: a scatter-add over the local clusters
        pi = np.zeros((summ.n_draws, c))
        np.add.at(pi.T, assign, np.asarray(summ.pi_draws, dtype=np.float64).T)
        pis.append(pi)
        profs.append(MatchedProfiles(summ.pi_draws, summ.profile_draws, assign, c, n_mod))
        np.add.at(sizes[s], assign, summ.cluster_sizes)
        if counts is not None:
            np.add.at(counts[s], assign, summ.counts)
    return MatchedDraws(pi=tuple(pis), profiles=tuple(profs), present=matching.presence(), sizes=sizes,
                        counts=counts, n_rows=np.array([s.n_rows for s in summaries]), n_modalities=n_mod,
                        silos=tuple(s.silo for s in summaries))
