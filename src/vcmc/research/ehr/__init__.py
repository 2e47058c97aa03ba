"""A synthetic multimorbidity cohort shaped like the paper's application (section 6, Tables 6-8).

The paper clusters 289,821 UK primary-care patients over 80 with at least two long-term conditions into 27
clusters (Table 7 sizes, Table 8 characterisation), the data split into 30 shards uniformly at random. The
real records are not public, so :func:`simulate_ehr` generates a cohort of the same shape from a latent
class model whose truth is known, designed so that the large clusters are recoverable: the Bayes
classifier with the true parameters finds every cluster of 1,000+ people (best F1 >= 0.87, figures below).

* **80 binary conditions** (modalities ``("no", "yes")``): every condition named in Table 8 and the text of
  section 6, plus common long-term conditions of the over-80s (:data:`CONDITIONS`). The baseline
  prevalences are rough orders of magnitude for UK primary care at that age, not estimates; the four
  conditions that the most clusters share (stroke, chronic cardiac disorders, dementia, cancers) are
  listed at the upper end of plausible (see *cluster 1* below). One common log-odds intercept is then
  calibrated (exactly, see :func:`count_moments`) so that the cohort's expected mean number of conditions
  is Table 6's 6.2.
* **27 clusters** with Table 7's sizes scaled to ``n`` by largest remainder (``n = 289,821`` reproduces
  them exactly).
* **The truth's characterisation** (:func:`ehr_design`, ``characterisation`` of the result and of
  ``truth.json``): per cluster Table 8's ``high`` / ``low`` lists and the ``secondary_high`` /
  ``secondary_low`` lists of :data:`SECONDARY`. Every other condition of a cluster is *free*. Cluster 1 is
  the baseline itself ("no specific condition"). Every shift is recorded in ``designed_log_odds``.

  - *Table 8's conditions.* In a **large** cluster (:data:`LARGE_CLUSTER`: 1,000+ people in Table 7,
    clusters 2-14, 16 and 18) a **common** designed condition (listed baseline >= :data:`COMMON`, 5%) is
    near-universal: prevalence :data:`P_CORE` = 0.97 for a high one, 0.03 for a low one. A latent class of
    such data is "the people with its conditions"; a cluster in which a fifth of the members lacked its
    only defining condition could not be told from cluster 1. Every other designed condition (the rare
    ones, and those of the clusters under 1,000) is shifted by the cluster's ``delta_c`` of the evidence
    rule: the shift at which the designed conditions of an average member carry evidence ``log(1/w_c)``
    (their Kullback-Leibler divergence from the baseline) against it, ``w_c`` the cluster's share, at
    least :data:`DELTA_MIN` = 2 and at most a cap rising log-linearly from 2 for clusters of 5% to
    :data:`DELTA_MAX` = 8 for 0.01% (2.0 for clusters 4, 5, 7, 9; up to 7.2 for cluster 27). So rare
    conditions stay rare where Table 8 raises them in a large cluster, their few cases concentrating there:
    HIV 0.05% -> 0.3% in cluster 7 (which holds 44% of the cohort's cases), type-1 diabetes 13% of cluster
    12, ADHD 3% of cluster 18, polycystic ovary syndrome 5% of cluster 16.
  - *Secondary conditions* (:data:`SECONDARY`, fixed, a clinical reason with each): 2-4 per cluster 2..27,
    among the conditions Table 8 does not list for it, shifted by ``s_c`` log-odds: :data:`SECONDARY_MIN`
    = 3.25 (odds ratio 26) for clusters of 5% or more, rising log-linearly to :data:`SECONDARY_MAX` = 4.5
    for 0.3% or less (``secondary_log_odds``). The large clusters use common conditions (most of them
    their own), and avoid those of the clusters they could be mistaken for. Clusters 3, 4, 5, 7 and 9,
    each defined by one condition that a smaller cluster combines with another (6 = cardiac + stroke,
    8 = cancers + cardiac, 10 = stroke + dementia, 12 = stroke + deafness + ophthalmic), have that other
    condition as a secondary *low*: people with both are in the combined cluster, as a latent class model
    would find them.
  - *Free conditions*: a texture of +-:data:`TEXTURE` (0.25, odds ratio 1.28), random sign, on the
    log-odds of clusters 2..27, so that no two clusters share a profile exactly. (Identifiability no
    longer rests on it: a two-class mixture of products that differ in one variable is itself a product,
    but every cluster now differs from every other in four or more designed or secondary conditions.)

* **Why this much signal** (measured with the Bayes classifier, true parameters, ``n = 289,821``, seed 1).
  A cluster that differs from cluster 1 (48% of the cohort) in one or two conditions catches cluster 1's
  many people with them, and cluster 1 cannot have them rarely (it must stay representative): with Table
  8's conditions alone (near-universal core included) the ARI is 0.31 and the best F1 of clusters 4-7 is
  0.41-0.48. Secondary shifts of 2.5 (odds ratio 12): ARI 0.64, F1 0.82-0.86 for the clusters of 10,000+,
  0.70 for cluster 8 and 0.59 for cluster 18 (1,000 people, whose two common conditions are those of
  clusters 3 and 5). The chosen shifts give, per cluster, Table 7 size and best F1 (n = 100,000, seed 1, in
  brackets: the same to +-0.03 on the large clusters):

  ======  =======  =====  ==========  ======  =======  =====  ==========
  cluster   size    F1    (n=100k)    cluster   size    F1    (n=100k)
  ======  =======  =====  ==========  ======  =======  =====  ==========
  1       138,607  0.91   (0.91)      15          100  0.81   (0.85)
  2         3,687  0.93   (0.93)      16        1,007  0.95   (0.95)
  3        11,332  0.89   (0.89)      17          263  0.86   (0.81)
  4        22,410  0.88   (0.88)      18        1,000  0.91   (0.88)
  5        28,395  0.89   (0.89)      19           89  0.73   (0.78)
  6        12,080  0.91   (0.91)      20          215  0.89   (0.92)
  7        28,078  0.91   (0.91)      21           31  0.87   (0.86)
  8         3,830  0.88   (0.88)      22           61  0.89   (0.92)
  9        21,121  0.91   (0.91)      23          478  0.58   (0.61)
  10        5,207  0.89   (0.89)      24          233  0.75   (0.79)
  11        2,136  0.89   (0.89)      25          259  0.81   (0.83)
  12        2,404  0.94   (0.93)      26           92  0.78   (0.86)
  13        3,435  0.94   (0.93)      27           66  0.86   (0.93)
  14        3,205  0.96   (0.96)
  ======  =======  =====  ==========  ======  =======  =====  ==========

  Overall ARI 0.763 (0.761 at n = 100,000), accuracy 0.90: the large clusters are found, a method that
  fails one of them is at fault; the small ones are found partly (cluster 23, polycystic ovaries and
  chronic fatigue, rarely), as the paper's section 7.1 expects of small, poorly separated clusters.
* **Cluster 1 is representative** of the cohort, as Table 8 says: the gap between its log-odds and the
  cohort's is at most :data:`REPRESENTATIVE` = 0.6 on every condition, texture averaged out. The rule:
  where the cohort would be further above cluster 1 (conditions raised in a large share of the cohort),
  all positive shifts of that condition are multiplied by the one factor that brings the gap to 0.6
  (``representative_scale``: anxiety x 0.85, anaemia x 0.87, coagulopathy x 0.98; negative shifts
  likewise, none needed). With the texture drawn and the selection applied the largest gap is 0.62 for
  seed 1, and below 0.67 for every one of 200 seeds. Result: every designed condition is at least 1.44
  log-odds (odds ratio 4.2) from the cohort's prevalence in the designed direction, every secondary one
  at least 2.1, every free one within 0.92 (0.62 for cluster 1).
* **Mean and sd**: the expected number of conditions is Table 6's 6.2 with the free cells at their
  prevalence averaged over the texture's two signs (6.14-6.27 across texture draws, 6.16 for seed 1); its
  sd is ~2.4, below Table 6's 3.1: within a cluster the count is Poisson-binomial (variance below its
  mean), so a sd of 3.1 needs clusters that differ more in overall burden.
* **Selection**: like the paper's cohort, everyone has at least ``min_conditions`` (2) conditions: a person
  drawn with fewer is redrawn from their cluster's profile (exact rejection sampling of the truncated
  distribution). The model is thus a latent class model conditioned on the count, as the real cohort is
  (the fitted model ignores the truncation, a mild misspecification: 1.9% of draws are rejected, 3.9% in
  cluster 1, whose members have 4.8 conditions on average against 6.1-10 in the others).
* **Shards**: ``allocation="uniform"`` sends each person to one of ``n_silos`` silos uniformly at random
  (the paper's, 30 silos); ``allocation="region"`` uses the 13 regions of Table 6 as silos
  (``silo_<region>``), with a modest heterogeneity (:data:`REGION_CONCENTRATION`): a few clusters are three
  times as likely (odds) to live in a few regions, the joint cluster x region table being fitted by
  iterative proportional fitting so that the expected region shares stay Table 6's and the cluster sizes
  stay Table 7's.

Randomness: the root ``rng`` becomes a ``SeedSequence`` spawned into four children: 0 draws the texture's
signs, 1 the order of the people (which person is in which cluster), 2 the allocation to silos, 3 the
conditions. So the uniform and region allocations of one seed hold the same people with the same
conditions, only placed in other silos.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit

from vcmc._rng import RngLike, as_seed_sequence, root_entropy
from vcmc.data.schema import Schema, SiloData, Variable
from vcmc.exceptions import ConfigError
from vcmc.research.simulate import SimulatedData

__all__ = ["ALLOCATIONS", "COMMON", "CONDITIONS", "DELTA_MAX", "DELTA_MIN", "LARGE_CLUSTER", "P_CORE", "REGIONS",
           "REGION_CONCENTRATION", "REGION_ODDS", "REPRESENTATIVE", "SECONDARY", "SECONDARY_MAX", "SECONDARY_MIN",
           "TEXTURE", "Condition", "EhrDesign", "cluster_counts", "count_moments", "ehr_design", "log_odds_ratio",
           "prevalences", "region_joint", "selected_prevalences", "simulate_ehr"]

ALLOCATIONS: tuple[str, ...] = ("uniform", "region")

#: The paper's cohort size (section 6).
PAPER_N = 289_821

#: Smallest shift of the evidence rule (odds ratio e^2 = 7.4), used by the clusters of 5% or more (the rule
#: sets Table 8's rare conditions in the large clusters, and all designed conditions of the others).
DELTA_MIN = 2.0
#: Largest shift of the evidence rule, reached by a cluster of 0.01% of the cohort (odds ratio ~3000).
DELTA_MAX = 8.0
#: Cluster shares between which the cap on the shift rises log-linearly from DELTA_MIN to DELTA_MAX.
_CAP_SHARES = (0.05, 1e-4)
#: Table 7 size from which a cluster is large: its common designed conditions are near-universal in it.
LARGE_CLUSTER = 1000
#: Listed baseline prevalence from which a condition is common (rarer ones keep the evidence rule's shift).
COMMON = 0.05
#: Prevalence of a common designed high condition in a large cluster (a designed low one: 1 - P_CORE).
P_CORE = 0.97
#: Log-odds shift of the secondary conditions of a cluster of 5% of the cohort or more ...
SECONDARY_MIN = 3.25
#: ... rising log-linearly to this for a cluster of 0.3% or less.
SECONDARY_MAX = 4.5
_SECONDARY_SHARES = (0.05, 0.003)
#: Largest log-odds gap between cluster 1 and the cohort the design allows on any condition, texture aside.
REPRESENTATIVE = 0.6
#: Magnitude of the log-odds texture on the free conditions of clusters 2..27 (random sign).
TEXTURE = 0.25


@dataclass(frozen=True)
class Condition:
    """One long-term condition: column name, display name, baseline prevalence (cluster 1)."""

    id: str
    name: str
    baseline: float


def _tables() -> dict:
    """The design tables, kept as package data (``tables.json`` beside this module) rather than as Python:
    they are data a reader checks against the paper, not code."""
    return json.loads(resources.files(__name__).joinpath("tables.json").read_text(encoding="utf-8"))


_TABLES = _tables()


#: The 80 conditions, in column order. Baselines are rough orders of magnitude for UK primary-care
#: patients over 80 with >= 2 long-term conditions (before the common calibration of the mean); umbrella
#: groups of the paper ("chronic cardiac disorders", "cancers", ...) are the "other" members of their group.
#: Stroke (with TIA), chronic cardiac disorders, dementia and cancers are at the upper end of plausible:
#: each is near-universal in clusters holding 9-17% of the cohort, and cluster 1 must stay within
#: REPRESENTATIVE of the cohort's prevalence (a lower baseline would force smaller shifts, see the docstring).
CONDITIONS: tuple[Condition, ...] = tuple(Condition(c["id"], c["name"], c["baseline"])
                                         for c in _TABLES["conditions"])

#: Table 8's labels (normalised: lower case, straight apostrophe, no accents) -> condition ids. The
#: paper's "X and other chronic cardiac disorders" raises X and the umbrella group.
_TABLE8_LABELS: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _TABLES["table8_labels"].items()}

#: Clusters (1-based, Table 7/8 numbering) made three times as likely (odds) to live in some regions, with
#: the epidemiological reason. Modest on purpose: each listed cluster still lives in every region.
REGION_CONCENTRATION: dict[int, tuple[tuple[str, ...], str]] = {
    int(k): (tuple(v["regions"]), v["reason"]) for k, v in _TABLES["region_concentration"].items()}
#: Odds multiplier of a concentrated (cluster, region) pair.
REGION_ODDS = 3.0

#: Secondary characteristic conditions of clusters 2..27: ``{cluster: (high, low, reason)}``, beside Table 8's
#: (which lists one or two conditions for most large clusters, too few to tell them from cluster 1). Fixed,
#: chosen for clinical plausibility among the conditions Table 8 does not list for the cluster, and so that
#: no condition is secondary for much of the cohort (cluster 1 stays representative): the large clusters
#: use common conditions, mostly their own; a large cluster avoids those of the clusters it could be
#: mistaken for (8 those of 4 and 5, 10 those of 6, 7 and 9, 18 those of 3 and 5).
SECONDARY: dict[int, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    int(k): (tuple(v["high"]), tuple(v["low"]), v["reason"]) for k, v in _TABLES["secondary"].items()}


def _region_id(name: str) -> str:
    return name.lower().replace("&", "and").replace(" ", "_")


def _norm_label(label: str) -> str:
    text = unicodedata.normalize("NFKD", label.replace("\u2019", "'")).encode("ascii", "ignore").decode()
    return " ".join(text.lower().strip().rstrip(",").split())


@cache
def _section6() -> dict:
    """Section 6 of the paper: Table 7 from ``paper_tables.json`` (a verbatim copy of the project's
    reference), Tables 6 and 8 from ``paper_tables_section6.json`` beside it."""
    # Read the package files directly: importing vcmc.research.study would pull in the study runner and plotting
    # (~0.3 s) for two JSON files.
    folder = resources.files("vcmc").joinpath("research", "study")
    out = dict(json.loads(folder.joinpath("paper_tables.json").read_text(encoding="utf-8"))["section6_ehr"])
    extra = json.loads(folder.joinpath("paper_tables_section6.json").read_text(encoding="utf-8"))
    out.update({k: v for k, v in extra.items() if k != "source"})
    return out


def _regions() -> tuple[tuple[str, str, float], ...]:
    """(id, display name, share) of Table 6's 13 regions, shares normalised to sum to 1."""
    shares = _section6()["table6_population"]["region_percent"]
    total = sum(shares.values())
    return tuple((_region_id(k), k, v / total) for k, v in shares.items())


