"""Clusters against the whole population: the scaled difference of the heatmap and the characterisation.

*Population prevalence* of a modality: the weight-averaged profile ``pbar = sum_c pi_c theta_c``, computed
in every global posterior draw (so its uncertainty, and its correlation with each cluster's, is carried
through). It is the prevalence of the whole population under the model, the reference the paper
compares each cluster with ("compared to the full studied population"); the cluster itself is part of it.

*Scaled difference* (the heatmap, the paper's Figure 4): ``(theta_c - pbar) / sqrt(pbar (1 - pbar))``, the
difference of prevalences in units of the standard deviation of the modality's indicator in the
population, i.e. the standardised mean difference of that indicator with the population's standard
deviation. The paper does not write its scaling down; this one puts rare and common conditions on one
scale without dividing by the cluster's own (noisy) prevalence, and is the one the project's EHR
benchmark already draws. The heatmap shows its posterior mean.

*Characterisation* (the paper's Table 8): a modality is listed as **high** in a cluster when

1. the cluster's prevalence exceeds the population's with posterior probability at least 0.975, i.e. the
   equal-tailed 95% interval of ``theta_c - pbar`` (equivalently of the log odds ratio, the same event draw
   by draw) lies above 0, the level of every interval the fit reports; and
2. the posterior median odds ratio ``theta_c (1 - pbar) / ((1 - theta_c) pbar)`` is at least
   :data:`MIN_ODDS_RATIO` = 3: Chen, Cohen & Chen (2010) equate odds ratios of 1.68, 3.47 and 6.71 with
   Cohen's small, medium and large standardised differences (d = 0.2, 0.5, 0.8) at a 1% base rate, so 3
   asks for about a medium effect. The odds ratio rather than the difference treats rare and common
   conditions alike and makes high and low symmetric (a low condition: odds at most a third).

3. the difference rests on at least :data:`MIN_EXPECTED` = 5 people, counted net of the prior: the
   cluster's expected number of people with the modality, ``N_c theta_c`` (``N_c`` its rows, ``theta_c``
   the posterior mean), less the prior's pseudo-counts, is at least 5 (for low: the number expected at
   the population's prevalence, likewise net of the prior, is at least 5), Cochran's rule of thumb for a
   comparison of proportions to be informative.

**low** is the mirror image (interval below 0, median odds ratio at most 1/3). The first condition keeps
out what the posterior cannot support (a small cluster's difference on a rare condition, however large
its point estimate); the second keeps out differences the posterior is sure of but too small to
characterise a cluster (in a cluster of 100,000 people a 10% relative difference is certain). The third
keeps out differences that the prior makes rather than the data. The global draws of VCMC combine the
silos' local posteriors, each under the fractionated prior ``beta' = (beta - 1)/S + 1`` per modality:
the combination keeps about ``beta'`` pseudo-people per modality from every silo holding the cluster
(their sum, not their product), so a cluster of 80 people spread over 5 silos, none with a condition of
0.05% prevalence, has a posterior prevalence near 4% (and the population's prevalence is raised by the
sum of these pseudo-counts over clusters, divided by the number of rows). The interval alone would call
that high; the counts net of ``beta'`` per silo holding the cluster (``beta`` once for a pooled fit) do
not. Without
``posterior.nc`` the first condition uses the cluster's 95% interval of ``profiles.csv`` against the point
estimate of ``pbar`` (the population's uncertainty is then ignored; it is much the smaller of the two).

A binary variable is shown by one modality, its "present" one (``yes``, ``1``, ``true``, ``present``,
``positive``, else the second): the other's scaled difference and log odds ratio are exactly the
negatives, so it carries nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logit

from vcmc.report.load import Columns, FitOutputs

MIN_ODDS_RATIO = 3.0
#: Fewest people (expected) on which a listed difference may rest (criterion 3 of the module docstring).
MIN_EXPECTED = 5.0
#: Probability of the interval whose exclusion of "no difference" is required.
CREDIBLE = 0.95
#: Profiles are clipped to [EPS, 1 - EPS] before logits: a draw may underflow to 0 on a rare modality.
EPS = 1e-12

_PRESENT = {"yes", "y", "1", "true", "t", "present", "positive", "pos"}
_ABSENT = {"no", "n", "0", "false", "f", "absent", "negative", "neg"}


def present_modality(modalities) -> int:
    """Index of the modality that shows a binary variable: the "present" one when the two read as
    absent/present, else the second."""
    a, b = (str(m).strip().lower() for m in modalities)
    if a in _PRESENT and b in _ABSENT:
        return 0
    return 1


@dataclass
class Shown:
    """The profile columns the report shows (all modalities of a variable with 3+, one of a binary one)."""

    index: list[int]            # flat column indices
    names: list[str]            # display name: the variable for a binary one, "variable=modality" otherwise
    variables: list[str]
    modalities: list[str]
    binary: list[bool]


def shown_columns(columns: Columns) -> Shown:
    out = Shown([], [], [], [], [])
    for v, mods, start in zip(columns.variables, columns.modalities, columns.offsets[:-1], strict=True):
        if len(mods) == 2:
            k = present_modality(mods)
            picks = [k]
            named = [v if (str(mods[k]).strip().lower() in _PRESENT) else f"{v}={mods[k]}"]
        else:
            picks = list(range(len(mods)))
            named = [f"{v}={m}" for m in mods]
        for k, name in zip(picks, named, strict=True):
            out.index.append(int(start) + k)
            out.names.append(name)
            out.variables.append(v)
            out.modalities.append(str(mods[k]))
            out.binary.append(len(mods) == 2)
    return out


@dataclass
class Contrast:
    """Each cluster's shown modalities against the population; arrays are (C, J)."""

    shown: Shown
    cluster_prevalence: np.ndarray
    population_prevalence: np.ndarray   # (J,)
    scaled: np.ndarray                  # posterior mean of the scaled difference
    odds_ratio: np.ndarray              # posterior median
    odds_ratio_ci: np.ndarray | None    # (C, J, 2), equal-tailed 95%
    prob_higher: np.ndarray | None      # P(theta_c > pbar | data)
    listed: np.ndarray                  # +1 high, -1 low, 0 not listed
    source: str                         # "draws", "intervals" or "none"
    n_draws: int = 0
    cases_net: np.ndarray | None = None      # N_c theta_c less the prior's pseudo-counts (criterion 3, high)
    expected_net: np.ndarray | None = None   # N_c pbar net of the prior's pseudo-counts (criterion 3, low)


