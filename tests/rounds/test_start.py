"""The rounds' over-complete start (vcmc.rounds.stage.start_components), with and without its cap."""

import numpy as np

from vcmc.rounds.stage import start_components


def _counts():
    counts = np.full((30, 5), 40)
    counts[10:, 4] = 0                     # cluster 4 held by 10 silos only
    return counts


def test_every_silo_and_cluster_pair_gets_its_own_component_without_a_cap():
    start, used = start_components(_counts())
    assert used == 5 + 29 * 4 + 9
    held = _counts() > 0
    assert np.unique(start[held]).size == used            # one component per pair with rows
    np.testing.assert_array_equal(start[0], np.arange(5))  # the first holder keeps the cluster's index


def test_the_cap_bounds_the_components_and_never_mixes_two_clusters():
    start, used = start_components(_counts(), max_components=12)
    assert used == 12
    held = _counts() > 0
    for k in range(5):
        others = np.setdiff1d(np.unique(start[held[:, k], k]), [k])
        for j in range(5):
            if j != k:                                     # a component is a copy of one cluster only
                assert not np.isin(others, start[held[:, j], j]).any()
    # the 7 extra components go in proportion to the other holders (29, 29, 29, 29, 9): 2, 2, 1, 1, 1 or so
    extra = [np.unique(start[held[:, k], k]).size - 1 for k in range(5)]
    assert sum(extra) == 7 and max(extra) - min(extra) <= 2 and extra[4] <= min(extra[:4])


def test_a_cap_above_the_pairs_changes_nothing():
    np.testing.assert_array_equal(start_components(_counts(), max_components=10_000)[0], start_components(_counts())[0])


def test_a_silos_large_share_of_a_cluster_is_not_copied():
    """big-silos/poor: a copy of thousands of rows with the cluster's own profile is merged by the sweep only by
    drift, too slowly for the rounds; such a pair starts in the cluster's own component."""
    counts = np.array([[5000, 300, 0], [4000, 2500, 10], [100, 50, 20]])
    start, used = start_components(counts, copy_below=2000)
    assert start[0, 0] == start[1, 0] == 0                  # the large pairs share cluster 0's component
    assert start[2, 0] == 0                                 # and then the first of the small ones
    assert start[1, 1] == 1 and start[0, 1] == 1            # cluster 1: the large pair, the first small holder
    assert start[2, 1] >= 3                                 # the other small holder gets a copy
    assert start[1, 2] == 2 and start[2, 2] >= 3 and used == 5
    everything, _ = start_components(counts, copy_below=None)
    assert np.unique(everything[counts > 0]).size == 3 + 2 + 2 + 1   # every pair after the first copied