#: The 13 regions of Table 6 as ``(id, display name)``, in the paper's order.
REGIONS: tuple[tuple[str, str], ...] = tuple((r, name) for r, name, _ in _regions())


def cluster_counts(n: int) -> np.ndarray:
    """Table 7's cluster sizes scaled to ``n`` people by largest remainder (exact integer arithmetic).

    Ties in the remainder go to the lower cluster number. ``cluster_counts(289821)`` is Table 7.
    """
    sizes = np.asarray(_section6()["cluster_sizes"], dtype=np.int64)
    total = int(sizes.sum())
    scaled = int(n) * sizes  # exact: well inside int64 for any cohort that fits in memory
    counts = scaled // total
    short = int(n) - int(counts.sum())
    order = np.lexsort((np.arange(sizes.size), -(scaled % total)))  # largest remainder, then lower index
    counts[order[:short]] += 1
    return counts


def _kl_bernoulli(p, q):
    """KL(Bernoulli(p) || Bernoulli(q)), elementwise, summed."""
    p = np.clip(p, 1e-300, 1 - 1e-16)
    return float(np.sum(p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))))


def count_moments(prevalence: np.ndarray, weights: np.ndarray, min_conditions: int = 0) -> dict:
    """Exact moments of the number of conditions per person under the latent class model.

    Within cluster ``c`` the count is Poisson-binomial with the cluster's prevalences; its distribution is
    computed exactly by the convolution recursion over conditions, then truncated to
    ``count >= min_conditions`` (the cohort's selection) and mixed over clusters with ``weights``.

    Returns
    -------
    dict
        ``mean``, ``sd`` (cohort), ``cluster_mean`` (C,), ``rejected`` (C,): probability that a draw of the
        untruncated profile has fewer than ``min_conditions`` conditions, ``pmf`` (the cohort's count
        distribution, after selection), ``cluster_pmf`` (C, Q + 1): each cluster's before selection.
    """
    p = np.asarray(prevalence, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    n_c, q_count = p.shape
    pmf = np.zeros((n_c, q_count + 1))
    pmf[:, 0] = 1.0
    for q in range(q_count):  # O(C Q^2), 27 x 80 x 81: no library routine for the Poisson-binomial pmf
        pmf[:, 1:] = pmf[:, 1:] * (1 - p[:, q:q + 1]) + pmf[:, :-1] * p[:, q:q + 1]
        pmf[:, 0] *= 1 - p[:, q]
    rejected = pmf[:, :min_conditions].sum(axis=1)
    kept = pmf.copy()
    kept[:, :min_conditions] = 0.0
    kept /= kept.sum(axis=1, keepdims=True)
    k = np.arange(q_count + 1)
    cmean = kept @ k
    cm2 = kept @ (k * k)
    mean = float(w @ cmean)
    sd = float(np.sqrt(w @ cm2 - mean * mean))
    return {"mean": mean, "sd": sd, "cluster_mean": cmean, "rejected": rejected, "pmf": w @ kept,
            "cluster_pmf": pmf}


def selected_prevalences(prevalence: np.ndarray, min_conditions: int) -> np.ndarray:
    """Exact prevalence of each condition among the people of a cluster with ``>= min_conditions`` conditions.

    The cohort's selection raises the prevalences above the profile's (most for common conditions of
    low-burden clusters): ``P(x_q = 1 | count >= m) = p_q P(count without q >= m - 1) / P(count >= m)``,
    with the Poisson-binomial distributions computed exactly as in :func:`count_moments`.

    Parameters
    ----------
    prevalence : numpy.ndarray (C, Q)
        The clusters' Bernoulli profiles.
    min_conditions : int
        The selection threshold m (``m <= 0``: no selection, the prevalences are returned unchanged).

    Returns
    -------
    numpy.ndarray (C, Q)
    """
    p = np.asarray(prevalence, dtype=np.float64)
    n_c, q_count = p.shape
    m = int(min_conditions)
    if m <= 0:
        return p.copy()
    # pmf of the count without condition q, for every q at once: batch axis 1, "skipping" q = p set to 0
    pmf = np.zeros((n_c, q_count, q_count + 1))
    pmf[:, :, 0] = 1.0
    for j in range(q_count):
        pj = np.broadcast_to(p[:, j:j + 1], (n_c, q_count)).copy()
        pj[:, j] = 0.0
        pj = pj[:, :, None]
        pmf[:, :, 1:] = pmf[:, :, 1:] * (1 - pj) + pmf[:, :, :-1] * pj
        pmf[:, :, 0] *= 1 - pj[:, :, 0]
    at_least_rest = pmf[:, :, m - 1:].sum(axis=2)
    accept = 1.0 - count_moments(p, np.full(n_c, 1.0 / n_c), 0)["cluster_pmf"][:, :m].sum(axis=1)
    return p * at_least_rest / accept[:, None]


@dataclass(frozen=True, eq=False)
class EhrDesign:
    """The deterministic part of the design (everything but the texture).

    ``logit p[c, q] = logit baseline[q] + shift[c, q] (+ texture[c, q] where the cell is free)``: ``shift`` is
    zero on the free cells (conditions neither designed nor secondary for the cluster, and all of cluster 1).

    Attributes
    ----------
    conditions : tuple of Condition
        Baselines as listed (before calibration).
    baseline : numpy.ndarray (Q,)
        Calibrated baseline prevalences: cluster 1's profile.
    intercept : float
        The common log-odds shift added to the listed baselines so that the cohort's expected number of
        conditions is Table 6's mean (texture averaged out).
    shares : numpy.ndarray (C,)
        Table 7's cluster shares.
    sign : numpy.ndarray (C, Q) of int
        +1 for a designed (Table 8) high condition, -1 for a designed low one, 0 otherwise.
    delta : numpy.ndarray (C,)
        The cluster's Table-8 shift of the evidence rule (0 for cluster 1): the shift of its designed
        conditions except the core ones (``core``), which are at least this far from the baseline.
    core : numpy.ndarray (C, Q) of bool
        Designed conditions set to prevalence :data:`P_CORE` (high) or ``1 - P_CORE`` (low): the common
        conditions (listed baseline >= :data:`COMMON`) of the large clusters (>= :data:`LARGE_CLUSTER`).
    secondary : numpy.ndarray (C, Q) of int
        +1 / -1 for a secondary high / low condition (:data:`SECONDARY`), 0 otherwise.
    secondary_shift : numpy.ndarray (C,)
        Log-odds shift of the cluster's secondary conditions (0 for cluster 1).
    representative_scale : numpy.ndarray (2, Q)
        Factors on the positive (row 0) and negative (row 1) shifts of each condition that keep cluster 1
        within :data:`REPRESENTATIVE` of the cohort (1 where no scaling is needed).
    shift : numpy.ndarray (C, Q)
        Log-odds shift of every designed and secondary cell from the baseline (0 on the free cells), the
        scaling included.
    characterisation : dict
        ``{"cluster_c": {"high": [ids], "low": [ids], "secondary_high": [ids], "secondary_low": [ids]}}``:
        Table 8's lists and the secondary conditions.
    """

    conditions: tuple[Condition, ...]
    baseline: np.ndarray
    intercept: float
    shares: np.ndarray
    sign: np.ndarray
    delta: np.ndarray
    core: np.ndarray
    secondary: np.ndarray
    secondary_shift: np.ndarray
    representative_scale: np.ndarray
    shift: np.ndarray
    characterisation: dict

    @property
    def n_clusters(self) -> int:
        return int(self.shares.size)

    @property
    def free(self) -> np.ndarray:
        """(C, Q) bool: the cells the texture moves (neither designed nor secondary, clusters 2..C)."""
        out = (self.sign == 0) & (self.secondary == 0)
        out[0] = False
        return out

    def profiles(self, texture: np.ndarray | None = None) -> np.ndarray:
        """Prevalence of every condition in every cluster, (C, Q); ``texture`` (C, Q) on the log-odds scale
        is added on the free cells (:attr:`free`)."""
        eta = logit(self.baseline)[None, :] + self.shift
        if texture is not None:
            eta = eta + np.where(self.free, texture, 0.0)
        return expit(eta)


def _share_ramp(share: float, shares: tuple[float, float]) -> float:
    """0 for a cluster share >= shares[0], 1 for <= shares[1], log-linear between."""
    hi, lo = shares
    return float(np.clip(np.log(hi / share) / np.log(hi / lo), 0.0, 1.0))


def _delta_cap(share: float) -> float:
    return DELTA_MIN + (DELTA_MAX - DELTA_MIN) * _share_ramp(share, _CAP_SHARES)


def _secondary_shift(share: float) -> float:
    return SECONDARY_MIN + (SECONDARY_MAX - SECONDARY_MIN) * _share_ramp(share, _SECONDARY_SHARES)


def _delta(share: float, b: np.ndarray, sign: np.ndarray) -> float:
    """The cluster's shift: KL of its designed conditions from the baseline ``b`` = log(1/share), clipped."""
    on = sign != 0
    if not on.any():
        return 0.0
    target = np.log(1.0 / share)
    eta0 = logit(b[on])

    def excess(d):
        return _kl_bernoulli(expit(eta0 + sign[on] * d), b[on]) - target

    cap = _delta_cap(share)
    d = cap if excess(cap) <= 0 else brentq(excess, 0.0, cap, xtol=1e-10)
    return float(max(DELTA_MIN, d))


def _table8_signs() -> tuple[np.ndarray, dict]:
    ids = [c.id for c in CONDITIONS]
    pos = {c: q for q, c in enumerate(ids)}
    t8 = _section6()["table8_characterisation"]
    n_c = len(_section6()["cluster_sizes"])
    sign = np.zeros((n_c, len(ids)), dtype=np.int64)
    char = {}
    for c in range(n_c):
        row = t8[str(c + 1)]
        out = {}
        for key, s in (("high", 1), ("low", -1)):
            chosen: list[str] = []
            for label in row[key]:
                try:
                    targets = _TABLE8_LABELS[_norm_label(label)]
                except KeyError:  # pragma: no cover - the package's table and this map ship together
                    raise ConfigError(f"Table 8 label {label!r} (cluster {c + 1}) has no condition in "
                                      "vcmc.research.ehr; expected one of the known labels.") from None
                for t in targets:
                    if t not in chosen:
                        chosen.append(t)
                        sign[c, pos[t]] = s
            out[key] = chosen
        char[f"cluster_{c + 1}"] = out
    return sign, char


def _secondary_signs(sign: np.ndarray) -> tuple[np.ndarray, dict]:
    """(C, Q) signs of the secondary conditions of :data:`SECONDARY` and their lists per cluster."""
    pos = {c.id: q for q, c in enumerate(CONDITIONS)}
    sec = np.zeros_like(sign)
    out = {"cluster_1": {"secondary_high": [], "secondary_low": []}}
    for c in range(1, sign.shape[0]):
        high, low, _ = SECONDARY[c + 1]
        for ids, s in ((high, 1), (low, -1)):
            for t in ids:
                q = pos[t]
                if sign[c, q] != 0 or sec[c, q] != 0:  # pragma: no cover - the table ships with the module
                    raise ConfigError(f"Secondary condition {t!r} of cluster {c + 1} is already designed for it "
                                      "(vcmc.research.ehr.SECONDARY); expected conditions Table 8 does not list.")
                sec[c, q] = s
        out[f"cluster_{c + 1}"] = {"secondary_high": list(high), "secondary_low": list(low)}
    return sec, out


def _shifts(eta0: np.ndarray, sign: np.ndarray, delta: np.ndarray, core: np.ndarray, secondary: np.ndarray,
            secondary_shift: np.ndarray) -> np.ndarray:
    """The (C, Q) log-odds shifts from the baseline ``eta0``: core cells to P_CORE (high) or 1 - P_CORE (low),
    at least ``delta`` away; the other designed cells by ``delta``; the secondary ones by their shift."""
    to_core = np.where(sign > 0, logit(P_CORE) - eta0[None, :], eta0[None, :] - logit(1.0 - P_CORE))
    designed = sign * np.where(core, np.maximum(delta[:, None], to_core), delta[:, None])
    return designed + secondary * secondary_shift[:, None]


def _texture_mean(eta: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Prevalences with the free cells averaged over the texture's two signs (the texture's expectation)."""
    return np.where(free, 0.5 * (expit(eta - TEXTURE) + expit(eta + TEXTURE)), expit(eta))


def _representative(eta0: np.ndarray, shift: np.ndarray, shares: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Per-condition factors (2, Q) on the positive (row 0) and negative (row 1) shifts that keep cluster 1
    within REPRESENTATIVE of the cohort.

    For a condition whose cohort prevalence (texture averaged out) is more than :data:`REPRESENTATIVE`
    above cluster 1's on the log-odds scale, its positive shifts in clusters 2..C are all multiplied by the
    factor in ``(0, 1)`` that brings the gap to exactly REPRESENTATIVE (its negative shifts likewise when
    the cohort is below); 1 elsewhere. The gap is monotone in the factor: a vectorised bisection (60
    halvings, exact to 1e-18) over all conditions at once, hand-written because scipy's root finders are
    scalar and this runs inside the calibration's own root search.
    """
    def gap(scale_pos, scale_neg):
        s = _apply_scale(shift, np.stack([scale_pos, scale_neg]))
        return logit(shares @ _texture_mean(eta0[None, :] + s, free)) - eta0

    ones = np.ones(eta0.size)
    g = gap(ones, ones)
    out = np.ones((2, eta0.size))
    for side in (1, -1):
        bad = side * g > REPRESENTATIVE
        if not bad.any():
            continue
        lo, hi = np.zeros(eta0.size), np.ones(eta0.size)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            g_mid = gap(mid, ones) if side > 0 else gap(ones, mid)
            over = side * g_mid > REPRESENTATIVE
            hi = np.where(over, mid, hi)
            lo = np.where(over, lo, mid)
        out[0 if side > 0 else 1] = np.where(bad, lo, 1.0)
    return out


def _apply_scale(shift: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``shift`` (C, Q) with its positive entries multiplied by ``scale[0]`` (Q,), its negative ones by
    ``scale[1]``."""
    return np.where(shift > 0, shift * scale[0][None, :], shift * scale[1][None, :])


@cache
def ehr_design() -> EhrDesign:
    """The designed profiles' deterministic part (cached): calibrated baselines, shifts, characterisation.

    The Table-8 shifts ``delta`` follow the evidence rule on the listed baselines; the core conditions of
    the large clusters are set to :data:`P_CORE`, the secondary ones shifted by their cluster's
    :func:`_secondary_shift`, and the shifts of a condition scaled down where cluster 1 would otherwise be
    more than :data:`REPRESENTATIVE` from the cohort (:func:`_representative`); the common log-odds
    intercept is solved around all this so that the cohort's expected number of conditions (exact,
    :func:`count_moments`, with the selection ``count >= 2``) is Table 6's mean.
    """
    sizes = np.asarray(_section6()["cluster_sizes"], dtype=np.float64)
    shares = sizes / sizes.sum()
    sign, char = _table8_signs()
    secondary, sec_char = _secondary_signs(sign)
    listed = np.array([c.baseline for c in CONDITIONS])
    delta = np.array([_delta(shares[c], listed, sign[c]) for c in range(shares.size)])
    large = sizes >= LARGE_CLUSTER
    large[0] = False
    core = (sign != 0) & large[:, None] & (listed >= COMMON)[None, :]
    s_sec = np.array([0.0] + [_secondary_shift(s) for s in shares[1:]])
    target = _section6()["table6_population"]["conditions_per_person"]["mean"]

    free = (sign == 0) & (secondary == 0)
    free[0] = False

    def shifts(alpha):
        eta0 = logit(listed) + alpha
        shift = _shifts(eta0, sign, delta, core, secondary, s_sec)
        return eta0, shift, _representative(eta0, shift, shares, free)

    def excess(alpha):
        # the free cells at their prevalence averaged over the texture's two signs: the expected count is
        # then the target for the typical draw (the texture's convexity would otherwise raise it)
        eta0, shift, scale = shifts(alpha)
        prof = _texture_mean(eta0[None, :] + _apply_scale(shift, scale), free)
        return count_moments(prof, shares, 2)["mean"] - target

    alpha = float(brentq(excess, -3.0, 3.0, xtol=1e-12))
    eta0, shift, scale = shifts(alpha)
    for key, extra in sec_char.items():
        char[key].update(extra)
    return EhrDesign(conditions=CONDITIONS, baseline=expit(eta0), intercept=alpha, shares=shares, sign=sign,
                     delta=delta, core=core, secondary=secondary, secondary_shift=s_sec,
                     representative_scale=scale, shift=_apply_scale(shift, scale), characterisation=char)


def _sinkhorn(kernel: np.ndarray, rows: np.ndarray, cols: np.ndarray, tol: float = 1e-13) -> np.ndarray:
    """The joint table ``diag(a) kernel diag(b)`` with the given margins (iterative proportional fitting).

    Hand-written: IPF is a few lines and neither numpy nor scipy ships it.
    """
    a = np.ones(rows.size)
    b = np.ones(cols.size)
    for _ in range(10_000):
        a = rows / (kernel @ b)
        b = cols / (kernel.T @ a)
        joint = a[:, None] * kernel * b[None, :]
        if np.abs(joint.sum(axis=1) - rows).max() < tol:
            break
    return joint


def region_joint() -> np.ndarray:
    """P(cluster, region) of the region allocation, (C, 13): margins Table 7's shares and Table 6's."""
    design = ehr_design()
    regions = _regions()
    ids = [r for r, _, _ in regions]
    shares = np.array([s for _, _, s in regions])
    kernel = np.ones((design.n_clusters, len(ids)))
    for c, (where, _) in REGION_CONCENTRATION.items():
        for r in where:
            kernel[c - 1, ids.index(r)] = REGION_ODDS
    return _sinkhorn(kernel, design.shares, shares)


def prevalences(codes: np.ndarray, labels: np.ndarray, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Empirical prevalence of each condition per cluster (C, Q; NaN for an empty cluster) and overall (Q,).

    ``codes`` are 0/1 (``no``/``yes``) with no missing values; ``labels`` 0-based.
    """
    x = np.asarray(codes) == 1
    z = np.asarray(labels, dtype=np.int64)
    if x.shape[0] == 0:
        return np.full((n_clusters, x.shape[1]), np.nan), np.full(x.shape[1], np.nan)
    n_c = np.bincount(z, minlength=n_clusters)
    order = np.argsort(z, kind="stable")
    starts = np.concatenate([[0], np.cumsum(n_c)[:-1]])
    sums = np.zeros((n_clusters, x.shape[1]))
    present = n_c > 0
    # one pass over the rows sorted by cluster, summed per block (no per-row Python loop)
    sums[present] = np.add.reduceat(x[order].astype(np.int32), starts[present], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = sums / n_c[:, None]
    return per, x.mean(axis=0)


def log_odds_ratio(p: np.ndarray, ref: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """``logit(p) - logit(ref)`` with both clipped to ``[eps, 1 - eps]`` (the characterisation scale)."""
    p = np.clip(p, eps, 1 - eps)
    ref = np.clip(ref, eps, 1 - eps)
    return logit(p) - logit(ref)


def _draw_values(g: np.random.Generator, prob: np.ndarray, n_rows: int, min_conditions: int) -> np.ndarray:
    """``n_rows`` people of one cluster, conditions independent given the cluster, count >= min_conditions."""
    out = np.empty((n_rows, prob.size), dtype=np.int16)
    todo = np.arange(n_rows)
    p32 = prob.astype(np.float32)
    while todo.size:
        draw = g.random((todo.size, prob.size), dtype=np.float32) < p32[None, :]
        out[todo] = draw
        todo = todo[draw.sum(axis=1) < min_conditions]  # rejection: redraw whole people until selected
    return out


def _texture(g: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """The log-odds texture: +-TEXTURE with a random sign on every cell (only the free cells use it)."""
    return np.where(g.random(shape) < 0.5, -TEXTURE, TEXTURE)


def simulate_ehr(*, n: int = PAPER_N, n_silos: int | None = None, allocation: str = "uniform",
                 rng: RngLike = None, min_conditions: int = 2) -> SimulatedData:
    """Simulate the synthetic multimorbidity cohort (module docstring: design, effect sizes, streams).

    Parameters
    ----------
    n : int
        Cohort size (the paper's 289,821 by default); cluster sizes are Table 7's scaled by largest
        remainder.
    n_silos : int, optional
        Silos of the uniform allocation (default 30, the paper's). The region allocation has exactly the 13
        regions of Table 6: ``n_silos`` must then be omitted or 13.
    allocation : {"uniform", "region"}
        Each person to a silo uniformly at random, or to a region with Table 6's shares and the modest
        cluster concentrations of :data:`REGION_CONCENTRATION`.
    rng : int, Generator, SeedSequence or None
        Root of the random streams.
    min_conditions : int
        Selection of the cohort: everyone has at least this many conditions (2 in the paper; 0 disables).

    Returns
    -------
    SimulatedData
        80 binary variables (``"no"``, ``"yes"``), 27 clusters; ``characterisation`` holds the designed high
        and low conditions per cluster (Table 8's and the secondary ones), ``details`` the condition names,
        baselines, shifts, allocation.
    """
    alloc = str(allocation).strip().lower()
    if alloc not in ALLOCATIONS:
        raise ConfigError(f"The 'allocation' parameter of simulate_ehr must be one of {ALLOCATIONS}. "
                          f"Got {allocation!r} instead.")
    regions = _regions()
    if n_silos is not None and (isinstance(n_silos, bool) or not isinstance(n_silos, int | np.integer)):
        raise ConfigError(f"The 'n_silos' parameter of simulate_ehr must be an integer or None. "
                          f"Got {n_silos!r} instead.")
    if alloc == "region":
        if n_silos is not None and int(n_silos) != len(regions):
            raise ConfigError(f"The 'n_silos' parameter of simulate_ehr must be omitted or {len(regions)} with "
                              f"allocation='region' (the silos are Table 6's {len(regions)} regions). "
                              f"Got {n_silos!r} instead.")
        n_s = len(regions)
    else:
        n_s = 30 if n_silos is None else int(n_silos)
        if n_s < 1:
            raise ConfigError(f"The 'n_silos' parameter of simulate_ehr must be an integer >= 1. "
                              f"Got {n_silos!r} instead.")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2 * n_s:
        raise ConfigError(f"The 'n' parameter of simulate_ehr must be an integer >= {2 * n_s} (two people per "
                          f"silo). Got {n!r} instead.")
    if isinstance(min_conditions, bool) or not isinstance(min_conditions, int | np.integer) or not (
            0 <= min_conditions <= len(CONDITIONS)):
        raise ConfigError(f"The 'min_conditions' parameter of simulate_ehr must be an integer in [0, "
                          f"{len(CONDITIONS)}]. Got {min_conditions!r} instead.")
    n = int(n)
    design = ehr_design()
    n_c, q_count = design.sign.shape

    root = as_seed_sequence(rng)
    s_texture, s_order, s_alloc, s_values = (np.random.default_rng(s) for s in root.spawn(4))
    texture = _texture(s_texture, (n_c, q_count))
    prof = design.profiles(texture)
    moments = count_moments(prof, design.shares, int(min_conditions))
    if moments["rejected"].max() > 0.999:
        # the rejection sampler below would (practically) never finish
        raise ConfigError(f"The 'min_conditions' parameter of simulate_ehr is too large: {min_conditions} or "
                          "more conditions are reached by fewer than 1 in 1000 people of some cluster. "
                          "Expected a small threshold (the paper's is 2).")

    counts = cluster_counts(n)
    z = s_order.permutation(np.repeat(np.arange(n_c), counts))
    codes = np.empty((n, q_count), dtype=np.int16)
    order = np.argsort(z, kind="stable")  # people of cluster 0, then 1, ... each in person order
    start = 0
    for c in range(n_c):
        idx = order[start:start + counts[c]]
        start += counts[c]
        codes[idx] = _draw_values(s_values, prof[c], idx.size, int(min_conditions))

    if alloc == "uniform":
        silo_of = s_alloc.integers(0, n_s, size=n)
        names = [f"silo_{s + 1}" for s in range(n_s)]
        weights = np.tile(design.shares, (n_s, 1))
        region_info = None
    else:
        joint = region_joint()
        cond = joint / joint.sum(axis=1, keepdims=True)  # P(region | cluster)
        cdf = np.cumsum(cond, axis=1)
        u = s_alloc.random(n)
        silo_of = np.minimum((u[:, None] >= cdf[z]).sum(axis=1), n_s - 1)
        names = [f"silo_{r}" for r, _, _ in regions]
        weights = (joint / joint.sum(axis=0, keepdims=True)).T  # P(cluster | region)
        region_info = {f"silo_{r}": name for r, name, _ in regions}
    sizes = np.bincount(silo_of, minlength=n_s)
    if sizes.min() < 2:
        bad = names[int(np.argmin(sizes))]
        raise ConfigError(f"simulate_ehr: silo {bad!r} received {int(sizes.min())} people; every silo needs at "
                          f"least 2. Raise 'n' (got {n}) or use fewer silos.")

    schema = Schema(tuple(Variable(c.id, ("no", "yes")) for c in CONDITIONS))
    silos, labels = [], []
    for s in range(n_s):
        rows = np.flatnonzero(silo_of == s)
        silos.append(SiloData(names[s], codes[rows], schema, source=f"simulated {names[s]}"))
        labels.append(z[rows].astype(np.int64))
    flat = np.empty((n_c, 2 * q_count))
    flat[:, 0::2] = 1.0 - prof
    flat[:, 1::2] = prof
    moments = count_moments(prof, counts / n, int(min_conditions))  # with the realised cluster sizes
    details = {
        "condition_names": {c.id: c.name for c in CONDITIONS},
        "baseline_prevalence": {c.id: float(b) for c, b in zip(CONDITIONS, design.baseline, strict=True)},
        "calibration_intercept": design.intercept,
        "effect_log_odds": {f"cluster_{c + 1}": float(design.delta[c]) for c in range(n_c)},
        "texture_half_width": TEXTURE,
        "texture": "each free condition of clusters 2..27 shifted by +-texture_half_width (random sign)",
        "core_prevalence": P_CORE,
        "secondary_log_odds": {f"cluster_{c + 1}": float(design.secondary_shift[c]) for c in range(n_c)},
        # every designed (Table 8) and secondary cell: its log-odds shift from the baseline (cluster 1)
        "designed_log_odds": {f"cluster_{c + 1}": {CONDITIONS[q].id: float(design.shift[c, q])
                                                   for q in np.flatnonzero(design.shift[c])}
                              for c in range(n_c)},
        # conditions whose shifts were scaled down to keep cluster 1 representative (factor on the side)
        "representative_scale": {CONDITIONS[q].id: {"positive": float(design.representative_scale[0, q]),
                                                    "negative": float(design.representative_scale[1, q])}
                                 for q in np.flatnonzero((design.representative_scale < 1).any(axis=0))},
        "min_conditions": int(min_conditions),
        "expected_conditions_per_person": {"mean": moments["mean"], "sd": moments["sd"]},
        # what a fitted model of the selected cohort should find (the profiles are before the selection)
        "selected_prevalence": {f"cluster_{c + 1}": dict(zip((x.id for x in CONDITIONS), row.tolist(),
                                                              strict=True))
                                for c, row in enumerate(selected_prevalences(prof, int(min_conditions)))},
        "allocation": alloc,
        "cluster_sizes": counts.tolist(),
        "regions": region_info,
        "region_concentration": ({f"cluster_{c}": {"regions": list(r), "odds": REGION_ODDS, "reason": why}
                                  for c, (r, why) in REGION_CONCENTRATION.items()} if alloc == "region" else None),
    }
    return SimulatedData(silos=tuple(silos), labels=tuple(labels), weights=weights,
                         global_weights=counts / n, profiles=flat, n_modalities=(2,) * q_count, schema=schema,
                         design="ehr", separability=None, seed=root_entropy(rng), missing_rate=0.0,
                         characterisation=design.characterisation, details=details)