def _logit(x):
    return logit(np.clip(x, EPS, 1.0 - EPS))


def net_counts(sizes, cluster_prev, pop_prev, pseudo=None):
    """Criterion 3's counts, each (C, J): people with the modality expected in the cluster, and expected at
    the population's prevalence, both net of the prior's pseudo-counts ``pseudo`` (C, J; 0 when ``None``).

    The population's prevalence is lowered by the pseudo-counts of all clusters over all rows (each
    cluster's prevalence carries its own, and the population's is their weighted sum)."""
    n = np.asarray(sizes, dtype=np.float64)[:, None]
    cluster_prev = np.asarray(cluster_prev, dtype=np.float64)
    pseudo = np.zeros(cluster_prev.shape) if pseudo is None else np.asarray(pseudo, dtype=np.float64)
    total = max(float(n.sum()), 1.0)
    pop_net = np.clip(np.asarray(pop_prev, dtype=np.float64) - pseudo.sum(axis=0) / total, 0.0, None)
    return n * cluster_prev - pseudo, n * pop_net[None, :]


def _rule(median_lor, lo, hi, min_odds_ratio: float, counts=None, min_expected: float = MIN_EXPECTED):
    """+1 where the interval is above 0, the median log odds ratio >= log(min_odds_ratio) and (criterion 3,
    when ``counts`` = (cases_net, expected_net) is given) enough people are expected; -1 mirrored."""
    t = np.log(float(min_odds_ratio))
    high = (lo > 0) & (median_lor >= t)
    low = (hi < 0) & (median_lor <= -t)
    if counts is not None:
        high &= counts[0] >= min_expected
        low &= counts[1] >= min_expected
    out = np.zeros(np.shape(median_lor), dtype=np.int64)
    out[high] = 1
    out[low] = -1
    return out


