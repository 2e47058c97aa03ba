"""Post-processing: local clusters, weights of dropped components, minimum cluster size, PSM partition."""

import numpy as np
import pytest

from vcmc.config import PostprocessConfig
from vcmc.exceptions import DataError
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.mcmc.postprocess import (
    build_local_posterior,
    posterior_mode,
    psm_partition,
    reallocate_small_clusters,
)
from vcmc.mcmc.relabel import RelabelledChain
from vcmc.model import profile_offsets

N_MOD = (2, 2, 2)
P = 6


def _uniform_profiles(t, c):
    return np.full((t, c, P), 0.5)


def _chain(counts, pi, n_occupied=None, psm=None):
    t = int(counts.sum(axis=1)[0])
    c = counts.shape[1]
    pi = np.broadcast_to(np.asarray(pi, dtype=float), (t, c)).copy()
    n_occ = np.full(t, 2) if n_occupied is None else np.asarray(n_occupied)
    return RelabelledChain(pi=pi, profiles=_uniform_profiles(t, c), n_occupied=n_occ,
                           log_posterior=np.zeros(t), counts=counts.astype(np.int32),
                           pivot=np.argmax(counts, axis=1), psm=psm)


def test_posterior_mode_takes_the_most_frequent_value():
    assert posterior_mode(np.array([[3, 4, 4], [5, 4, 3]])) == 4
    assert posterior_mode(np.array([2, 3])) == 2   # ties: the smaller


def test_local_clusters_are_the_components_owning_rows_sorted_by_size():
    n, c, t = 200, 5, 100
    counts = np.zeros((n, c), dtype=np.int64)
    counts[:120, 3] = 90
    counts[:120, 0] = 10           # component 0 holds rows of cluster "3" one time in ten, owns none
    counts[120:, 1] = t
    pi = [0.1, 0.35, 0.02, 0.5, 0.03]
    ch = _chain(counts, pi)
    codes = np.zeros((n, 3), dtype=np.int64)
    local = build_local_posterior([ch], codes, N_MOD, n_components=c,
                                  postprocess=PostprocessConfig(reallocate_small=False, merge_unresolved=False))
    assert local.n_clusters == 2
    np.testing.assert_array_equal(local.cluster_sizes, [120, 80])
    np.testing.assert_array_equal(local.partition, np.r_[np.zeros(120), np.ones(80)])
    # component 0's weight goes to the cluster its allocations landed in; 2 and 4 held no row: dropped
    np.testing.assert_allclose(local.pi_draws, np.broadcast_to([0.6 / 0.95, 0.35 / 0.95], (t, 2)))
    np.testing.assert_allclose(local.membership[0], [1.0, 0.0])
    np.testing.assert_allclose(local.membership[-1], [0.0, 1.0])
    assert local.n_components == c and local.n_reallocated == 0


def _small_cluster_local(small_share_elsewhere: float):
    """Clusters A (100 rows), B (80) and a tiny cluster S (5 rows); A's codes are 0, B's and S's are 1."""
    t = 50
    sizes = (100, 80, 5)
    n = sum(sizes)
    partition = np.repeat([0, 1, 2], sizes)
    membership = np.zeros((n, 3))
    membership[np.arange(n), partition] = 1.0
    # S's members spent part of their iterations in A (first 3 rows) or B (last 2 rows)
    membership[180:183] = [small_share_elsewhere, 0.0, 1 - small_share_elsewhere]
    membership[183:185] = [0.0, small_share_elsewhere, 1 - small_share_elsewhere]
    pi = np.broadcast_to([0.5, 0.4, 0.1], (t, 3)).copy()
    prof = np.empty((t, 3, P))
    prof[:, 0] = np.tile([0.9, 0.1], 3)
    prof[:, 1] = np.tile([0.1, 0.9], 3)
    prof[:, 2] = np.tile([0.5, 0.5], 3)
    codes = np.zeros((n, 3), dtype=np.int64)
    codes[100:] = 1
    local = LocalPosterior(partition=partition, membership=membership, pi_draws=pi, profile_draws=prof,
                           n_occupied=np.full((1, t), 3), log_posterior=np.zeros((1, t)), n_modalities=N_MOD,
                           n_components=10)
    return local, codes


