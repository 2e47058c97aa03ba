"""Hungarian matching against a reference silo (docs/design.md §5.2).

The reference's local clusters are the global clusters; every other silo is matched one-to-one to them by
the rectangular assignment of minimum summed Euclidean distance between coordinates (docs/design.md §5.1).
Local clusters left over (only when a silo has more clusters than the reference) open new global
clusters. Each silo is matched to the reference alone, so with a fixed reference the result does not
depend on the order in which the other silos are listed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from vcmc.matching.coordinates import (
    check_summaries,
    coordinates,
    distance_matrix,
    matching_from_groups,
    resolve_reference,
)
from vcmc.matching.types import Matching
from vcmc.protocol import SiloSummary

__all__ = ["match_hungarian"]


def match_hungarian(summaries: Sequence[SiloSummary], *, reference: str | None = None) -> Matching:
    """One-to-one matching of every silo's clusters to a reference silo's clusters.

    Parameters
    ----------
    summaries : sequence of SiloSummary
    reference : str or None
        Name of the reference silo. Default: the silo with most local clusters (ties: most rows, then
        smallest name). The paper advises naming a silo known to hold every cluster (docs/design.md §5.6).

    Returns
    -------
    Matching
        ``total_cost`` is the summed distance of the matched pairs; ``details`` holds ``reference`` (its
        name) and ``n_new`` (clusters opened outside the reference).

    Notes
    -----
    Known failure (docs/design.md §5.2): when no silo holds every true cluster, clusters are forced into
    one-to-one pairs and the matching is wrong; the estimated number of clusters is at least the
    reference's.
    """
    n_mod = check_summaries(summaries)
    ref = resolve_reference(summaries, reference)
    y_ref = coordinates(summaries[ref].profile_estimate, n_mod)
    k_ref = summaries[ref].n_clusters
    group_parts, silo_parts, local_parts = [], [], []
    next_group = k_ref
    total = 0.0
    for i, summ in enumerate(summaries):
        g = np.empty(summ.n_clusters, dtype=np.int64)
        if i == ref:
            g[:] = np.arange(k_ref)
        else:
            cost = distance_matrix(y_ref, coordinates(summ.profile_estimate, n_mod))   # (K_ref, K_s)
            rows, cols = linear_sum_assignment(cost)
            total += float(cost[rows, cols].sum())
            g[cols] = rows
            unmatched = np.setdiff1d(np.arange(summ.n_clusters), cols)
            # new global ids; their final numbering is canonical (matching_from_groups), so the
            # provisional ids chosen here do not leak the silo order into the result
            g[unmatched] = next_group + np.arange(unmatched.size)
            next_group += unmatched.size
        group_parts.append(g)
        silo_parts.append(np.full(summ.n_clusters, i))
        local_parts.append(np.arange(summ.n_clusters))
    details = {"reference": summaries[ref].silo, "n_new": int(next_group - k_ref)}
    return matching_from_groups(summaries, np.concatenate(group_parts), np.concatenate(silo_parts),
                                np.concatenate(local_parts), method="hungarian", total_cost=total,
                                details=details)
