"""Calibrated Ball matching (the default): Ball's graph of close clusters, with a closeness calibrated by
each local cluster's posterior uncertainty and the dimension (``vcmc.closeness``).

The paper's Ball matching (``vcmc.matching.ball``) links two clusters whose median profiles lie within a
radius ``(log n_s / n_s)^(1/4)`` of each other. That radius does not grow with the number of coordinates
``D = sum_q (K^q - 1)``, while the distance between two noisy estimates of one profile grows like
``sqrt(D)``: with 20 variables of 4 modalities (D = 60) almost nothing is linked across silos and most
global clusters are single-silo copies. The paper asks for a better-founded closeness based on the
posterior distributions rather than on medians (its section 7.3.1); this is one:

1. every local cluster's posterior mean and variance of its matching coordinates, from its draws;
2. link two clusters when ``T(a, b) <= chi2_D.ppf(level)`` (the test "could these two be one profile,
   given how well each silo knows it");
3. group linked clusters by single linkage in increasing ``T`` without ever joining two clusters of one
   silo that are not themselves linked (``vcmc.closeness.constrained_groups``): clusters of one silo are
   merged only when that silo's own posterior cannot tell them apart, as Ball merges local duplicates.

Global clusters are numbered canonically (``matching_from_groups``), so the result does not depend on the
order of the silos nor on their local labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vcmc.closeness import (
    DEFAULT_LEVEL,
    closeness_statistic,
    closeness_threshold,
    constrained_groups,
)
from vcmc.exceptions import ConfigError
from vcmc.family import CATEGORICAL, parameter_moments
from vcmc.matching.coordinates import check_summaries, matching_from_groups
from vcmc.matching.types import Matching
from vcmc.protocol import SiloSummary

__all__ = ["cluster_closeness", "match_calibrated"]


def _check_level(level: float, owner: str) -> float:
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.5 <= float(level) < 1.0:
        raise ConfigError(f"The 'level' parameter of {owner} must be a float in [0.5, 1). Got {level!r} "
                          "instead.")
    return float(level)


def _moments(summary: SiloSummary, n_mod) -> tuple[np.ndarray, np.ndarray]:
    """The closeness coordinates of a silo's clusters: the profiles' and, with Gaussian items, their means' and log
    variances' (docs/design.md §17.6)."""
    if summary.gaussian_draws is None:
        return CATEGORICAL.moments(summary.profile_draws, n_mod)
    draws = np.concatenate([summary.profile_draws, summary.gaussian_draws], axis=2)
    return parameter_moments(draws, n_mod, summary.n_gaussian)


def cluster_closeness(summaries: Sequence[SiloSummary]) -> dict:
    """The closeness statistic between every pair of local clusters of all silos.

    Returns
    -------
    dict
        ``statistic`` (N, N) with N the local clusters of all silos stacked silo after silo,
        ``silo_index`` and ``local_index`` (N,), ``n_coordinates`` (D) and ``tie_rank`` (N,): the rank of
        each cluster by (silo name, local index), used to break ties independently of the silos' order.
    """
    n_mod = check_summaries(summaries)
    moments = [_moments(s, n_mod) for s in summaries]
    mean = np.concatenate([m for m, _ in moments])
    var = np.concatenate([v for _, v in moments])
    silo_index = np.concatenate([np.full(s.n_clusters, i) for i, s in enumerate(summaries)]).astype(np.int64)
    local_index = np.concatenate([np.arange(s.n_clusters) for s in summaries]).astype(np.int64)
    names = [summaries[i].silo for i in silo_index]
    order = sorted(range(silo_index.size), key=lambda j: (names[j], int(local_index[j])))
    tie_rank = np.empty(silo_index.size, dtype=np.int64)
    tie_rank[order] = np.arange(silo_index.size)
    return {"statistic": closeness_statistic(mean, var), "silo_index": silo_index, "local_index": local_index,
            "n_coordinates": int(mean.shape[1]), "tie_rank": tie_rank}


def match_calibrated(summaries: Sequence[SiloSummary], *, level: float = DEFAULT_LEVEL) -> Matching:
    """Match local clusters by a chi-square closeness test on their posteriors (module docstring).

    Parameters
    ----------
    summaries : sequence of SiloSummary
        One per silo (at least 2 draws each, for the posterior variances).
    level : float, default 0.999999
        Quantile of the chi-square test: two clusters are close when ``T <= chi2_D.ppf(level)``. Higher
        links more (fewer global clusters); see ``vcmc.closeness.DEFAULT_LEVEL`` for the choice.

    Returns
    -------
    Matching
        ``details`` holds ``level``, ``threshold``, ``n_coordinates``, ``n_edges`` (close pairs across
        silos), ``n_blocked`` (close pairs left apart by the same-silo constraint) and
        ``merged_within_silo`` (local clusters merged into another of their own silo).
    """
    level = _check_level(level, "match_calibrated")
    close = cluster_closeness(summaries)
    stat, silo_index = close["statistic"], close["silo_index"]
    threshold = closeness_threshold(close["n_coordinates"], level)
    group = constrained_groups(stat, threshold, silo_index, tie_rank=close["tie_rank"])
    linked = stat <= threshold
    across = silo_index[:, None] != silo_index[None, :]
    same_group = group[:, None] == group[None, :]
    merged = sum(int(np.sum(silo_index == i)) - np.unique(group[silo_index == i]).size
                 for i in range(len(summaries)))
    details = {"level": level, "threshold": threshold, "n_coordinates": close["n_coordinates"],
               "n_edges": int(np.triu(linked & across, 1).sum()),
               "n_blocked": int(np.triu(linked & across & ~same_group, 1).sum()),
               "merged_within_silo": int(merged)}
    return matching_from_groups(summaries, group, silo_index, close["local_index"], method="calibrated",
                                details=details)
