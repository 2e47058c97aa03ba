"""Disclosure control inside the silo: minimum cluster size, suppression, rounding, DP noise."""


import numpy as np
import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.data import Schema, SiloData
from vcmc.disclosure import (
    DisclosureError,
    apply_min_cluster_size,
    discrete_laplace_variance,
    dp_noise,
    effective_privacy,
    protect_counts,
    round_counts,
    suppress_small_cells,
)
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.protocol import SiloConfig, SummarizeRequest
from vcmc.silo.local import LocalSilo

N_MOD = (2,) * 4 + (3,) * 6


def _silo_with_three_outliers(seed=0):
    """Two large groups and 3 people with a pattern of their own (a cluster of 3 the sampler finds)."""
    rng = np.random.default_rng(seed)
    k = np.array(N_MOD)

    def group(n, pattern, noise):
        x = np.tile(np.array(pattern), (n, 1))
        flip = rng.random(x.shape) < noise
        x[flip] = (x[flip] + 1) % k[np.nonzero(flip)[1]]
        return x

    codes = np.vstack([group(80, [0] * 10, 0.05), group(70, [1] * 10, 0.05),
                       group(3, [0, 1, 0, 1, 2, 2, 2, 2, 2, 2], 0.0)])
    return SiloData("hospital", codes, Schema.from_n_modalities(N_MOD))


def _request(cfg):
    return SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=1, seed_entropy=1, spawn_key=(0,))


def test_cluster_of_three_is_not_sent_under_minimum_size_five():
    data = _silo_with_three_outliers()
    # the paper's behaviour (no local reallocation) and no disclosure limit: the cluster of 3 is sent
    cfg = FitConfig(sampler=SamplerConfig(n_iter=1000, burn_in=500, thin=5),
                    postprocess=PostprocessConfig(reallocate_small=False),
                    privacy=PrivacyConfig(min_cluster_size=0))
    open_summary = LocalSilo(data, privacy=PrivacyConfig(min_cluster_size=0)).summarize(_request(cfg))
    assert 3 in open_summary.cluster_sizes.tolist()
    # same run, the silo's operator sets a minimum of 5: the 3 people are merged before anything is sent
    silo = LocalSilo(data, privacy=PrivacyConfig(min_cluster_size=5))
    closed = silo.summarize(_request(cfg))
    assert closed.cluster_sizes.min() >= 5
    assert closed.n_withheld == 1
    assert closed.cluster_sizes.sum() == data.n_rows
    assert closed.counts.shape == (closed.n_clusters, sum(N_MOD))
    assert closed.pi_draws.shape[1] == closed.profile_draws.shape[1] == closed.n_clusters
    # the silo keeps a partition without the small cluster too
    assert np.bincount(silo.local.partition).min() >= 5


def _hand_local(sizes, n_mod=(2, 3)):
    """A LocalPosterior with clusters of the given sizes and confident memberships."""
    rng = np.random.default_rng(1)
    k = len(sizes)
    partition = np.repeat(np.arange(k), sizes)
    membership = np.full((partition.size, k), 0.02)
    membership[np.arange(partition.size), partition] = 1.0
    membership /= membership.sum(axis=1, keepdims=True)
    t = 20
    pi = rng.dirichlet(np.asarray(sizes, float), size=t)
    prof = np.concatenate([rng.dirichlet(np.ones(m), size=(t, k)) for m in n_mod], axis=2)
    local = LocalPosterior(partition=partition, membership=membership, pi_draws=pi, profile_draws=prof,
                           n_occupied=np.full((1, t), k), log_posterior=np.zeros((1, t)), n_modalities=n_mod,
                           n_components=10)
    codes = np.column_stack([rng.integers(0, m, partition.size) for m in n_mod])
    return local, codes


def test_apply_min_cluster_size_merges_and_reports_only_the_number():
    local, codes = _hand_local([60, 40, 3, 4])
    out, n_merged = apply_min_cluster_size(local, codes, PrivacyConfig(min_cluster_size=5))
    assert n_merged == 2
    # the 7 members of the small clusters go to the two large ones: nobody is dropped
    assert out.cluster_sizes.sum() == 107
    assert out.n_clusters == 2 and out.cluster_sizes.min() >= 40
    np.testing.assert_allclose(out.pi_draws.sum(axis=1), 1.0)
    # nothing to merge: unchanged sizes
    same, zero = apply_min_cluster_size(local, codes, PrivacyConfig(min_cluster_size=3))
    assert zero == 0 and sorted(same.cluster_sizes.tolist()) == [3, 4, 40, 60]


