"""A synthetic multimorbidity cohort shaped like the paper's application (section 6, Tables 6-8).

The paper clusters 289,821 UK primary-care patients over 80 with at least two long-term conditions into 27
clusters (Table 7 sizes, Table 8 characterisation), the data split into 30 shards uniformly at random. The
real records are not public, so :func:`simulate_ehr` generates a cohort of the same shape from a latent
class model whose truth is known:

* **80 binary conditions** (modalities ``("no", "yes")``): every condition named in Table 8 and the text of
  section 6, plus common long-term conditions of the over-80s (:data:`CONDITIONS`). The baseline
  prevalences are rough orders of magnitude for UK primary care at that age, not estimates; one common
  log-odds intercept is then calibrated (exactly, see :func:`count_moments`) so that the cohort's expected
  mean number of conditions is Table 6's 6.2.
* **27 clusters** with Table 7's sizes scaled to ``n`` by largest remainder (``n = 289,821`` reproduces
  them exactly).
* **Cluster profiles** (:func:`ehr_design`). Cluster 1 is the baseline itself ("no specific condition").
  In cluster ``c``, each condition Table 8 lists as high has its log-odds raised by ``delta_c``, each one
  listed as low lowered by ``delta_c``; every other condition of clusters 2..27 gets a "texture" shift drawn
  uniformly in ``[-TEXTURE, TEXTURE]`` (0.5, odds ratios within 0.6-1.65) on the log-odds scale. The
  texture is what makes the truth identifiable at all: a two-class mixture of products that differ in one
  variable is itself a product distribution, so without it clusters that Table 8 tells apart by a single
  condition (4 and 8, 5 and 6, 9 and 10, and every large cluster from cluster 1) could not be separated
  from any amount of data.
* **Effect size** ``delta_c`` (the choice, and why): the log-odds shift at which the designed conditions
  of an average member carry evidence ``log(1 / w_c)`` against the baseline profile (their Kullback-Leibler
  divergence from it), ``w_c`` the cluster's Table 7 share: exactly the prior odds against the cluster, so
  an average member is at the boundary of being recognised. The shift is at least :data:`DELTA_MIN` (odds
  ratio 7.4) and at most a cap rising log-linearly from :data:`DELTA_MIN` for clusters of 5% or more to
  :data:`DELTA_MAX` for clusters of 0.01% (shifts from 2.0 for clusters 4, 5, 7, 9 to 7.2 for cluster 27).
  The cap keeps cluster 1 representative of the cohort, as Table 8 says it is: stroke is raised in 16% of
  the cohort and chronic cardiac disorders in 17%, so larger shifts for the large clusters would leave
  cluster 1 clearly "low" in them (with 2.0 it stays within 0.7 log-odds of the cohort in every condition).
  The small clusters need large shifts: a cluster of 31 people out of 289,821 must carry ~9 nats per
  member to be seen at all. Result: every designed condition is at least 1.3 log-odds (odds ratio 3.7)
  from the cohort's prevalence in the designed direction, every other one within about 1.0 (0.7 for
  cluster 1). The signal is real in the prevalences, but recovering the partition is hard, harder than
  the paper's "poor" scenario: the Bayes classifier with the true parameters has an adjusted Rand index of
  ~0.17 (the paper's poor design: ~0.7), recalls 12-31% of the large single-condition clusters (3-9,
  which cluster 1 matches in everything but one or two conditions it also has at baseline) and 50-85%
  of most small ones. The paper's section 7.1 argues poorly separable clusters are the realistic case.
* **Mean and sd**: the expected number of conditions is Table 6's 6.2 (exactly without the texture, 6.17
  for a typical texture draw); its sd is ~2.2, below Table 6's 3.1: within a cluster the count is
  Poisson-binomial (variance below its mean), so a sd of 3.1 needs clusters that differ in overall burden,
  i.e. a cluster 1 with fewer conditions than the cohort, against Table 8's "representative".
* **Selection**: like the paper's cohort, everyone has at least ``min_conditions`` (2) conditions: a person
  drawn with fewer is redrawn from their cluster's profile (exact rejection sampling of the truncated
  distribution). The model is thus a latent class model conditioned on the count, as the real cohort is
  (the fitted model ignores the truncation, a mild misspecification: under 1% of draws are rejected).
* **Shards**: ``allocation="uniform"`` sends each person to one of ``n_silos`` silos uniformly at random
  (the paper's, 30 silos); ``allocation="region"`` uses the 13 regions of Table 6 as silos
  (``silo_<region>``), with a modest heterogeneity (:data:`REGION_CONCENTRATION`): a few clusters are three
  times as likely (odds) to live in a few regions, the joint cluster x region table being fitted by
  iterative proportional fitting so that the expected region shares stay Table 6's and the cluster sizes
  stay Table 7's.

Randomness: the root ``rng`` becomes a ``SeedSequence`` spawned into four children: 0 draws the texture, 1
the order of the people (which person is in which cluster), 2 the allocation to silos, 3 the conditions.
So the uniform and region allocations of one seed hold the same people with the same conditions, only
placed in other silos.
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
from vcmc.simulate import SimulatedData

__all__ = ["ALLOCATIONS", "CONDITIONS", "DELTA_MAX", "DELTA_MIN", "REGIONS", "REGION_CONCENTRATION",
           "REGION_ODDS", "TEXTURE", "Condition", "EhrDesign", "cluster_counts", "count_moments", "ehr_design",
           "log_odds_ratio", "prevalences", "region_joint", "selected_prevalences", "simulate_ehr"]

ALLOCATIONS: tuple[str, ...] = ("uniform", "region")

#: The paper's cohort size (section 6).
PAPER_N = 289_821

#: Smallest designed log-odds shift (odds ratio e^2 = 7.4), used by the large clusters.
DELTA_MIN = 2.0
#: Largest designed log-odds shift, reached by a cluster of 0.01% of the cohort (odds ratio ~3000).
DELTA_MAX = 8.0
#: Cluster shares between which the cap on the shift rises log-linearly from DELTA_MIN to DELTA_MAX.
_CAP_SHARES = (0.05, 1e-4)
#: Half-width of the uniform log-odds texture on the non-designed conditions of clusters 2..27.
TEXTURE = 0.5


@dataclass(frozen=True)
class Condition:
    """One long-term condition: column name, display name, baseline prevalence (cluster 1)."""

    id: str
    name: str
    baseline: float


def _c(id_, name, baseline):
    return Condition(id_, name, baseline)


#: The 80 conditions, in column order. Baselines are rough orders of magnitude for UK primary-care
#: patients over 80 with >= 2 long-term conditions (before the common calibration of the mean); umbrella
#: groups of the paper ("chronic cardiac disorders", "cancers", ...) are the "other" members of their group.
CONDITIONS: tuple[Condition, ...] = (
    # cardiovascular
    _c("hypertension", "Hypertension", 0.60),
    _c("chronic_cardiac", "Chronic cardiac disorders (other)", 0.20),
    _c("coronary_heart_disease", "Coronary heart disease", 0.22),
    _c("atrial_fibrillation", "Atrial fibrillation", 0.17),
    _c("arrhythmia", "Arrhythmia (other than atrial fibrillation)", 0.05),
    _c("heart_failure", "Heart failure", 0.09),
    _c("heart_valve_disease", "Heart valve disease", 0.06),
    _c("cardiomyopathy", "Cardiomyopathy", 0.01),
    _c("congenital_heart_disease", "Congenital heart disease", 0.004),
    _c("peripheral_vascular_disease", "Peripheral vascular disease", 0.05),
    _c("aortic_aneurysm", "Aortic aneurysm", 0.02),
    _c("stroke", "Stroke", 0.12),
    _c("coagulopathy", "Coagulopathy", 0.02),
    _c("venous_thromboembolism", "Venous thromboembolism", 0.05),
    _c("hyperlipidaemia", "Hyperlipidaemia", 0.22),
    # endocrine, metabolic, renal
    _c("type2_diabetes", "Type-2 diabetes mellitus", 0.17),
    _c("type1_diabetes", "Type-1 diabetes", 0.005),
    _c("thyroid_disorders", "Thyroid disorders", 0.14),
    _c("obesity", "Obesity", 0.08),
    _c("chronic_kidney_disease", "Chronic kidney disease", 0.22),
    _c("gout", "Gout", 0.07),
    # musculoskeletal and connective tissue
    _c("osteoarthritis", "Osteoarthritis", 0.38),
    _c("osteoporosis", "Osteoporosis", 0.15),
    _c("skeletal_disorders", "Skeletal disorders (other)", 0.12),
    _c("rheumatoid_arthritis", "Rheumatoid arthritis", 0.03),
    _c("polymyalgia_rheumatica", "Polymyalgia rheumatica", 0.05),
    _c("ankylosing_spondylitis", "Ankylosing spondylitis", 0.003),
    _c("sjogrens_syndrome", "Sjögren's syndrome", 0.004),
    _c("autoimmune_disorders", "Autoimmune disorders (other)", 0.01),
    _c("fibromyalgia", "Fibromyalgia", 0.005),
    # skin
    _c("psoriasis", "Psoriasis", 0.04),
    _c("dermatological_disorders", "Dermatological disorders (other)", 0.08),
    _c("vitiligo", "Vitiligo", 0.003),
    _c("alopecia", "Alopecia", 0.004),
    # respiratory and ENT
    _c("asthma", "Asthma", 0.10),
    _c("copd", "Chronic obstructive pulmonary disease", 0.10),
    _c("bronchiectasis", "Bronchiectasis", 0.02),
    _c("pulmonary_fibrosis", "Pulmonary fibrosis", 0.01),
    _c("obstructive_sleep_apnoea", "Obstructive sleep apnoea", 0.01),
    _c("sinusitis", "Chronic sinusitis", 0.03),
    _c("rhinoconjunctivitis", "Allergic rhinoconjunctivitis", 0.05),
    # senses
    _c("deafness", "Deafness", 0.25),
    _c("ophthalmic_disorders", "Ophthalmic disorders", 0.30),
    _c("uveitis", "Uveitis", 0.005),
    _c("scleritis", "Scleritis", 0.002),
    # neurological and mental health
    _c("dementia", "Dementia", 0.12),
    _c("vascular_dementia", "Vascular dementia", 0.03),
    _c("parkinsons_disease", "Parkinson's disease", 0.02),
    _c("epilepsy", "Epilepsy", 0.015),
    _c("multiple_sclerosis", "Multiple sclerosis", 0.002),
    _c("neurological_disorders", "Neurological disorders (other)", 0.04),
    _c("migraine", "Migraine", 0.02),
    _c("depression", "Depression", 0.15),
    _c("anxiety", "Anxiety", 0.10),
    _c("serious_mental_illness", "Serious mental illness", 0.015),
    _c("learning_disability", "Learning disability", 0.002),
    _c("adhd", "Attention deficit hyperactivity disorder", 0.0005),
    _c("alcohol_problems", "Alcohol problems", 0.015),
    _c("substance_misuse", "Substance misuse", 0.005),
    _c("chronic_fatigue_syndrome", "Chronic fatigue syndrome", 0.003),
    # cancers and blood
    _c("cancers", "Cancers (solid, other than breast)", 0.17),
    _c("breast_cancer", "Breast cancer", 0.05),
    _c("metastatic_cancer", "Metastatic cancer", 0.015),
    _c("leukaemia", "Leukaemia", 0.01),
    _c("pernicious_anaemia", "Pernicious anaemia", 0.02),
    _c("anaemia", "Anaemia (other)", 0.07),
    _c("hiv", "HIV", 0.0005),
    # digestive
    _c("gastrointestinal_disorders", "Gastrointestinal disorders (other)", 0.10),
    _c("gord", "Gastro-oesophageal reflux disease", 0.12),
    _c("diverticular_disease", "Diverticular disease", 0.10),
    _c("inflammatory_bowel_disease", "Inflammatory bowel disease", 0.01),
    _c("coeliac_disease", "Coeliac disease", 0.005),
    _c("peptic_ulcer", "Peptic ulcer", 0.03),
    _c("pancreatitis", "Pancreatitis", 0.005),
    _c("chronic_liver_disease", "Chronic liver disease", 0.01),
    # genito-urinary and sex-specific
    _c("benign_prostatic_hyperplasia", "Benign prostatic hyperplasia", 0.08),
    _c("erectile_dysfunction", "Erectile dysfunction", 0.03),
    _c("endometriosis", "Endometriosis", 0.003),
    _c("polycystic_ovary_syndrome", "Polycystic ovary syndrome", 0.001),
    _c("urinary_incontinence", "Urinary incontinence", 0.10),
)

#: Table 8's labels (normalised: lower case, straight apostrophe, no accents) -> condition ids. The
#: paper's "X and other chronic cardiac disorders" raises X and the umbrella group.
_TABLE8_LABELS: dict[str, tuple[str, ...]] = {
    "hypertension": ("hypertension",),
    "asthma": ("asthma",),
    "chronic obstructive pulmonary disease": ("copd",),
    "bronchiectasis": ("bronchiectasis",),
    "deafness": ("deafness",),
    "ophthalmic disorders": ("ophthalmic_disorders",),
    "ophthalmic disorder": ("ophthalmic_disorders",),
    "cancers": ("cancers",),
    "cancer": ("cancers",),
    "chronic cardiac disorders": ("chronic_cardiac",),
    "chronic cardiac disorder": ("chronic_cardiac",),
    "stroke": ("stroke",),
    "hiv": ("hiv",),
    "dementia": ("dementia",),
    "breast cancer": ("breast_cancer",),
    "metastatic cancer": ("metastatic_cancer",),
    "benign prostatic hyperplasia": ("benign_prostatic_hyperplasia",),
    "type-1 diabetes": ("type1_diabetes",),
    "peripheral vascular disease": ("peripheral_vascular_disease",),
    "aortic aneurysm": ("aortic_aneurysm",),
    "endometriosis": ("endometriosis",),
    "multiple sclerosis": ("multiple_sclerosis",),
    "alcohol problems": ("alcohol_problems",),
    "serious mental illness": ("serious_mental_illness",),
    "vascular dementia": ("vascular_dementia",),
    "parkinson's disease": ("parkinsons_disease",),
    "vitiligo": ("vitiligo",),
    "obstructive sleep apnoea": ("obstructive_sleep_apnoea",),
    "polycystic ovary syndrome": ("polycystic_ovary_syndrome",),
    "arrhythmia": ("arrhythmia",),
    "atrial fibrillation": ("atrial_fibrillation",),
    "chronic fatigue syndrome": ("chronic_fatigue_syndrome",),
    "chronic fatigue disorder": ("chronic_fatigue_syndrome",),
    "cardiomyopathy and other chronic cardiac disorders": ("cardiomyopathy", "chronic_cardiac"),
    "learning disability": ("learning_disability",),
    "pulmonary fibrosis": ("pulmonary_fibrosis",),
    "adhd": ("adhd",),
    "substance misuse": ("substance_misuse",),
    "sinusitis": ("sinusitis",),
    "rhinoconjunctivitis": ("rhinoconjunctivitis",),
    "dermatological disorders": ("dermatological_disorders",),
    "uveitis": ("uveitis",),
    "gastrointestinal disorders": ("gastrointestinal_disorders",),
    "depression": ("depression",),
    "anxiety": ("anxiety",),
    "migraine": ("migraine",),
    "autoimmune disorders": ("autoimmune_disorders",),
    "skeletal disorders": ("skeletal_disorders",),
    "neurological disorders": ("neurological_disorders",),
    "fibromyalgia": ("fibromyalgia",),
    "congenital heart disease and other chronic cardiac disorders": ("congenital_heart_disease",
                                                                     "chronic_cardiac"),
    "coagulopathy": ("coagulopathy",),
    "pancreatitis": ("pancreatitis",),
    "peptic ulcer": ("peptic_ulcer",),
    "erectile dysfunction": ("erectile_dysfunction",),
    "sjogren's syndrome": ("sjogrens_syndrome",),
    "polymyalgia": ("polymyalgia_rheumatica",),
    "thyroid disorders": ("thyroid_disorders",),
    "ankylosing spondylitis": ("ankylosing_spondylitis",),
    "alopecia": ("alopecia",),
    "scleritis": ("scleritis",),
    "heart valve disease": ("heart_valve_disease",),
    "heart failure and other chronic cardiac disorder": ("heart_failure", "chronic_cardiac"),
    "gout": ("gout",),
    "chronic kidney disease": ("chronic_kidney_disease",),
    "type-2 diabetes mellitus": ("type2_diabetes",),
    "inflammatory bowel disease": ("inflammatory_bowel_disease",),
    "coeliac disease": ("coeliac_disease",),
    "pernicious anaemia": ("pernicious_anaemia",),
    "leukaemia": ("leukaemia",),
    "psoriasis": ("psoriasis",),
}

#: Clusters (1-based, Table 7/8 numbering) made three times as likely (odds) to live in some regions, with
#: the epidemiological reason. Modest on purpose: each listed cluster still lives in every region.
REGION_CONCENTRATION: dict[int, tuple[tuple[str, ...], str]] = {
    2: (("north_east", "north_west", "scotland", "wales"),
        "respiratory disease (asthma, COPD, bronchiectasis) is commoner in the former industrial regions"),
    7: (("london",), "HIV (raised in cluster 7) is most prevalent in London"),
    9: (("south_east_coast", "south_west"), "dementia: coastal retirement areas hold the oldest populations"),
    13: (("scotland",), "peripheral vascular disease and aortic aneurysm: higher cardiovascular burden"),
    25: (("west_midlands", "london"), "type-2 diabetes and chronic kidney disease: higher in South Asian "
                                      "communities"),
    26: (("northern_ireland", "scotland"), "coeliac disease and pernicious anaemia: commoner in Irish and "
                                           "Scottish ancestry"),
}
#: Odds multiplier of a concentrated (cluster, region) pair.
REGION_ODDS = 3.0


def _region_id(name: str) -> str:
    return name.lower().replace("&", "and").replace(" ", "_")


def _norm_label(label: str) -> str:
    text = unicodedata.normalize("NFKD", label.replace("\u2019", "'")).encode("ascii", "ignore").decode()
    return " ".join(text.lower().strip().rstrip(",").split())


@cache
def _section6() -> dict:
    """Section 6 of the paper: Table 7 from ``paper_tables.json`` (a verbatim copy of the project's
    reference), Tables 6 and 8 from ``paper_tables_section6.json`` beside it."""
    # Read the package files directly: importing vcmc.study would pull in the study runner and plotting
    # (~0.3 s) for two JSON files.
    folder = resources.files("vcmc").joinpath("study")
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

    ``logit p[c, q] = logit baseline[q] + sign[c, q] * delta[c] (+ texture[c, q])``.

    Attributes
    ----------
    conditions : tuple of Condition
        Baselines as listed (before calibration).
    baseline : numpy.ndarray (Q,)
        Calibrated baseline prevalences: cluster 1's profile.
    intercept : float
        The common log-odds shift added to the listed baselines so that the cohort's expected number of
        conditions is Table 6's mean (texture left out).
    shares : numpy.ndarray (C,)
        Table 7's cluster shares.
    sign : numpy.ndarray (C, Q) of int
        +1 for a designed high condition, -1 for a designed low one, 0 otherwise.
    delta : numpy.ndarray (C,)
        Designed log-odds shift of each cluster (0 for cluster 1).
    characterisation : dict
        ``{"cluster_c": {"high": [ids], "low": [ids]}}``.
    """

    conditions: tuple[Condition, ...]
    baseline: np.ndarray
    intercept: float
    shares: np.ndarray
    sign: np.ndarray
    delta: np.ndarray
    characterisation: dict

    @property
    def n_clusters(self) -> int:
        return int(self.shares.size)

    def profiles(self, texture: np.ndarray | None = None) -> np.ndarray:
        """Prevalence of every condition in every cluster, (C, Q); ``texture`` (C, Q) on the log-odds scale
        is added where ``sign == 0`` in clusters 2..C."""
        return _profiles(logit(self.baseline), self.sign, self.delta, texture)