def contrast_from_draws(pi: np.ndarray, profiles: np.ndarray, shown: Shown, *, sizes=None, pseudo=None,
                        min_odds_ratio: float = MIN_ODDS_RATIO, credible: float = CREDIBLE,
                        min_expected: float = MIN_EXPECTED) -> Contrast:
    """The contrast from global draws ``pi`` (S, C) and ``profiles`` (S, C, P); ``sizes`` (C,) are the
    clusters' numbers of rows and ``pseudo`` (C, J) the prior's pseudo-counts (criterion 3; without
    ``sizes`` it is not applied)."""
    pi = np.asarray(pi, dtype=np.float64)
    prof = np.asarray(profiles, dtype=np.float64)[:, :, shown.index]          # (S, C, J)
    pop = np.einsum("sc,scj->sj", pi, prof)                                   # (S, J) per draw
    tail = (1.0 - credible) / 2.0
    n_c, n_j = prof.shape[1], prof.shape[2]
    scaled = np.empty((n_c, n_j))
    med = np.empty((n_c, n_j))
    ci = np.empty((n_c, n_j, 2))
    higher = np.empty((n_c, n_j))
    sd = np.sqrt(np.clip(pop * (1.0 - pop), EPS, None))
    pop_logit = _logit(pop)
    for c in range(n_c):                      # one cluster at a time: (S, J) arrays, whatever C
        th = prof[:, c, :]
        scaled[c] = ((th - pop) / sd).mean(axis=0)
        lor = _logit(th) - pop_logit
        q = np.quantile(lor, [tail, 0.5, 1.0 - tail], axis=0)
        med[c], ci[c, :, 0], ci[c, :, 1] = q[1], q[0], q[2]
        higher[c] = (th > pop).mean(axis=0)
    mean_c, mean_pop = prof.mean(axis=0), pop.mean(axis=0)
    counts = None if sizes is None else net_counts(sizes, mean_c, mean_pop, pseudo)
    return Contrast(shown=shown, cluster_prevalence=mean_c, population_prevalence=mean_pop,
                    scaled=scaled, odds_ratio=np.exp(med), odds_ratio_ci=np.exp(ci), prob_higher=higher,
                    listed=_rule(med, ci[..., 0], ci[..., 1], min_odds_ratio, counts, min_expected),
                    source="draws", n_draws=int(pi.shape[0]),
                    cases_net=None if counts is None else counts[0],
                    expected_net=None if counts is None else counts[1])


def contrast_from_estimates(weights: np.ndarray, profiles: np.ndarray, profiles_ci: np.ndarray | None,
                            shown: Shown, *, sizes=None, pseudo=None, min_odds_ratio: float = MIN_ODDS_RATIO,
                            min_expected: float = MIN_EXPECTED) -> Contrast:
    """The contrast from posterior means (``weights`` (C,), ``profiles`` (C, P)) and the clusters' 95%
    intervals (C, P, 2); without intervals nothing is listed (no rule can tell what the posterior
    supports)."""
    w = np.asarray(weights, dtype=np.float64)
    th = np.asarray(profiles, dtype=np.float64)[:, shown.index]
    pop = w @ th / max(w.sum(), EPS)
    sd = np.sqrt(np.clip(pop * (1.0 - pop), EPS, None))
    lor = _logit(th) - _logit(pop)[None, :]
    counts = None if sizes is None else net_counts(sizes, th, pop, pseudo)
    common = {"shown": shown, "cluster_prevalence": th, "population_prevalence": pop, "scaled": (th - pop) / sd,
              "odds_ratio": np.exp(lor), "prob_higher": None, "cases_net": None if counts is None else counts[0],
              "expected_net": None if counts is None else counts[1]}
    if profiles_ci is None:
        return Contrast(**common, odds_ratio_ci=None, listed=np.zeros(th.shape, dtype=np.int64), source="none")
    ci = np.asarray(profiles_ci, dtype=np.float64)[:, shown.index, :]
    lo = _logit(ci[..., 0]) - _logit(pop)[None, :]
    hi = _logit(ci[..., 1]) - _logit(pop)[None, :]
    return Contrast(**common, odds_ratio_ci=np.exp(np.stack([lo, hi], axis=-1)),
                    listed=_rule(lor, lo, hi, min_odds_ratio, counts, min_expected), source="intervals")