def test_silo_smaller_than_the_minimum_refuses_without_data_values():
    local, codes = _hand_local([4, 3])
    with pytest.raises(DisclosureError, match=r"fewer rows than the minimum cluster size \(10\)"):
        apply_min_cluster_size(local, codes, PrivacyConfig(min_cluster_size=10))


def test_small_cells_suppressed_with_complementary_suppression():
    # one cluster, variables with 2 and 3 modalities; threshold 8 (the NHS/OpenSAFELY "1-7" rule)
    counts = np.array([[3, 50, 20, 0, 33],      # var 1: lone small cell 3 -> also hide 50; var 2: nothing
                       [5, 6, 40, 2, 1]])      # var 1: 5 and 6 both small (11 >= 8 together); var 2: 2 and 1
    out, n = suppress_small_cells(counts, 8, (2, 3))     # both small, 3 together: also hide 40 (else 2 + 1 = 3
    np.testing.assert_array_equal(out, [[0, 0, 20, 0, 33], [0, 0, 0, 0, 0]])   # says both are 1 or 2)
    assert n == 7
    # off by default
    same, zero = suppress_small_cells(counts, 0, (2, 3))
    np.testing.assert_array_equal(same, counts)
    assert zero == 0


def test_lone_suppressed_cell_cannot_be_recovered_from_the_cluster_size():
    counts = np.array([[2, 30, 11, 21]])     # var 1: (2, 30), var 2: (11, 21); size 32
    out, n = suppress_small_cells(counts, 5, (2, 2))
    assert out[0, 0] == 0 and out[0, 1] == 0    # 32 - 30 would reveal the 2
    np.testing.assert_array_equal(out[0, 2:], [11, 21])
    assert n == 2


def test_rounding_to_nearest_multiple_halves_up():
    np.testing.assert_array_equal(round_counts(np.array([0, 1, 2, 3, 7, 8, 12, 13, 102]), 5),
                                  [0, 0, 0, 5, 5, 10, 10, 15, 100])
    np.testing.assert_array_equal(round_counts(np.array([4, 9]), 1), [4, 9])


def test_protect_counts_suppresses_then_rounds():
    counts = np.array([[3, 47, 12, 18, 20]])
    out, n = protect_counts(counts, PrivacyConfig(suppress_cells_below=8, round_to=5), n_modalities=(2, 3))
    np.testing.assert_array_equal(out, [[0, 0, 10, 20, 20]])
    assert n == 2


@pytest.mark.parametrize("secure", [True, False])
def test_dp_noise_has_the_discrete_laplace_scale(secure):
    if secure:
        pytest.importorskip("opendp")   # the [dp] extra
    epsilon, q = 2.0, 10               # 10 variables: L1 sensitivity 10, scale 5
    counts = np.full(20_000, 100)
    noisy = dp_noise(counts, epsilon, q, rng=7, secure=secure)
    noise = noisy - counts
    assert noisy.dtype == np.int64
    var = discrete_laplace_variance(q / epsilon)
    assert var == pytest.approx(2 * np.exp(-0.2) / (1 - np.exp(-0.2)) ** 2)
    # sample variance of 20,000 draws: relative standard error ~ sqrt((kurtosis - 1) / n) < 2.5 %
    assert noise.var() == pytest.approx(var, rel=0.1)
    assert abs(noise.mean()) < 5 * np.sqrt(var / noise.size)
    assert np.all(noise == np.round(noise))


def test_dp_noise_seeded_path_is_reproducible_and_secure_path_is_not_seeded():
    pytest.importorskip("opendp")
    counts = np.arange(500)
    np.testing.assert_array_equal(dp_noise(counts, 1.0, 3, rng=11, secure=False),
                                  dp_noise(counts, 1.0, 3, rng=11, secure=False))
    assert not np.array_equal(dp_noise(counts, 1.0, 3, rng=11), dp_noise(counts, 1.0, 3, rng=11))


def test_protect_counts_with_dp_clamps_at_zero_and_changes_counts():
    counts = np.zeros((4, 5), dtype=int)
    counts[:, 0] = 200
    out, _ = protect_counts(counts, PrivacyConfig(dp_epsilon=0.5), n_modalities=(2, 3), secure=False, rng=3)
    assert np.all(out >= 0) and not np.array_equal(out, counts)


def test_server_can_tighten_but_never_loosen_the_operators_limits():
    op = PrivacyConfig(min_cluster_size=10, suppress_cells_below=8, round_to=5, dp_epsilon=1.0)
    loose = PrivacyConfig(min_cluster_size=0, suppress_cells_below=0, round_to=1, dp_epsilon=None)
    assert effective_privacy(op, loose) == op
    strict = PrivacyConfig(min_cluster_size=20, suppress_cells_below=11, round_to=10, dp_epsilon=0.5,
                           share_counts=False)
    assert effective_privacy(op, strict) == strict
