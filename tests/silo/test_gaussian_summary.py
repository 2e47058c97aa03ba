"""A silo's summary with Gaussian items and the gate's release rule for them (docs/design.md §17.4)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vcmc.config import FitConfig, PrivacyConfig, SamplerConfig
from vcmc.family import GAUSSIAN
from vcmc.protocol import SiloSummary
from vcmc.research.simulate_mixed import simulate_mixed
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy

MEANS = np.array([[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]])
SDS = np.array([[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]])
CONFIG = FitConfig(sampler=SamplerConfig(n_iter=600, thin=5))


@pytest.fixture(scope="module")
def silo_data():
    silos, _ = simulate_mixed([500], [0.5, 0.3, 0.2], MEANS, SDS, rng=5)
    return silos[0]


def _summary(data, summarize_request, privacy=None, config=CONFIG, policy=None) -> tuple[LocalSilo, SiloSummary]:
    silo = LocalSilo(data, privacy=privacy, policy=policy)
    return silo, silo.handle(summarize_request(config, 0, n_silos=2))


def test_summary_carries_means_variances_and_sums(silo_data, summarize_request):
    silo, summary = _summary(silo_data, summarize_request)
    k = summary.n_clusters
    assert summary.n_gaussian == 2 and summary.profile_draws.shape[2] == 10
    assert summary.gaussian_draws.shape == (summary.n_draws, k, 4) and summary.gaussian_estimate.shape == (k, 4)
    own = GAUSSIAN.sufficient_statistics(silo.values, silo.local.partition, k, 2)
    assert np.allclose(summary.gaussian_sums, own)                  # no rule set: released as computed
    again = SiloSummary.from_arrays(summary.to_arrays())
    assert np.array_equal(again.gaussian_draws, summary.gaussian_draws)
    for c in range(k):                                              # the estimate is the cluster's data
        mean = own[c, 2:4] / own[c, :2]
        assert np.allclose(summary.gaussian_estimate[c, :2], mean, atol=0.1)


def test_rounded_sums_and_the_draws_redrawn_from_them(silo_data, summarize_request):
    privacy = PrivacyConfig(sum_precision=5.0)
    silo, summary = _summary(silo_data, summarize_request, privacy=privacy)
    sums = summary.gaussian_sums
    assert np.allclose(sums[:, 2:] / 5.0, np.round(sums[:, 2:] / 5.0))
    _, plain = _summary(silo_data, summarize_request)
    assert not np.allclose(summary.gaussian_draws, plain.gaussian_draws)
    # the released draws are the posterior given the released sums, not the sampler's
    n, s = sums[:, :2], sums[:, 2:4]
    assert np.allclose(summary.gaussian_draws[:, :, :2].mean(0), s / (n + 0.01), atol=0.05)


def test_an_item_observed_in_few_rows_of_a_cluster_is_withheld(silo_data, summarize_request):
    values = silo_data.values.copy()
    values[5:, 1] = np.nan                                           # item 2 seen in 5 rows only
    data = dataclasses.replace(silo_data, values=values)
    silo, summary = _summary(data, summarize_request, privacy=PrivacyConfig(min_cluster_size=10))
    assert np.all(summary.gaussian_sums[:, [1, 3, 5]] == 0)
    assert np.all(summary.gaussian_sums[:, 0] >= 10)


def test_server_cannot_loosen_the_operator_s_precision(silo_data, summarize_request):
    server = dataclasses.replace(CONFIG, privacy=PrivacyConfig(sum_precision=0.0))
    _, summary = _summary(silo_data, summarize_request, privacy=PrivacyConfig(sum_precision=2.0), config=server,
                          policy=SiloPolicy.own_data())
    assert np.allclose(summary.gaussian_sums[:, 2:] / 2.0, np.round(summary.gaussian_sums[:, 2:] / 2.0))
