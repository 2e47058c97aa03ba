"""Ball matching, the paper's Algorithm 2 (docs/design.md §5.4).

Every local cluster (s, l) gets a ball of radius ``r_s`` around its coordinate; two clusters are linked
when each lies in the other's ball (``dist <= min(r_a, r_b)``), same-silo pairs included, and every
connected component of that graph is one global cluster. Clusters of one silo in the same component are
merged (many-to-one), which absorbs local over-estimation of the number of clusters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from vcmc.exceptions import ConfigError
from vcmc.matching.coordinates import distance_matrix, matching_from_groups, stacked_coordinates
from vcmc.matching.types import Matching
from vcmc.protocol import SiloSummary

__all__ = ["ball_radius", "match_ball"]


def ball_radius(n_rows: int, radius: str | float = "overfitted") -> float:
    """Radius of the ball around a cluster of a silo with ``n_rows`` individuals.

    Parameters
    ----------
    n_rows : int
        n_s, the silo's number of individuals.
    radius : {"overfitted", "finite"} or float
        ``(log n_s / n_s)^(1/4)``, the maximal contraction rate of over-fitted mixtures (Nguyen 2013; Ho and
        Nguyen 2016), ``(log n_s / n_s)^(1/2)`` for a finite mixture, or a fixed positive radius.
    """
    if isinstance(radius, str):
        if radius not in ("overfitted", "finite"):
            raise ConfigError(f"The 'radius' parameter of match_ball must be 'overfitted', 'finite' or a "
                              f"positive float. Got {radius!r} instead.")
        n = int(n_rows)
        if n < 2:
            # log(1)/1 = 0: a one-row silo would get a zero radius; any positive rate needs n >= 2
            raise ConfigError(f"The Ball radius {radius!r} needs a silo of at least 2 rows; got {n}. "
                              "Pass a numeric radius instead.")
        power = 0.25 if radius == "overfitted" else 0.5
        return float((math.log(n) / n) ** power)
    if isinstance(radius, bool) or not isinstance(radius, int | float) or not radius > 0:
        raise ConfigError(f"The 'radius' parameter of match_ball must be 'overfitted', 'finite' or a "
                          f"positive float. Got {radius!r} instead.")
    return float(radius)


def match_ball(summaries: Sequence[SiloSummary], *, radius: str | float = "overfitted") -> Matching:
    """Match local clusters across silos by mutual closeness and connected components (docs/design.md §5.4).

    Parameters
    ----------
    summaries : sequence of SiloSummary
        One per silo; coordinates come from ``profile_estimate`` (docs/design.md §5.1).
    radius : {"overfitted", "finite"} or float, default "overfitted"
        See ``ball_radius``; computed per silo from its ``n_rows``.

    Returns
    -------
    Matching
        ``details`` holds ``radius`` (per silo), ``n_edges`` (pairs mutually close) and
        ``merged_within_silo`` (number of local clusters merged into another of the same silo).
    """
    y, silo_index, local_index = stacked_coordinates(summaries)
    r_silo = np.array([ball_radius(s.n_rows, radius) for s in summaries])
    r = r_silo[silo_index]
    dist = distance_matrix(y, y)
    adjacency = dist <= np.minimum(r[:, None], r[None, :])
    np.fill_diagonal(adjacency, False)
    _, group = connected_components(csr_matrix(adjacency), directed=False)
    # local clusters absorbed by another of their own silo: per silo, clusters minus distinct groups
    merged = sum(int(np.sum(silo_index == i)) - np.unique(group[silo_index == i]).size
                 for i in range(len(summaries)))
    details = {"radius": {s.silo: float(v) for s, v in zip(summaries, r_silo, strict=True)},
               "n_edges": int(adjacency.sum() // 2), "merged_within_silo": int(merged)}
    return matching_from_groups(summaries, group, silo_index, local_index, method="ball", details=details)
