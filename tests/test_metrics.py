"""Tests of vcmc.metrics against hand-computed values and scikit-learn."""

import math
from itertools import combinations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from vcmc.exceptions import ConfigError, DataError
from vcmc.metrics import (
    P_BIN_LABELS,
    adjusted_rand_index,
    align_clusters,
    confusion_matrix,
    correct_matching,
    coverage,
    p_value_bins,
    relative_bias,
    variation_of_information,
)


def _ari_by_pair_counting(a, b):
    """Independent ARI: counts agreeing pairs directly over all C(n, 2) pairs (Hubert & Arabie 1985)."""
    n = len(a)
    pairs = list(combinations(range(n), 2))
    same_a = np.array([a[i] == a[j] for i, j in pairs])
    same_b = np.array([b[i] == b[j] for i, j in pairs])
    index = np.sum(same_a & same_b)
    expected = same_a.sum() * same_b.sum() / len(pairs)
    maximum = 0.5 * (same_a.sum() + same_b.sum())
    return (index - expected) / (maximum - expected)


def test_ari_hand_values():
    # U = {0,1},{2,3}; V = {0,1,2},{3}: I = 1, E = 2 * 3 / 6 = 1, so ARI = 0.
    assert adjusted_rand_index([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(0.0, abs=1e-12)
    # n_ij = 2,1,1,2: I = 2, sum C(a_i,2) = 6, sum C(b_j,2) = 3, C(6,2) = 15: (2 - 1.2) / (4.5 - 1.2).
    assert adjusted_rand_index([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]) == pytest.approx(0.8 / 3.3)
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 2, 2]) == 1.0


def test_ari_agrees_with_sklearn_and_pair_counting():
    rng = np.random.default_rng(0)
    for _ in range(10):
        a = rng.integers(0, 4, size=40)
        b = np.where(rng.random(40) < 0.6, a, rng.integers(0, 5, size=40))
        assert adjusted_rand_index(a, b) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)
        assert adjusted_rand_index(a, b) == pytest.approx(_ari_by_pair_counting(a, b), abs=1e-12)


def test_vi_hand_values():
    # U = {0,1},{2,3}; V = {0,1,2},{3}. H(U) = log 2; H(V) = 2 log 2 - (3/4) log 3;
    # H(U,V) = 1.5 log 2 (cells 1/2, 1/4, 1/4); VI = 2 H(U,V) - H(U) - H(V) = (3/4) log 3.
    u, v = [0, 0, 1, 1], [0, 0, 0, 1]
    assert variation_of_information(u, v) == pytest.approx(0.75 * math.log(3))
    assert variation_of_information(u, v, base=2) == pytest.approx(0.75 * math.log2(3))
    # independent halves: VI = H(U) + H(V) = 2 log 2 = 2 bits
    assert variation_of_information([0, 0, 1, 1], [0, 1, 0, 1], base=2) == pytest.approx(2.0)
    # maximum log n: one cluster vs singletons
    assert variation_of_information([0] * 4, [0, 1, 2, 3]) == pytest.approx(math.log(4))
    # equal up to relabelling, symmetric
    assert variation_of_information([0, 0, 1, 2], [7, 7, 3, 1]) == pytest.approx(0.0, abs=1e-12)
    a, b = [0, 1, 1, 2, 2, 2], [1, 1, 0, 0, 2, 2]
    assert variation_of_information(a, b) == pytest.approx(variation_of_information(b, a))


def test_metric_errors():
    with pytest.raises(DataError, match=r"adjusted_rand_index: the two partitions .* got 3 and 2 labels"):
        adjusted_rand_index([0, 1, 1], [0, 1])
    with pytest.raises(ConfigError, match=r"'base' parameter of variation_of_information .* Got 1.0"):
        variation_of_information([0, 1], [0, 1], base=1)
    with pytest.raises(DataError, match=r"lower bound must be <= its upper bound"):
        coverage([1.0], [0.0], [0.5])


