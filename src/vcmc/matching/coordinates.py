"""Matching coordinates, distances and the helpers shared by the three matching algorithms.

docs/design.md §5.1: the coordinate of local cluster (s, l) is the concatenation over variables of the
first ``K^q - 1`` components of its median profile (the last one is implied by the simplex), and the
distance is Euclidean in ``R^D``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.spatial.distance import cdist

from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.matching.types import Matching
from vcmc.model import profile_offsets
from vcmc.protocol import SiloSummary

__all__ = ["coordinates", "stacked_coordinates", "distance_matrix", "default_reference",
           "resolve_reference", "check_summaries", "matching_from_groups"]


def coordinates(profiles: np.ndarray, n_modalities) -> np.ndarray:
    """Matching coordinates of flat profiles (docs/design.md §5.1).

    Parameters
    ----------
    profiles : ndarray of shape (..., P)
        Flat profiles, one variable block of ``K^q`` probabilities after the other.
    n_modalities : sequence of int

    Returns
    -------
    ndarray of shape (..., D)
        ``D = sum_q (K^q - 1)``: each block without its last component.
    """
    offsets = profile_offsets(n_modalities)
    keep = np.ones(int(offsets[-1]), dtype=bool)
    keep[offsets[1:] - 1] = False
    return np.asarray(profiles, dtype=np.float64)[..., keep]


def check_summaries(summaries: Sequence[SiloSummary]) -> tuple[int, ...]:
    """Check that the summaries can be matched together; return their shared ``n_modalities``."""
    if len(summaries) == 0:
        raise InconsistentSiloSummaries("matching needs at least one silo summary; got none")
    n_mod = summaries[0].n_modalities
    names = [s.silo for s in summaries]
    for s in summaries[1:]:
        if s.n_modalities != n_mod:
            raise InconsistentSiloSummaries(
                f"silo {s.silo!r} uses modalities {s.n_modalities}, silo {summaries[0].silo!r} uses "
                f"{n_mod}: all silos must share one schema")
        if s.schema_fingerprint != summaries[0].schema_fingerprint:
            raise InconsistentSiloSummaries(
                f"silo {s.silo!r} has schema fingerprint {s.schema_fingerprint!r}, silo "
                f"{summaries[0].silo!r} has {summaries[0].schema_fingerprint!r}: all silos must share one "
                "schema")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InconsistentSiloSummaries(f"silo names must be unique; repeated: {dup}")
    return n_mod


def stacked_coordinates(summaries: Sequence[SiloSummary]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coordinates of every (silo, local cluster), stacked silo after silo.

    Returns
    -------
    y : ndarray of shape (N, D)
    silo_index : ndarray of shape (N,), int
    local_index : ndarray of shape (N,), int
    """
    n_mod = check_summaries(summaries)
    y = np.concatenate([coordinates(s.profile_estimate, n_mod) for s in summaries], axis=0)
    silo_index = np.concatenate([np.full(s.n_clusters, i) for i, s in enumerate(summaries)])
    local_index = np.concatenate([np.arange(s.n_clusters) for s in summaries])
    return y, silo_index.astype(np.int64), local_index.astype(np.int64)


def distance_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances between rows of two coordinate arrays (docs/design.md §5.1)."""
    return cdist(np.atleast_2d(a), np.atleast_2d(b), metric="euclidean")


def default_reference(summaries: Sequence[SiloSummary]) -> int:
    """Index of the default reference silo: most local clusters, ties by most rows, then by name.

    The name tie-break makes the choice independent of the order in which silos are listed.
    """
    key = [(-s.n_clusters, -s.n_rows, s.silo) for s in summaries]
    return int(min(range(len(summaries)), key=key.__getitem__))


def resolve_reference(summaries: Sequence[SiloSummary], reference: str | int | None) -> int:
    """Index of the reference silo: the named one, or the default; raises ``ConfigError`` if unknown."""
    if reference is None:
        return default_reference(summaries)
    names = [s.silo for s in summaries]
    if isinstance(reference, str):
        if reference not in names:
            raise ConfigError(f"The 'reference' parameter of the matching must be one of the silo names "
                              f"{names}. Got {reference!r} instead.")
        return names.index(reference)
    raise ConfigError(f"The 'reference' parameter of the matching must be a silo name (str) or None. "
                      f"Got {reference!r} instead.")


def matching_from_groups(summaries: Sequence[SiloSummary], group: np.ndarray, silo_index: np.ndarray,
                         local_index: np.ndarray, *, method: str, total_cost: float | None = None,
                         details: dict | None = None) -> Matching:
    """Build a ``Matching`` from an arbitrary group id per (silo, local cluster), numbered canonically.

    Global clusters are numbered by decreasing total size (members over all silos); ties are broken by the
    size-weighted mean coordinate of the group (lexicographic, rounded to 1e-9); only groups identical in
    both keep their order of first appearance. The numbering therefore does not depend on the order in
    which silos are listed nor on the local labels, so matchings can be compared directly.
    """
    n_mod = summaries[0].n_modalities
    group = np.asarray(group, dtype=np.int64)
    _, dense = np.unique(group, return_inverse=True)
    n_groups = int(dense.max()) + 1 if dense.size else 0
    sizes_node = np.concatenate([s.cluster_sizes for s in summaries]).astype(np.float64)
    y = np.concatenate([coordinates(s.profile_estimate, n_mod) for s in summaries], axis=0)
    total = np.bincount(dense, weights=sizes_node, minlength=n_groups)
    w = np.maximum(sizes_node, 1e-12)
    wsum = np.bincount(dense, weights=w, minlength=n_groups)
    mean = np.stack([np.bincount(dense, weights=w * y[:, d], minlength=n_groups) for d in range(y.shape[1])],
                    axis=1) / wsum[:, None] if y.shape[1] else np.zeros((n_groups, 0))
    mean = np.round(mean, 9)
    # lexsort: last key is primary -> (-total size, mean coordinates...)
    keys = [mean[:, d] for d in range(mean.shape[1] - 1, -1, -1)] + [-np.round(total, 9)]
    order = np.lexsort(keys)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[order] = np.arange(n_groups)
    glob = rank[dense]
    assignment = []
    for i in range(len(summaries)):
        a = np.empty(summaries[i].n_clusters, dtype=np.int64)
        sel = silo_index == i
        a[local_index[sel]] = glob[sel]
        assignment.append(a)
    return Matching(assignment=tuple(assignment), n_global=n_groups, method=method,
                    silos=tuple(s.silo for s in summaries), total_cost=total_cost, details=details or {})
