import itertools

import numpy as np
import pytest

from vcmc.config import MatchingConfig
from vcmc.exceptions import ConfigError
from vcmc.matching import match, match_hungarian
from vcmc.research.study.evaluate import evaluate_matching


def test_one_to_one_assignment_equals_brute_force(mh):
    # independent check: enumerate every injective map of the smaller silo into the reference
    rng = np.random.default_rng(3)
    ref_pts = rng.random((4, 3))
    other_pts = rng.random((3, 3))
    ref = mh.make_summary("ref", mh.binary_profiles(ref_pts))
    other = mh.make_summary("other", mh.binary_profiles(other_pts))
    m = match_hungarian([other, ref])
    dist = np.linalg.norm(ref_pts[:, None, :] - other_pts[None, :, :], axis=2)
    best = min(itertools.permutations(range(4), 3), key=lambda p: sum(dist[p[l], l] for l in range(3)))
    # the reference's clusters are the global clusters: compare through them
    ref_to_global = m.assignment[1]
    np.testing.assert_array_equal(m.assignment[0], ref_to_global[list(best)])
    assert m.details["reference"] == "ref"
    assert m.n_global == 4
    assert m.total_cost == pytest.approx(sum(dist[best[l], l] for l in range(3)))


def test_default_reference_most_clusters_then_rows(mh):
    a = mh.make_summary("a", mh.binary_profiles([[0.1], [0.9]]), n_rows=500)
    b = mh.make_summary("b", mh.binary_profiles([[0.1], [0.9]]), n_rows=800)
    c = mh.make_summary("c", mh.binary_profiles([[0.1]]), n_rows=900)
    assert match_hungarian([a, b, c]).details["reference"] == "b"
    assert match_hungarian([c, a]).details["reference"] == "a"


def test_named_smaller_reference_opens_new_clusters(mh):
    small = mh.make_summary("small", mh.binary_profiles([[0.1, 0.1]]))
    big = mh.make_summary("big", mh.binary_profiles([[0.12, 0.1], [0.9, 0.9], [0.5, 0.1]]))
    m = match_hungarian([small, big], reference="small")
    assert m.n_global == 3
    assert m.assignment[0][0] == m.assignment[1][0]
    assert m.details["n_new"] == 2


def test_unknown_reference_is_a_config_error(mh):
    a = mh.make_summary("a", mh.binary_profiles([[0.1]]))
    with pytest.raises(ConfigError, match=r"one of the silo names \['a'\]. Got 'zz' instead"):
        match_hungarian([a], reference="zz")


@pytest.mark.parametrize("design", ["homogeneous", "nested"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_appendix_a_easy_recovers_correct_matching(mh, design, seed):
    data, summaries, _, local_labels = mh.appendix_a(design, "easy", seed)
    ev = evaluate_matching(match(summaries, MatchingConfig(method="hungarian")), local_labels, data.labels)
    assert ev["correct"], ev
    assert ev["ari"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fails_on_non_nested_design(mh, seed):
    # no silo holds all 6 clusters: the reference has 5, so clusters are forced into 5 (docs/design.md §5.2)
    data, summaries, _, local_labels = mh.appendix_a("non-nested", "easy", seed)
    ev = evaluate_matching(match_hungarian(summaries), local_labels, data.labels)
    assert not ev["correct"]
    assert ev["n_global"] == 5
    assert ev["ari"] < 1.0


def test_invariant_to_silo_order_with_fixed_reference_and_relabelling(mh):
    data, summaries, _, _ = mh.appendix_a("nested", "poor", 8)
    m = match_hungarian(summaries, reference="silo_2")
    rng = np.random.default_rng(1)
    order = [3, 1, 0, 2]
    perms = [rng.permutation(summaries[i].n_clusters) for i in order]
    shuffled = [mh.permute_clusters(summaries[i], p) for i, p in zip(order, perms, strict=True)]
    m2 = match_hungarian(shuffled, reference="silo_2")
    assert mh.canonical_pairs(m, summaries) == mh.canonical_pairs(m2, shuffled)
    for pos, (i, p) in enumerate(zip(order, perms, strict=True)):
        np.testing.assert_array_equal(m2.assignment[pos], m.assignment[i][p])
    # default reference: chosen by size, not by position
    assert match_hungarian(shuffled).details["reference"] == match_hungarian(summaries).details["reference"]