def test_relative_bias_and_coverage():
    np.testing.assert_allclose(relative_bias([0.22, 0.18, 0.5], [0.2, 0.2, 0.5]), [0.1, -0.1, 0.0])
    assert np.isinf(relative_bias(1e-3, 0.0))
    np.testing.assert_array_equal(coverage([0.1, 0.3, 0.1, np.nan], [0.3, 0.5, 0.2, 1.0], 0.2),
                                  [True, False, True, False])
    # bounds are inclusive
    assert coverage(0.2, 0.2, 0.2)


def test_align_clusters_recovers_permutation_and_ignores_extra():
    true = np.repeat([0, 1, 2], 10)
    perm = np.array([2, 0, 1])
    est = perm[true].copy()
    est[:3] = 3  # a small spurious cluster carved out of true cluster 0
    np.testing.assert_array_equal(align_clusters(est, true), perm)
    m = confusion_matrix(est, true)
    assert m.shape == (3, 4) and m[0, 3] == 3 and m[0, 2] == 7


def test_align_clusters_unmatched_true_cluster():
    # two true clusters merged into one estimated cluster: the smaller one stays unmatched
    true = np.array([0] * 6 + [1] * 3 + [2] * 5)
    est = np.array([0] * 9 + [1] * 5)
    np.testing.assert_array_equal(align_clusters(est, true), [0, -1, 1])
    # a true cluster absent from the data (n_true given) is unmatched; negative labels are ignored
    np.testing.assert_array_equal(align_clusters([1, 1, 0, -1], [0, 0, 1, 1], n_true=3), [1, 0, -1])


def test_correct_matching():
    true = [np.array([0, 0, 1, 1]), np.array([1, 1, 2, 2])]
    local = [np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0])]
    assert correct_matching(local, true, [np.array([0, 1]), np.array([2, 1])])
    # clusters with different identities merged
    assert not correct_matching(local, true, [np.array([0, 1]), np.array([1, 1])])
    # one true cluster split over two global clusters
    assert not correct_matching(local, true, [np.array([0, 1]), np.array([2, 3])])
    # two local clusters of the same silo sharing an identity must share the global cluster
    local_split = [np.array([0, 2, 1, 1]), np.array([1, 1, 0, 0])]
    assert correct_matching(local_split, true, [np.array([0, 1, 0]), np.array([2, 1])])
    assert not correct_matching(local_split, true, [np.array([0, 1, 3]), np.array([2, 1])])
    # the number of global clusters must equal the true number
    assert not correct_matching(local, true, [np.array([0, 1]), np.array([2, 1])], n_true=4)


def test_p_value_bins():
    vals = [0.0, 9.99e-5, 1e-4, 0.0999, 0.1, 0.49, 0.5, 0.9, 0.99989, 0.9999, 1.0]
    np.testing.assert_array_equal(p_value_bins(vals), [0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 5])
    assert len(P_BIN_LABELS) == 6


def test_best_f1_scores_each_true_cluster_against_its_best_estimate():
    from vcmc.metrics import best_f1

    true = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2])
    est = np.array([0, 0, 1, 1, 2, 2, 2, 2, 3])
    # true 0 split in two halves: 2*2/(4+2); true 1 inside est 2 (4 members): 2*3/(3+4); true 2: est 3 alone
    np.testing.assert_allclose(best_f1(est, true), [2 / 3, 6 / 7, 2 / 3])
    np.testing.assert_allclose(best_f1(true, true), [1.0, 1.0, 1.0])
    # a true cluster with no member scores 0
    np.testing.assert_allclose(best_f1(est, true, n_true=4)[3], 0.0)


def test_majority_pieces_counts_fragments():
    from vcmc.metrics import majority_pieces

    true = np.repeat([0, 1], [60, 40])
    est = np.concatenate([np.repeat([0, 1, 2], 20), np.repeat(3, 40)])   # true 0 cut into three pieces
    assert majority_pieces(est, true).tolist() == [3, 1]
    assert majority_pieces(np.zeros(100, dtype=int), true).tolist() == [1, 0]