def prior_pseudo_counts(fit: FitOutputs, shown: Shown) -> np.ndarray:
    """(C, J): the prior's pseudo-people in each cluster's prevalence of each shown modality.

    VCMC and consensus Monte Carlo: ``beta'`` (the fractionated ``beta`` when ``prior.fractionate``) per
    silo holding the cluster (``size_per_silo > 0``, at least one); a pooled sampler (full MCMC): ``beta``
    once; a method without a Dirichlet prior (no ``prior.beta`` in the config): 0.
    """
    from vcmc.model import fractionate

    config = fit.result.get("config")
    cfg = config.get("prior") if isinstance(config, dict) else None
    n_c = len(fit.clusters)
    if not isinstance(cfg, dict) or cfg.get("beta") is None:
        return np.zeros((n_c, len(shown.index)))
    beta = np.asarray(cfg["beta"], dtype=np.float64)
    per_var = {v: float(beta if beta.ndim == 0 else beta[q]) for q, v in enumerate(fit.columns.variables)}
    b = np.array([per_var[v] for v in shown.variables])
    if str(fit.result.get("method", "vcmc")) in ("vcmc", "consensus"):
        b = fractionate(b, max(len(fit.silos), 1), bool(cfg.get("fractionate", True)))
        holding = np.array([max(1, sum(1 for v in (c.get("size_per_silo") or {}).values() if v))
                            for c in fit.clusters], dtype=np.float64)
    else:
        holding = np.ones(n_c)
    return holding[:, None] * b[None, :]


def contrast(fit: FitOutputs, *, min_odds_ratio: float = MIN_ODDS_RATIO,
             min_expected: float = MIN_EXPECTED) -> Contrast:
    """The contrast of a fit: from its draws when ``posterior.nc`` was read, else from its intervals;
    criterion 3 uses the clusters' sizes of result.json."""
    shown = shown_columns(fit.columns)
    sizes = fit.sizes if fit.sizes.sum() > 0 else None
    pseudo = prior_pseudo_counts(fit, shown)
    if fit.pi_draws is not None and fit.profile_draws is not None:
        return contrast_from_draws(fit.pi_draws, fit.profile_draws, shown, sizes=sizes, pseudo=pseudo,
                                   min_odds_ratio=min_odds_ratio, min_expected=min_expected)
    return contrast_from_estimates(fit.weights, fit.profiles, fit.profiles_ci, shown, sizes=sizes, pseudo=pseudo,
                                   min_odds_ratio=min_odds_ratio, min_expected=min_expected)


@dataclass
class Item:
    """One listed modality of one cluster."""

    name: str
    variable: str
    modality: str
    direction: int
    cluster_prevalence: float
    population_prevalence: float
    odds_ratio: float


def characterisation(con: Contrast) -> list[tuple[list[Item], list[Item]]]:
    """Per cluster (in the contrast's order): (low items, high items), each sorted by decreasing effect
    (|log odds ratio|)."""
    out = []
    for c in range(con.listed.shape[0]):
        low, high = [], []
        for j in np.flatnonzero(con.listed[c]):
            item = Item(con.shown.names[j], con.shown.variables[j], con.shown.modalities[j], int(con.listed[c, j]),
                        float(con.cluster_prevalence[c, j]), float(con.population_prevalence[j]),
                        float(con.odds_ratio[c, j]))
            (high if item.direction > 0 else low).append(item)
        for items in (low, high):
            items.sort(key=lambda it: -abs(np.log(max(it.odds_ratio, EPS))))
        out.append((low, high))
    return out


def contrast_frame(con: Contrast, cluster_ids, labels: dict[int, str] | None = None):
    """Every (cluster, shown modality) cell as a table (``characterisation.csv``)."""
    import pandas as pd

    labels = labels or {}
    rows = []
    for c, cid in enumerate(cluster_ids):
        for j in range(len(con.shown.index)):
            row = {"cluster": int(cid), "label": labels.get(int(cid), ""), "variable": con.shown.variables[j],
                   "modality": con.shown.modalities[j],
                   "cluster_prevalence": float(con.cluster_prevalence[c, j]),
                   "population_prevalence": float(con.population_prevalence[j]),
                   "scaled_difference": float(con.scaled[c, j]), "odds_ratio": float(con.odds_ratio[c, j])}
            if con.odds_ratio_ci is not None:
                row["odds_ratio_ci95_low"] = float(con.odds_ratio_ci[c, j, 0])
                row["odds_ratio_ci95_high"] = float(con.odds_ratio_ci[c, j, 1])
            if con.prob_higher is not None:
                row["prob_higher"] = float(con.prob_higher[c, j])
            if con.cases_net is not None:
                row["cases_net_of_prior"] = float(con.cases_net[c, j])
                row["expected_cases_net_of_prior"] = float(con.expected_net[c, j])
            row["listed"] = {1: "high", -1: "low"}.get(int(con.listed[c, j]), "")
            rows.append(row)
    return pd.DataFrame(rows)
