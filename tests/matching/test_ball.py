import math

import numpy as np
import pytest

from vcmc.config import MatchingConfig, PriorConfig
from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.matching import build_matched_draws, match, match_ball
from vcmc.matching.ball import ball_radius
from vcmc.research.study.evaluate import correct_matching, evaluate_matching
from vcmc.research.study.oracle import oracle_posterior_and_summary


def test_radius_rates_from_method_md():
    # docs/design.md §5.4: n_s = 1000 gives r ~ 0.288; the EHR shards (n_s ~ 9,661) give r ~ 0.176
    assert ball_radius(1000) == pytest.approx(0.288, abs=1e-3)
    assert ball_radius(9661) == pytest.approx(0.176, abs=1e-3)
    assert ball_radius(1000, "finite") == pytest.approx(math.sqrt(math.log(1000) / 1000))
    assert ball_radius(1000, 0.05) == 0.05


@pytest.mark.parametrize("bad", ["wide", -1.0, 0, True])
def test_radius_rejects_invalid_values(bad):
    with pytest.raises(ConfigError, match="'radius' parameter of match_ball"):
        ball_radius(1000, bad)


def test_radius_needs_two_rows():
    with pytest.raises(ConfigError, match="at least 2 rows; got 1"):
        ball_radius(1, "overfitted")


def test_mutual_closeness_uses_the_smaller_radius(mh):
    # silo a: n = 1000, r = 0.288; silo b: n = 100000, r = (log 1e5 / 1e5)^(1/4) = 0.104
    a = mh.make_summary("a", mh.binary_profiles([[0.2], [0.8]]), n_rows=1000)
    b = mh.make_summary("b", mh.binary_profiles([[0.35], [0.85]]), n_rows=100_000)
    m = match_ball([a, b])
    # 0.8 vs 0.85 (0.05 apart) is within both radii; 0.2 vs 0.35 (0.15) lies only in a's ball: not mutual
    assert m.assignment[0][1] == m.assignment[1][1]
    assert m.assignment[0][0] != m.assignment[1][0]
    assert m.n_global == 3
    # both silos of 1000 rows: 0.15 < 0.288, the pair is matched
    b1000 = mh.make_summary("b", mh.binary_profiles([[0.35], [0.85]]), n_rows=1000)
    m2 = match_ball([a, b1000])
    assert m2.n_global == 2
    assert m2.details["radius"]["b"] == pytest.approx((math.log(1000) / 1000) ** 0.25)


def test_chaining_joins_a_connected_component(mh):
    # 0.0 - 0.2 - 0.4 with radius 0.25: the ends are 0.4 apart but linked through the middle
    s1 = mh.make_summary("s1", mh.binary_profiles([[0.0, 0.5]]))
    s2 = mh.make_summary("s2", mh.binary_profiles([[0.2, 0.5]]))
    s3 = mh.make_summary("s3", mh.binary_profiles([[0.4, 0.5]]))
    assert match_ball([s1, s2, s3], radius=0.25).n_global == 1
    assert match_ball([s1, s2, s3], radius=0.15).n_global == 3


def test_numbering_by_decreasing_total_size(mh):
    s1 = mh.make_summary("s1", mh.binary_profiles([[0.1], [0.9]]), sizes=[100, 900])
    s2 = mh.make_summary("s2", mh.binary_profiles([[0.12], [0.88]]), sizes=[300, 700])
    m = match_ball([s1, s2])
    # the cluster near 0.9 has 1600 members, the other 400: it is global cluster 0
    assert m.assignment[0].tolist() == [1, 0]
    assert m.assignment[1].tolist() == [1, 0]


@pytest.mark.parametrize("design", ["homogeneous", "nested", "non-nested"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_appendix_a_easy_recovers_correct_matching(mh, design, seed):
    data, summaries, _, local_labels = mh.appendix_a(design, "easy", seed)
    m = match(summaries, MatchingConfig(method="ball"))
    ev = evaluate_matching(m, local_labels, data.labels)
    assert ev["correct"], ev
    assert ev["n_global"] == data.n_clusters
    assert ev["ari"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [4, 5])
def test_ball_merges_a_true_cluster_split_within_a_silo(mh, seed):
    data, summaries, _, local_labels = mh.appendix_a("homogeneous", "easy", seed)
    # silo 1: rows of true cluster 0 split at random into two local clusters 0 and 5
    rng = np.random.default_rng(seed)
    labels = np.asarray(local_labels[0]).copy()
    members = np.nonzero(labels == 0)[0]
    labels[rng.choice(members, size=members.size // 2, replace=False)] = 5
    _, split = oracle_posterior_and_summary(data.silos[0].codes, data.n_modalities, labels, silo="silo_1",
                                            prior=PriorConfig(), n_silos=4,
                                            n_draws=100, rng=seed)
    assert split.n_clusters == 6
    summaries2 = [split] + list(summaries[1:])
    local2 = [labels] + list(local_labels[1:])
    m = match_ball(summaries2)
    assert m.assignment[0][0] == m.assignment[0][5]
    assert m.details["merged_within_silo"] == 1
    assert m.n_global == 5
    assert correct_matching(m, local2, data.labels, n_true=5)


def test_invariant_to_silo_order_and_local_relabelling(mh):
    data, summaries, _, _ = mh.appendix_a("nested", "poor", 7)
    m = match_ball(summaries)
    rng = np.random.default_rng(0)
    order = [2, 0, 3, 1]
    perms = [rng.permutation(summaries[i].n_clusters) for i in order]
    shuffled = [mh.permute_clusters(summaries[i], p) for i, p in zip(order, perms, strict=True)]
    m2 = match_ball(shuffled)
    assert mh.canonical_pairs(m, summaries) == mh.canonical_pairs(m2, shuffled)
    # canonical numbering: the same global label for the same (silo, cluster)
    for pos, (i, p) in enumerate(zip(order, perms, strict=True)):
        np.testing.assert_array_equal(m2.assignment[pos], m.assignment[i][p])


def test_matched_draws_are_valid_for_aggregation(mh):
    data, summaries, _, _ = mh.appendix_a("non-nested", "easy", 1)
    m = match_ball(summaries)
    md = build_matched_draws(summaries, m)
    assert md.n_global == 6
    for pi in md.pi:
        np.testing.assert_allclose(pi.sum(axis=1), 1.0)
    # true cluster 1 (0-based 0) is absent from silo 2 of the non-nested design (Table 1)
    assert md.present.sum() == 5 + 5 + 3 + 2


def test_rejects_mixed_schemas(mh):
    a = mh.make_summary("a", mh.binary_profiles([[0.2, 0.3]]))
    b = mh.make_summary("b", mh.binary_profiles([[0.2]]))
    with pytest.raises(InconsistentSiloSummaries, match="silo 'b' uses modalities"):
        match_ball([a, b])
    with pytest.raises(InconsistentSiloSummaries, match="silo names must be unique"):
        match_ball([a, a])
    with pytest.raises(InconsistentSiloSummaries, match="at least one silo summary"):
        match_ball([])
