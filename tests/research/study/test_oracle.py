import numpy as np
import pytest
from scipy import stats

from vcmc.config import PriorConfig
from vcmc.exceptions import DataError
from vcmc.protocol import SiloSummary
from vcmc.research.study.oracle import (
    oracle_local_posterior,
    oracle_posterior_and_summary,
    oracle_summary,
    sample_dirichlet_blocks,
)

N_MOD = (2, 3)


def _data():
    # 6 rows, labels 4 and 9 (renumbered 0 and 1); one missing cell
    codes = np.array([[0, 2], [0, 1], [1, 2], [1, 0], [1, -1], [0, 0]])
    labels = np.array([9, 4, 9, 4, 4, 9])
    return codes, labels


def test_partition_renumbered_in_label_order_with_one_hot_membership():
    codes, labels = _data()
    local = oracle_local_posterior(codes, N_MOD, labels, prior=PriorConfig(), n_silos=4, n_draws=5, rng=0)
    assert local.partition.tolist() == [1, 0, 1, 0, 0, 1]
    np.testing.assert_array_equal(local.membership, np.eye(2)[[1, 0, 1, 0, 0, 1]])
    assert local.n_clusters == 2
    assert local.cluster_sizes.tolist() == [3, 3]
    assert local.n_occupied.shape == (1, 5) and np.all(local.n_occupied == 2)


@pytest.mark.parametrize("fractionate", [True, False])
def test_draws_have_the_conjugate_posterior_mean_and_variance(fractionate):
    codes, labels = _data()
    prior = PriorConfig(alpha=0.01, beta=0.5, fractionate=fractionate)
    s = 4
    t = 40_000
    local = oracle_local_posterior(codes, N_MOD, labels, prior=prior, n_silos=s, n_draws=t, rng=1)
    a = (0.01 - 1) / s + 1 if fractionate else 0.01
    b = (0.5 - 1) / s + 1 if fractionate else 0.5
    # weights: Dir(3 + a, 3 + a)
    pi_mean = np.full(2, 0.5)
    np.testing.assert_allclose(local.pi_draws.mean(axis=0), pi_mean, atol=4 * 0.5 / np.sqrt(t * (6 + 2 * a)))
    # cluster 0 (label 4) = rows 1, 3, 4: variable 1 codes (0, 1, 1); variable 2 codes (1, 0, missing)
    alpha_v1 = np.array([1, 2]) + b
    alpha_v2 = np.array([1, 1, 0]) + b
    for alpha, cols in ((alpha_v1, slice(0, 2)), (alpha_v2, slice(2, 5))):
        mean = alpha / alpha.sum()
        var = alpha * (alpha.sum() - alpha) / (alpha.sum() ** 2 * (alpha.sum() + 1))
        draws = local.profile_draws[:, 0, cols]
        np.testing.assert_allclose(draws.mean(axis=0), mean, atol=5 * np.sqrt(var / t).max())
        np.testing.assert_allclose(draws.var(axis=0), var, rtol=0.05)
    sums = np.add.reduceat(local.profile_draws, [0, 2], axis=2)
    np.testing.assert_allclose(sums, 1.0)


def test_log_posterior_is_the_log_joint_density():
    codes, labels = _data()
    prior = PriorConfig()
    local = oracle_local_posterior(codes, N_MOD, labels, prior=prior, n_silos=2, n_draws=3, rng=2)
    a, b = (0.01 - 1) / 2 + 1, (0.5 - 1) / 2 + 1
    t = 1
    pi, prof = local.pi_draws[t], local.profile_draws[t]
    expected = stats.dirichlet.logpdf(pi, [a, a])
    for k in range(2):
        expected += stats.dirichlet.logpdf(prof[k, :2], [b, b]) + stats.dirichlet.logpdf(prof[k, 2:], [b] * 3)
    for x, z in zip(codes, local.partition, strict=True):
        expected += np.log(pi[z]) + np.log(prof[z, x[0]])
        if x[1] >= 0:
            expected += np.log(prof[z, 2 + x[1]])
    assert local.log_posterior[0, t] == pytest.approx(expected, rel=1e-10)


def test_small_concentrations_do_not_underflow():
    draws = sample_dirichlet_blocks(np.full((3, 5), 1e-3), (2, 3), 200, np.random.default_rng(0))
    assert np.all(np.isfinite(draws))
    np.testing.assert_allclose(np.add.reduceat(draws, [0, 2], axis=2), 1.0)


def test_summary_holds_medians_sizes_and_counts():
    codes, labels = _data()
    local, summ = oracle_posterior_and_summary(codes, N_MOD, labels, silo="h1", prior=PriorConfig(),
                                               n_silos=4, n_draws=50, rng=3)
    assert isinstance(summ, SiloSummary)
    assert summ.silo == "h1" and summ.n_rows == 6 and summ.n_draws == 50
    np.testing.assert_array_equal(summ.profile_estimate, np.median(local.profile_draws, axis=0))
    # counts by hand: cluster 0 (rows 1, 3, 4), cluster 1 (rows 0, 2, 5)
    np.testing.assert_array_equal(summ.counts, [[1, 2, 1, 1, 0], [2, 1, 1, 0, 2]])
    assert summ.n_clusters_posterior[2] == 1.0
    # the summary survives its plain-array encoding
    again = SiloSummary.from_arrays(summ.to_arrays())
    np.testing.assert_array_equal(again.counts, summ.counts)
    # reproducible from the seed
    summ2 = oracle_summary(codes, N_MOD, labels, silo="h1", prior=PriorConfig(), n_silos=4, n_draws=50, rng=3)
    np.testing.assert_array_equal(summ2.pi_draws, summ.pi_draws)


def test_errors_name_the_argument_not_the_values():
    codes, labels = _data()
    bad = codes.copy()
    bad[0, 1] = 7
    with pytest.raises(DataError, match=r"codes: column 1 holds codes outside 0..2") as err:
        oracle_local_posterior(bad, N_MOD, labels, prior=PriorConfig(), n_silos=2)
    assert "7" not in str(err.value)
    with pytest.raises(DataError, match=r"labels must have one entry per row: expected shape \(6,\)"):
        oracle_local_posterior(codes, N_MOD, labels[:5], prior=PriorConfig(), n_silos=2)
    with pytest.raises(DataError, match="codes has 2 columns but n_modalities lists 3"):
        oracle_local_posterior(codes, (2, 3, 2), labels, prior=PriorConfig(), n_silos=2)
