"""Calibrated matching and aggregation with Gaussian items (docs/design.md §17.6), on exact conjugate posteriors of
true partitions, where the right answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from vcmc.aggregation.gaussian import aggregate_gaussian
from vcmc.closeness import closeness_statistic, closeness_threshold
from vcmc.config import FitConfig, PriorConfig, SamplerConfig
from vcmc.family import GAUSSIAN
from vcmc.family.gaussian import posterior_parameters
from vcmc.matching import match_calibrated
from vcmc.matching.gaussian import matched_gaussian
from vcmc.research.simulate_mixed import simulate_mixed
from vcmc.silo.local import LocalSilo


def _posterior(x, n_silos, rng, n_draws=400):
    stats_ = GAUSSIAN.sufficient_statistics(x, np.zeros(x.shape[0], dtype=np.int64), 1, x.shape[1])
    prior = GAUSSIAN.local_prior(PriorConfig(), x.shape[1], n_silos)
    return GAUSSIAN.posterior_draws(stats_, prior, x.shape[1], n_draws, rng)          # (T, 1, 2G)


def test_closeness_of_one_cluster_seen_by_two_silos_is_chi_square():
    rng = np.random.default_rng(8)
    ratios, exceed = [], []
    for _ in range(300):
        a, b = (_posterior(rng.normal([0.3, -1.0], [0.8, 0.5], (300, 2)), 2, rng) for _ in range(2))
        ma, va = GAUSSIAN.moments(a, 2)
        mb, vb = GAUSSIAN.moments(b, 2)
        t = float(closeness_statistic(ma, va, mb, vb)[0, 0])
        ratios.append(t / 4)
        exceed.append(t > stats.chi2.ppf(0.9, 4))
    assert 0.85 < np.mean(ratios) < 1.15
    assert 0.05 < np.mean(exceed) < 0.16


def test_distinct_clusters_are_far_above_the_threshold():
    rng = np.random.default_rng(9)
    a = _posterior(rng.normal([0.0, 0.0], 1.0, (300, 2)), 2, rng)
    b = _posterior(rng.normal([1.0, 0.0], 1.0, (300, 2)), 2, rng)          # one standard deviation apart
    t = closeness_statistic(*GAUSSIAN.moments(a, 2), *GAUSSIAN.moments(b, 2))[0, 0]
    assert t > 3 * closeness_threshold(4)


def test_consensus_aggregation_of_exact_subposteriors_is_the_pooled_posterior():
    rng = np.random.default_rng(10)
    parts = [rng.normal([0.4, -0.2], [0.7, 1.1], (n, 2)) for n in (150, 300, 450)]
    sub = tuple(_posterior(x, 3, rng, 2000) for x in parts)
    idx = np.column_stack([rng.permutation(2000) for _ in sub])
    agg = aggregate_gaussian(sub, 2, idx)
    pooled = np.vstack(parts)
    st = GAUSSIAN.sufficient_statistics(pooled, np.zeros(pooled.shape[0], dtype=np.int64), 1, 2)
    m_n, k_n, a_n, b_n = posterior_parameters(st, GAUSSIAN.local_prior(PriorConfig(), 2, 1), 2)
    sd_mu = np.sqrt(b_n / (k_n * (a_n - 1)))                     # the t marginal's sd
    assert np.allclose(agg[:, 0, :2].mean(0), m_n[0], atol=0.3 * sd_mu[0])
    assert np.allclose(agg[:, 0, :2].std(0), sd_mu[0], rtol=0.1)
    assert np.allclose(np.median(agg[:, 0, 2:], axis=0), b_n[0] / a_n[0], rtol=0.05)


@pytest.fixture(scope="module")
def two_silo_summaries(summarize_request):
    means = np.array([[-1.5, 0.0], [1.5, 1.0]])
    silos, _ = simulate_mixed([300, 300], [0.6, 0.4], means, np.full((2, 2), 0.5), n_modalities=(2, 2), rng=3)
    config = FitConfig(sampler=SamplerConfig(n_iter=600, thin=5))
    return [LocalSilo(s).handle(summarize_request(config, i, n_silos=2)) for i, s in enumerate(silos)]


def test_calibrated_matching_uses_the_gaussian_coordinates(two_silo_summaries):
    matching = match_calibrated(two_silo_summaries)
    assert matching.details["n_coordinates"] == 2 + 2 * 2
    assert matching.n_global == 2
    matched = matched_gaussian(two_silo_summaries, matching)
    for draws in matched:
        order = np.argsort(np.nanmean(draws[:, :, 0], axis=0))
        assert np.allclose(np.nanmean(draws[:, order, 0], axis=0), [-1.5, 1.5], atol=0.2)
