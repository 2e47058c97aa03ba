"""Calibrated Ball matching: calibration of the closeness test on exact conjugate summaries, recovery of the
right matching where it is known, the same-silo constraint, invariance, and the paper's Ball as contrast."""

import numpy as np
import pytest
from scipy.stats import chi2

from vcmc.closeness import closeness_statistic, closeness_threshold, constrained_groups
from vcmc.config import MatchingConfig
from vcmc.exceptions import ConfigError
from vcmc.matching import match, match_ball, match_calibrated
from vcmc.matching.calibrated import cluster_closeness
from vcmc.research.simulate import simulate
from vcmc.research.study.evaluate import appendix_a_silos, evaluate_matching, local_cluster_identity


def _oracle(n_per_silo, weights, n_modalities, concentration, seed, n_draws=400):
    """Data and the exact conjugate summaries of its TRUE local partitions (the right matching is known)."""
    data = simulate(n_per_silo=n_per_silo, weights=weights, n_modalities=n_modalities,
                    concentration=concentration, rng=seed)
    summaries, _, local_labels = appendix_a_silos([s.codes for s in data.silos], list(data.labels),
                                                  data.n_modalities, n_draws=n_draws, rng=seed + 100)
    return data, summaries, local_labels


def _same_and_other_pairs(summaries, local_labels, data):
    close = cluster_closeness(summaries)
    ident = np.concatenate(local_cluster_identity(local_labels, list(data.labels)))
    silo = close["silo_index"]
    upper = np.triu(np.ones_like(close["statistic"], dtype=bool), 1)
    same = upper & (ident[:, None] == ident[None, :]) & (silo[:, None] != silo[None, :])
    other = upper & (ident[:, None] != ident[None, :])
    return close["statistic"][same], close["statistic"][other], close["n_coordinates"]


# -------------------------------------------------------------------------------- calibration
@pytest.mark.parametrize(("n_modalities", "concentration", "n_rows"), [
    ((2,) * 4 + (3,) * 6, 1.0, 1000),      # the paper's variables, poor separability
    ((6,) * 10, 1.0, 2000),                # many modalities, moderate probabilities
])
def test_the_statistic_of_two_silos_estimates_of_one_cluster_is_chi_square(n_modalities, concentration,
                                                                           n_rows):
    # Under "same profile" with independent, near-normal conjugate posteriors, T ~ chi2_D: its mean is D
    # and it exceeds the chi2_D quantile q in a fraction 1 - q of the pairs (8 silos x 6 clusters x 5
    # datasets = 840 pairs; binomial standard error of a 10% rate about 1%, pairs sharing a silo add a little).
    stats, dims = [], []
    for seed in range(5):
        data, summaries, labels = _oracle(n_rows, np.full((8, 6), 1 / 6), n_modalities, concentration, seed)
        same, _, d = _same_and_other_pairs(summaries, labels, data)
        stats.append(same)
        dims.append(d)
    t, d = np.concatenate(stats), dims[0]
    assert t.mean() / d == pytest.approx(1.0, abs=0.08)
    for q, tol in [(0.5, 0.08), (0.9, 0.04), (0.99, 0.015)]:
        assert np.mean(t > chi2.ppf(q, d)) == pytest.approx(1 - q, abs=tol)


def test_with_rare_modalities_the_test_is_conservative_for_one_cluster_and_still_separates_two():
    # Profiles near 0/1 (Dirichlet 0.3, 80 binary variables, ~50 members per cluster): both posteriors
    # carry the prior's pseudo-counts, so two estimates of one profile differ less than their spread and
    # T falls below chi2_D (links are easier), while distinct clusters stay far beyond the threshold.
    data, summaries, labels = _oracle(300, np.full((8, 6), 1 / 6), (2,) * 80, 0.3, 3)
    same, other, d = _same_and_other_pairs(summaries, labels, data)
    threshold = closeness_threshold(d)
    assert np.mean(same > threshold) < 0.001
    assert other.min() > 5 * threshold