def test_members_of_a_tiny_cluster_go_to_their_most_probable_remaining_cluster():
    local, codes = _small_cluster_local(0.3)
    out = reallocate_small_clusters(local, codes, threshold=10)
    assert out.n_clusters == 2                              # the number of local clusters drops
    assert out.cluster_sizes.sum() == codes.shape[0]        # nothing is lost
    np.testing.assert_array_equal(out.cluster_sizes, [103, 82])
    np.testing.assert_array_equal(out.partition[180:], [0, 0, 0, 1, 1])
    assert out.n_reallocated == 5
    # S's weight 0.1 is split like its members: 3/5 to A, 2/5 to B
    np.testing.assert_allclose(out.pi_draws[0], [0.5 + 0.06, 0.4 + 0.04])
    np.testing.assert_allclose(out.membership.sum(axis=1), 1.0)
    assert out.profile_draws.shape == (50, 2, P)
    np.testing.assert_array_equal(out.profile_draws, local.profile_draws[:, :2])


def test_likelihood_fallback_when_a_member_never_visited_a_remaining_cluster():
    local, codes = _small_cluster_local(0.0)     # S's members only ever sat in S
    out = reallocate_small_clusters(local, codes, threshold=10)
    # their codes are all 1, which B's profile (0.9 on code 1) explains best
    np.testing.assert_array_equal(out.partition[180:], [1] * 5)
    np.testing.assert_array_equal(out.cluster_sizes, [100, 85])
    assert np.all(out.membership[180:, 1] > 0.99)


def test_threshold_zero_changes_nothing_and_all_small_keeps_the_largest():
    local, codes = _small_cluster_local(0.3)
    same = reallocate_small_clusters(local, codes, threshold=0)
    np.testing.assert_array_equal(same.partition, local.partition)
    one = reallocate_small_clusters(local, codes, threshold=1000)
    assert one.n_clusters == 1 and one.cluster_sizes[0] == codes.shape[0]
    np.testing.assert_allclose(one.pi_draws, 1.0)


def test_reallocation_refuses_codes_of_another_silo():
    local, codes = _small_cluster_local(0.3)
    with pytest.raises(DataError, match="n_rows = 185"):
        reallocate_small_clusters(local, codes[:10], threshold=10)


def test_fixed_minimum_size_is_applied_by_build_local_posterior():
    n, c, t = 500, 4, 40
    counts = np.zeros((n, c), dtype=np.int64)
    counts[:300, 0] = t
    counts[300:495, 1] = t
    counts[495:, 2] = 30          # 5 rows (< 2% of 500 = 10) modal in component 2 ...
    counts[495:, 1] = 10          # ... that sometimes sit in component 1
    ch = _chain(counts, [0.6, 0.38, 0.015, 0.005], n_occupied=np.full(t, 3))
    codes = np.zeros((n, 3), dtype=np.int64)
    fixed = PostprocessConfig(min_cluster_fraction=0.02, merge_unresolved=False)
    local = build_local_posterior([ch], codes, N_MOD, n_components=c, postprocess=fixed)
    assert local.n_clusters == 2
    np.testing.assert_array_equal(local.cluster_sizes, [300, 200])
    assert local.n_reallocated == 5
    off = build_local_posterior([ch], codes, N_MOD, n_components=c,
                                postprocess=PostprocessConfig(reallocate_small=False, merge_unresolved=False))
    assert off.n_clusters == 3


def test_psm_partition_recovers_block_structure():
    rng = np.random.default_rng(0)
    truth = np.repeat([0, 1, 2], [30, 20, 10])
    psm = (truth[:, None] == truth[None, :]) * 0.8 + 0.1 + rng.uniform(-0.05, 0.05, (60, 60))
    psm = (psm + psm.T) / 2
    np.fill_diagonal(psm, 1.0)
    labels = psm_partition(psm, 3)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(truth, labels) == 1.0


def test_build_local_posterior_psm_path_uses_the_similarity():
    n, c, t = 60, 5, 20
    truth = np.repeat([0, 1], [40, 20])
    counts = np.zeros((n, c), dtype=np.int64)
    counts[truth == 0, 4] = t
    counts[truth == 1, 2] = t
    psm = (truth[:, None] == truth[None, :]).astype(np.float32) * t
    ch = _chain(counts, [0.05, 0.05, 0.3, 0.05, 0.55], psm=psm)
    local = build_local_posterior([ch], np.zeros((n, 3), dtype=np.int64), N_MOD, n_components=c,
                                  postprocess=PostprocessConfig(partition="psm", merge_unresolved=False))
    np.testing.assert_array_equal(local.partition, truth)
    np.testing.assert_allclose(local.pi_draws[0], [0.55 / 0.85, 0.3 / 0.85])


