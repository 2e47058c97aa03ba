"""Checks of a matching that flag global clusters which may be matching artefacts.

A matching can fail without any error: with the paper's Ball radius on wide data, every silo finds its
clusters correctly but almost nothing is linked across silos, and the result reports dozens of global
clusters that are single-silo copies of one another. These checks look at the silos' summaries and the
matching for the two signatures of that failure and say, in the result, which clusters are doubtful, what
the evidence is and what to try:

``single-silo-close``
    A global cluster present in one silo only while a local cluster of another silo is nearly close to it
    by the closeness test of ``vcmc.closeness`` (``T <= chi2_D.ppf(doubt_level)``, a looser quantile than
    the matching's): it may be a piece of that other cluster which the matching left apart (for calibrated
    matching, because the silo's own posterior keeps it apart from the cluster it would join, or because
    the two estimates differ by slightly more than their posteriors allow).
``similar-silos-disjoint``
    Two silos whose overall distributions of every variable are indistinguishable (the same test on the
    silos' marginal modality frequencies) but which share fewer than half of their global clusters.
``resolution-grows-with-size``
    Not an artefact of the matching but a limit of the silos: the number of local clusters rises with the
    silo's size (one-sided Spearman test over at least ``MIN_SILOS_TREND`` silos), so the smaller silos
    probably cannot resolve every cluster and the global partition may miss or merge clusters that pooled
    data would separate. On the generalisation suite it fires where that happens (30 silos of 300-3,000
    rows, sparse conditions: Spearman 0.89) and not where clusters are truly regional (docs/results/
    generalisation/). The global clusters found only in silos larger than every silo that lacks them are
    named.

Only summaries are used (no row-level data): the checks run on the server for every matching method.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vcmc.closeness import DEFAULT_LEVEL, closeness_statistic, closeness_threshold, coordinate_columns
from vcmc.matching.calibrated import cluster_closeness
from vcmc.matching.types import Matching
from vcmc.protocol import SiloSummary

__all__ = ["matching_checks", "describe_check", "summarise_checks"]

#: Silos sharing fewer than this fraction of their global clusters (Jaccard index) are "disjoint".
SHARED_FRACTION = 0.5
#: A doubt is raised a thousand times further into the tail than the matching's own level.
DOUBT_FACTOR = 1e-3
_MAX_PAIRS_REPORTED = 5
#: The size trend of local resolution is tested with at least this many silos, and reported when the rank
#: correlation is at least ``TREND_RHO`` with one-sided p-value at most ``TREND_P``.
MIN_SILOS_TREND = 5
TREND_RHO = 0.5
TREND_P = 0.05


def _advice(method: str) -> str:
    if method == "calibrated":
        return ("a longer chain (--iterations) gives the silos sharper posteriors; compare with "
                "--matching min-divergence")
    return "try the default --matching calibrated (or min-divergence)"


def _single_silo_close(summaries, matching, close, threshold) -> list[dict]:
    stat, silo_index, local_index = close["statistic"], close["silo_index"], close["local_index"]
    glob = np.concatenate([np.asarray(a) for a in matching.assignment])
    presence = matching.presence()
    out = []
    for c in np.flatnonzero(presence.sum(axis=0) == 1):
        s = int(np.flatnonzero(presence[:, c])[0])
        rows = np.flatnonzero(glob == c)
        others = np.flatnonzero(silo_index != s)
        if others.size == 0:
            continue
        sub = stat[np.ix_(rows, others)]
        i, j = np.unravel_index(int(np.argmin(sub)), sub.shape)
        t = float(sub[i, j])
        if t > threshold:
            continue
        near = int(others[j])
        size = int(sum(summaries[s].cluster_sizes[local_index[r]] for r in rows))
        out.append({"kind": "single-silo-close", "cluster": int(c) + 1, "silo": summaries[s].silo,
                    "size": size, "close_silo": summaries[int(silo_index[near])].silo,
                    "close_cluster": int(glob[near]) + 1, "statistic": t, "threshold": float(threshold)})
    return out


def _marginal_moments(summ: SiloSummary, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean of the silo's overall modality frequencies and their sampling variance."""
    freq = np.einsum("tk,tkp->p", summ.pi_draws, summ.profile_draws) / summ.n_draws
    mean = freq[keep]
    return mean, mean * (1.0 - mean) / max(summ.n_rows, 1)


def _similar_silos_disjoint(summaries, matching, level) -> list[dict]:
    if len(summaries) < 2:
        return []
    keep = coordinate_columns(summaries[0].n_modalities)
    moments = [_marginal_moments(s, keep) for s in summaries]
    mean = np.stack([m for m, _ in moments])
    var = np.stack([v for _, v in moments])
    stat = closeness_statistic(mean, var)
    threshold = closeness_threshold(int(keep.sum()), level)
    presence = matching.presence()
    out = []
    for a in range(len(summaries)):
        for b in range(a + 1, len(summaries)):
            if stat[a, b] > threshold:
                continue
            union = int(np.sum(presence[a] | presence[b]))
            shared = int(np.sum(presence[a] & presence[b]))
            if union and shared / union < SHARED_FRACTION:
                out.append({"kind": "similar-silos-disjoint", "silos": [summaries[a].silo, summaries[b].silo],
                            "shared": shared, "union": union, "statistic": float(stat[a, b]),
                            "threshold": float(threshold)})
    return out


