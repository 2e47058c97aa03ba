import numpy as np
import pytest

from vcmc.exceptions import DataError
from vcmc.matching.types import Matching
from vcmc.research.study.evaluate import (
    appendix_a_silos,
    correct_matching,
    evaluate_matching,
    local_cluster_identity,
    propagated_partition,
)

# two silos; true labels 0,1,2; silo 0 holds {0, 1}, silo 1 holds {1, 2} with true 1 split in two
LOCAL = [np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 2, 2])]
TRUE = [np.array([0, 0, 1, 1, 1, 1]), np.array([1, 1, 1, 2, 2, 2])]
#          silo 0: local 0 = {0,0,1} -> 0; local 1 = {1,1,1} -> 1
#          silo 1: local 0 = {1,1} -> 1; local 1 = {1,2} -> tie -> 1; local 2 = {2,2} -> 2


def _m(a0, a1, n):
    return Matching(assignment=(np.array(a0), np.array(a1)), n_global=n, method="test", silos=("a", "b"))


def test_identity_is_the_majority_true_label():
    ident = local_cluster_identity(LOCAL, TRUE)
    assert ident[0].tolist() == [0, 1]
    assert ident[1].tolist() == [1, 1, 2]
    # a local cluster without members has no identity
    ident = local_cluster_identity([np.array([0, 0])], [np.array([3, 3])], n_clusters=[2])
    assert ident[0].tolist() == [3, -1]


def test_correct_matching_definition():
    # merging silo 1's locals 0 and 1 (both identity 1) with silo 0's local 1 is the correct matching
    assert correct_matching(_m([0, 1], [1, 1, 2], 3), LOCAL, TRUE, n_true=3)
    # splitting identity 1 across two globals breaks condition 1 (and 2)
    assert not correct_matching(_m([0, 1], [1, 3, 2], 4), LOCAL, TRUE, n_true=3)
    # merging identities 0 and 1 breaks condition 1
    assert not correct_matching(_m([0, 0], [0, 0, 1], 2), LOCAL, TRUE, n_true=3)
    # right structure but the wrong true number of clusters breaks condition 2
    assert not correct_matching(_m([0, 1], [1, 1, 2], 3), LOCAL, TRUE, n_true=4)


def test_propagated_partition_and_pooled_ari():
    m = _m([0, 1], [1, 1, 2], 3)
    part = propagated_partition(m, LOCAL)
    assert part[0].tolist() == [0, 0, 0, 1, 1, 1]
    assert part[1].tolist() == [1, 1, 1, 1, 2, 2]
    ev = evaluate_matching(m, LOCAL, TRUE)
    assert ev["correct"] and ev["n_global"] == 3
    # Hubert-Arabie ARI (docs/design.md §9.1) written out on the pooled partitions
    est = np.concatenate(part)
    true = np.concatenate(TRUE)
    n = est.size
    table = np.zeros((3, 3))
    np.add.at(table, (est, true), 1)

    def c2(x):
        return x * (x - 1) / 2

    index = c2(table).sum()
    a, b = c2(table.sum(1)).sum(), c2(table.sum(0)).sum()
    expected = (index - a * b / c2(n)) / (0.5 * (a + b) - a * b / c2(n))
    assert ev["ari"] == pytest.approx(expected)


def test_errors_name_the_silo():
    with pytest.raises(DataError, match="local_labels has 1 silos but true_labels has 2"):
        evaluate_matching(_m([0, 1], [1, 1, 2], 3), LOCAL[:1], TRUE)
    with pytest.raises(DataError, match=r"silo 'b': local labels must lie in 0..2"):
        propagated_partition(_m([0, 1], [1, 1, 2], 3), [LOCAL[0], np.array([0, 3])])


def test_appendix_a_local_partitions_are_the_truth():
    rng = np.random.default_rng(0)
    codes = [rng.integers(0, 2, (50, 3)), rng.integers(0, 2, (40, 3))]
    labels = [rng.choice([2, 5, 7], 50), rng.choice([5, 9], 40)]
    summaries, locals_, local_labels = appendix_a_silos(codes, labels, (2, 2, 2), n_draws=10, rng=1)
    assert [s.silo for s in summaries] == ["silo_1", "silo_2"]
    assert [s.n_clusters for s in summaries] == [3, 2]
    # local cluster l is the l-th smallest true label present
    np.testing.assert_array_equal(np.array([2, 5, 7])[local_labels[0]], labels[0])
    np.testing.assert_array_equal(np.array([5, 9])[local_labels[1]], labels[1])
    assert local_cluster_identity(local_labels, labels)[1].tolist() == [5, 9]


def test_propagate_in_silo_returns_labels_and_counts_only_of_global_clusters():
    from vcmc.research.study.evaluate import propagate_in_silo

    labels, counts = propagate_in_silo(np.array([0, 1, 2, 2, 1]), np.array([3, 0, 0]), 4)
    assert labels.tolist() == [3, 0, 0, 0, 0]
    assert counts.tolist() == [4, 0, 0, 1]
    with pytest.raises(DataError, match=r"global clusters outside 0..1"):
        propagate_in_silo(np.array([0]), np.array([2]), 2)
