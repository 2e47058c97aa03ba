"""The result of matching (``Matching``) and the matched draws it induces (``MatchedDraws``).

method.md section 5.5: for global cluster c and silo s with local clusters L = {l : m^s(l) = c},
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


@dataclass(frozen=True)
class MatchedDraws:
    """Per-silo draws aligned on the global clusters: the input of aggregation.

    Attributes
    ----------
    pi : tuple of ndarray, each of shape (T_s, C)
        Weights of the global clusters in silo s (0 where absent); rows sum to 1.
    profiles : tuple of ndarray, each of shape (T_s, C, P)
        Profiles in silo s (rows of absent clusters are undefined and set to the uniform profile).
    present : ndarray of shape (S, C), bool
    sizes : ndarray of shape (S, C), int
        Members of each global cluster in each silo (local partition propagated).
    counts : ndarray of shape (S, C, P), int, or None
        Matched contingency tables (None if some silo withheld its table).
    n_rows : ndarray of shape (S,), int
    n_modalities : tuple of int
    silos : tuple of str
    """

    pi: tuple[np.ndarray, ...]
    profiles: tuple[np.ndarray, ...]
    present: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray | None
    n_rows: np.ndarray
    n_modalities: tuple[int, ...]
    silos: tuple[str, ...]

    @property
    def n_silos(self) -> int:
        return len(self.pi)

    @property
    def n_global(self) -> int:
        return int(self.present.shape[1])


def build_matched_draws(summaries, matching: Matching) -> MatchedDraws:
    """Assemble ``MatchedDraws`` from silo summaries and a matching (method.md section 5.5)."""
    if len(summaries) != len(matching.assignment):
        raise InconsistentSiloSummaries("one summary per silo of the matching is needed")
    n_mod = summaries[0].n_modalities
    offsets = profile_offsets(n_mod)
    c = matching.n_global
    uniform = np.concatenate([np.full(k, 1.0 / k) for k in n_mod])
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
        t = summ.n_draws
        # one-hot map local -> global, so merging is a matrix product (no loop over draws)
        onehot = np.zeros((summ.n_clusters, c))
        onehot[np.arange(summ.n_clusters), assign] = 1.0
        pi = summ.pi_draws @ onehot                                           # (T, C)
        weighted = summ.pi_draws[:, :, None] * summ.profile_draws            # (T, K, P)
        num = np.einsum("tkp,kc->tcp", weighted, onehot)
        with np.errstate(invalid="ignore", divide="ignore"):
            prof = num / pi[:, :, None]
        absent = ~np.isin(np.arange(c), assign)
        prof[:, absent, :] = uniform
        # a present cluster with pi exactly 0 in a draw (underflow) falls back to the plain average
        zero = (pi == 0) & ~absent[None, :]
        if np.any(zero):
            plain = np.einsum("tkp,kc->tcp", summ.profile_draws, onehot) / np.maximum(
                onehot.sum(axis=0), 1)[None, :, None]
            prof[zero] = plain[zero]
        pis.append(pi)
        profs.append(prof)
        np.add.at(sizes[s], assign, summ.cluster_sizes)
        if counts is not None:
            np.add.at(counts[s], assign, summ.counts)
        del t
    return MatchedDraws(pi=tuple(pis), profiles=tuple(profs), present=matching.presence(), sizes=sizes,
                        counts=counts, n_rows=np.array([s.n_rows for s in summaries]), n_modalities=n_mod,
                        silos=tuple(s.silo for s in summaries))