def _resolution_grows_with_size(summaries, matching) -> list[dict]:
    from scipy.stats import spearmanr

    if len(summaries) < MIN_SILOS_TREND:
        return []
    sizes = np.array([s.n_rows for s in summaries], dtype=np.float64)
    local_k = np.array([s.n_clusters for s in summaries], dtype=np.float64)
    if np.ptp(sizes) == 0 or np.ptp(local_k) == 0:
        return []
    test = spearmanr(sizes, local_k, alternative="greater")
    rho, p = float(test.statistic), float(test.pvalue)
    if not (rho >= TREND_RHO and p <= TREND_P):
        return []
    presence = matching.presence()
    larger_only = []
    for c in range(presence.shape[1]):
        have, lack = sizes[presence[:, c]], sizes[~presence[:, c]]
        if have.size and lack.size >= 2 and have.min() > lack.max():
            larger_only.append({"cluster": c + 1, "min_rows": int(have.min()), "n_silos": int(have.size)})
    return [{"kind": "resolution-grows-with-size", "spearman": rho, "p_value": p, "n_silos": len(summaries),
             "local_clusters": {s.silo: s.n_clusters for s in summaries}, "larger_silos_only": larger_only}]


def matching_checks(summaries: Sequence[SiloSummary], matching: Matching, *,
                    level: float = DEFAULT_LEVEL) -> list[dict]:
    """Evidence that some global clusters may be matching artefacts (module docstring).

    Parameters
    ----------
    summaries : sequence of SiloSummary
        In the order of ``matching.silos``.
    matching : Matching
    level : float
        Quantile of the closeness test (the calibrated matching's level); single-silo clusters are
        flagged up to the quantile ``1 - (1 - level) * DOUBT_FACTOR``.

    Returns
    -------
    list of dict
        One record per finding, with ``kind``, the clusters or silos concerned and the statistic behind it.
    """
    if len(summaries) < 2 or any(s.n_draws < 2 for s in summaries):
        return []
    close = cluster_closeness(summaries)
    doubt_level = 1.0 - (1.0 - level) * DOUBT_FACTOR
    threshold = closeness_threshold(close["n_coordinates"], doubt_level)
    return _single_silo_close(summaries, matching, close, threshold) + \
        _similar_silos_disjoint(summaries, matching, level) + _resolution_grows_with_size(summaries, matching)


def describe_check(finding: dict, method: str) -> str:
    """One line for the result's warnings and the CLI."""
    if finding["kind"] == "single-silo-close":
        return (f"global cluster {finding['cluster']} ({finding['size']} people) is found in silo "
                f"{finding['silo']!r} only, yet a cluster of silo {finding['close_silo']!r} (part of global "
                f"cluster {finding['close_cluster']}) is nearly indistinguishable from it (closeness "
                f"{finding['statistic']:.1f} <= {finding['threshold']:.1f}): it may be a piece of cluster "
                f"{finding['close_cluster']} left apart by the matching; {_advice(method)}")
    if finding["kind"] == "resolution-grows-with-size":
        named = finding["larger_silos_only"]
        which = ""
        if named:
            which = "; global clusters " + ", ".join(
                f"{c['cluster']} (only in the {c['n_silos']} silo(s) of >= {c['min_rows']} rows)" for c in named[:8])
        return (f"the number of local clusters grows with silo size (Spearman {finding['spearman']:.2f} over "
                f"{finding['n_silos']} silos, p = {finding['p_value']:.1g}): the smaller silos probably cannot "
                f"resolve every cluster, so clusters that pooled data would separate may be missing or merged"
                f"{which}. What to try: larger silos (group small ones, e.g. by region) or "
                f"a check against a pooled fit where that is allowed")
    a, b = finding["silos"]
    return (f"silos {a!r} and {b!r} have the same overall distribution of every variable (closeness "
            f"{finding['statistic']:.1f} <= {finding['threshold']:.1f}) but share only {finding['shared']} "
            f"of their {finding['union']} global clusters: some of those may be matching artefacts; "
            f"{_advice(method)}")


def summarise_checks(findings: list[dict], method: str) -> list[str]:
    """Warning lines: every single-silo finding, and at most a few silo pairs (with their total)."""
    single = [describe_check(f, method) for f in findings
              if f["kind"] in ("single-silo-close", "resolution-grows-with-size")]
    pairs = [f for f in findings if f["kind"] == "similar-silos-disjoint"]
    lines = single + [describe_check(f, method) for f in pairs[:_MAX_PAIRS_REPORTED]]
    if len(pairs) > _MAX_PAIRS_REPORTED:
        lines.append(f"{len(pairs) - _MAX_PAIRS_REPORTED} more pairs of alike silos share few global clusters "
                     "(all listed in diagnostics.matching_checks of result.json)")
    return lines