def _profiles(eta0, sign, delta, texture=None):
    eta = eta0[None, :] + sign * delta[:, None]
    if texture is not None:
        free = sign == 0
        free[0] = False
        eta = eta + np.where(free, texture, 0.0)
    return expit(eta)


def _delta_cap(share: float) -> float:
    hi, lo = _CAP_SHARES
    t = np.clip(np.log(hi / share) / np.log(hi / lo), 0.0, 1.0)
    return float(DELTA_MIN + (DELTA_MAX - DELTA_MIN) * t)


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
                                      "vcmc.ehr; expected one of the known labels.") from None
                for t in targets:
                    if t not in chosen:
                        chosen.append(t)
                        sign[c, pos[t]] = s
            out[key] = chosen
        char[f"cluster_{c + 1}"] = out
    return sign, char


@cache
def ehr_design() -> EhrDesign:
    """The designed profiles' deterministic part (cached): calibrated baselines, shifts, characterisation.

    The shifts ``delta`` are set on the listed baselines; then one common log-odds intercept is solved so
    that the cohort's expected number of conditions (exact, :func:`count_moments`, with the selection
    ``count >= 2``) is Table 6's mean.
    """
    sizes = np.asarray(_section6()["cluster_sizes"], dtype=np.float64)
    shares = sizes / sizes.sum()
    sign, char = _table8_signs()
    listed = np.array([c.baseline for c in CONDITIONS])
    delta = np.array([_delta(shares[c], listed, sign[c]) for c in range(shares.size)])
    target = _section6()["table6_population"]["conditions_per_person"]["mean"]

    def excess(alpha):
        return count_moments(_profiles(logit(listed) + alpha, sign, delta), shares, 2)["mean"] - target

    alpha = float(brentq(excess, -3.0, 3.0, xtol=1e-12))
    return EhrDesign(conditions=CONDITIONS, baseline=expit(logit(listed) + alpha), intercept=alpha,
                     shares=shares, sign=sign, delta=delta, characterisation=char)


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
        and low conditions per cluster, ``details`` the condition names, baselines, shifts, allocation.
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
    texture = s_texture.uniform(-TEXTURE, TEXTURE, size=(n_c, q_count))
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