# ------------------------------------------------------------------------------------ recovery
@pytest.mark.parametrize("seed", [1, 2])
def test_wide_data_with_single_silo_clusters_is_matched_exactly(seed):
    # 8 silos x 500, 20 variables x 4 modalities, 6 clusters everywhere + 2 each in one silo only: the
    # paper's radius (log n / n)^(1/4) = 0.44 is far below the distance between two estimates of one
    # profile in 60 coordinates, so Ball links almost nothing; the calibrated test links exactly the truth.
    w = np.zeros((8, 8))
    w[:, :6] = 1
    w[0, 6] = w[1, 7] = 1
    w /= w.sum(axis=1, keepdims=True)
    data, summaries, labels = _oracle(500, w, (4,) * 20, 0.5, seed)
    got = evaluate_matching(match_calibrated(summaries), labels, list(data.labels))
    assert got["correct"] and got["n_global"] == 8
    paper = evaluate_matching(match_ball(summaries), labels, list(data.labels))
    assert paper["n_global"] > 16


@pytest.mark.parametrize(("design", "separability"), [("nested", "poor"), ("non-nested", "poor"),
                                                      ("homogeneous", "poor"), ("non-nested", "easy")])
def test_the_papers_designs_are_matched_exactly_from_true_partitions(mh, design, separability):
    data, summaries, _, labels = mh.appendix_a(design, separability, 11, n_draws=400)
    got = evaluate_matching(match(summaries, MatchingConfig()), labels, list(data.labels))
    assert got["correct"]


def test_sixteen_unequal_silos_with_regional_clusters():
    s = 16
    w = np.zeros((s, 10))
    w[:, :6] = 1
    w[[0, 1], 6] = 1
    w[2, 7] = 1
    w[[5, 6], 8] = 1
    w[9, 9] = 1
    w /= w.sum(axis=1, keepdims=True)
    sizes = np.linspace(200, 800, s).astype(int)
    data, summaries, labels = _oracle(sizes, w, (3,) * 25, 0.5, 4, n_draws=300)
    got = evaluate_matching(match_calibrated(summaries), labels, list(data.labels))
    assert got["correct"] and got["n_global"] == 10


# ---------------------------------------------------------------------------- the constraint
def test_a_poorly_known_cluster_does_not_chain_two_clusters_its_silo_keeps_apart():
    # One silo keeps A and B apart (T(A, B) is huge); a cluster of another silo with a very wide posterior
    # is close to both. Plain connected components would merge all three.
    mean = np.array([[0.2, 0.2], [0.8, 0.8], [0.5, 0.5]])
    var = np.array([[1e-4, 1e-4], [1e-4, 1e-4], [0.05, 0.05]])
    t = closeness_statistic(mean, var)
    thr = closeness_threshold(2)
    assert t[0, 2] <= thr and t[1, 2] <= thr and t[0, 1] > thr
    group = constrained_groups(t, thr, silo_index=[0, 0, 1])
    assert group[0] != group[1]
    assert group[2] in (group[0], group[1])
    # two clusters of one silo that ARE close to each other are merged, as Ball merges local duplicates
    mean2 = np.array([[0.5, 0.5], [0.505, 0.5], [0.5, 0.5]])
    var2 = np.full((3, 2), 1e-3)
    g2 = constrained_groups(closeness_statistic(mean2, var2), thr, silo_index=[0, 0, 1])
    assert len(set(g2.tolist())) == 1


# ---------------------------------------------------------------------------------- invariance
def test_result_does_not_depend_on_silo_order_nor_local_labels(mh):
    data, summaries, _, _ = mh.appendix_a("non-nested", "poor", 5, n_draws=200)
    base = match_calibrated(summaries)
    rng = np.random.default_rng(0)
    shuffled = [mh.permute_clusters(s, rng.permutation(s.n_clusters)) for s in summaries][::-1]
    other = match_calibrated(shuffled)
    assert mh.canonical_pairs(base, summaries) == mh.canonical_pairs(other, shuffled)
    assert base.n_global == other.n_global


def test_details_and_bad_level():
    data, summaries, _ = _oracle(400, np.full((3, 3), 1 / 3), (2,) * 6, 0.5, 0, n_draws=50)
    m = match(summaries, MatchingConfig(method="calibrated", level=0.99))
    assert m.method == "calibrated"
    assert m.details["threshold"] == pytest.approx(chi2.ppf(0.99, 6))
    assert m.details["n_coordinates"] == 6
    with pytest.raises(ConfigError, match="'level' parameter of MatchingConfig must be a float in"):
        MatchingConfig(level=1.0)
    with pytest.raises(ConfigError, match="'level' parameter of match_calibrated"):
        match_calibrated(summaries, level=0.2)