def test_profile_blocks_of_kept_draws_sum_to_one():
    local, codes = _small_cluster_local(0.3)
    out = reallocate_small_clusters(local, codes, threshold=10)
    sums = np.add.reduceat(out.profile_draws, profile_offsets(N_MOD)[:-1], axis=2)
    np.testing.assert_allclose(sums, 1.0)


# ------------------------------------------------------------------ clusters the silo cannot resolve
def _conjugate_local(sizes, profiles, n_mod, seed, n_draws=400):
    """Exact conjugate posterior (given the partition) of clusters of the given sizes and true profiles."""
    from vcmc.config import PriorConfig
    from vcmc.research.simulate import simulate
    from vcmc.research.study.oracle import oracle_local_posterior

    weights = np.asarray(sizes, dtype=float) / np.sum(sizes)
    data = simulate(n_per_silo=int(np.sum(sizes)), weights=weights[None, :], n_modalities=n_mod,
                    profiles=profiles, rng=seed, exact=True)
    codes, labels = data.silos[0].codes, data.labels[0]
    return oracle_local_posterior(codes, n_mod, labels, prior=PriorConfig(), n_silos=4, n_draws=n_draws,
                                  rng=seed), codes, labels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_handful_of_rows_split_off_a_cluster_is_unresolved_a_small_distinct_cluster_is_not(seed):
    from vcmc.mcmc.postprocess import unresolved_groups

    rng = np.random.default_rng(seed)
    n_mod = (3,) * 20
    prof = np.concatenate([rng.dirichlet([0.5] * 3, size=3) for _ in n_mod], axis=1)
    # clusters 0 and 1 distinct and large; 2 = six more rows of cluster 0's profile (a ghost component);
    # 3 = 25 rows of a third, distinct profile
    profiles = np.stack([prof[0], prof[1], prof[0], prof[2]])
    local, codes, _ = _conjugate_local([300, 200, 6, 25], profiles, n_mod, seed)
    group = unresolved_groups(local)
    sizes = local.cluster_sizes
    ghost, host = int(np.flatnonzero(sizes == 6)[0]), int(np.flatnonzero(sizes == 300)[0])
    assert group[ghost] == group[host]
    assert len(set(group.tolist())) == 3          # the ghost joins its profile's cluster, nothing else merges


def test_build_local_posterior_merges_unresolved_components_on_request():
    n, c, t = 200, 3, 50
    counts = np.zeros((n, c), dtype=np.int64)
    counts[:150, 0] = t
    counts[150:, 1] = t
    ch = _chain(counts, [0.7, 0.28, 0.02])
    # identical profiles in every draw: the two components cannot be told apart
    local = build_local_posterior([ch], np.zeros((n, 3), dtype=np.int64), N_MOD, n_components=c,
                                  postprocess=PostprocessConfig(merge_unresolved=True))
    assert local.n_clusters == 1 and local.cluster_sizes.tolist() == [200]
    kept = build_local_posterior([ch], np.zeros((n, 3), dtype=np.int64), N_MOD, n_components=c,
                                 postprocess=PostprocessConfig(merge_unresolved=False))
    assert kept.n_clusters == 2


def test_merging_two_clusters_combines_their_draws_exactly():
    from vcmc.mcmc.postprocess import merge_clusters

    rng = np.random.default_rng(0)
    k, t = 3, 5
    partition = np.repeat([0, 1, 2], [15, 10, 5])
    membership = np.eye(k)[partition]
    pi = rng.dirichlet(np.ones(k), size=t)
    prof = np.concatenate([rng.dirichlet(np.ones(2), size=(t, k)) for _ in range(3)], axis=2)
    local = LocalPosterior(partition=partition, membership=membership, pi_draws=pi, profile_draws=prof,
                           n_occupied=np.full((1, t), 3), log_posterior=np.zeros((1, t)), n_modalities=N_MOD,
                           n_components=5)
    out = merge_clusters(local, np.array([0, 1, 0]))          # clusters 0 and 2 are one
    assert out.cluster_sizes.tolist() == [20, 10]
    np.testing.assert_allclose(out.pi_draws[:, 0], pi[:, 0] + pi[:, 2])
    expected = (pi[:, 0, None] * prof[:, 0] + pi[:, 2, None] * prof[:, 2]) / (pi[:, 0] + pi[:, 2])[:, None]
    np.testing.assert_allclose(out.profile_draws[:, 0], expected)
    np.testing.assert_allclose(out.membership.sum(axis=1), 1.0)
    assert (out.partition[partition == 2] == 0).all()
