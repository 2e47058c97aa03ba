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


def test_a_deployment_refuses_a_prior_that_would_pin_the_draws_to_the_rows_sums(silo_data, summarize_request):
    """A server-chosen prior of the Gaussian items is capped in a deployment: a huge variance shape makes every
    draw of a mean the mean of its rows (differenced across the rounds' stored draws, rows' values); at the caps
    the draws keep the spread the rows give them."""
    from vcmc.exceptions import DisclosureError
    from vcmc.family.gaussian import MAX_MEAN_PRECISION, MAX_VARIANCE_SHAPE
    from vcmc.protocol.rounds import RoundStartRequest

    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 0.8, size=10)                               # one cluster of the minimum size, one item
    stats = np.array([[10.0, x.sum(), (x * x).sum()]])

    def spread(kappa, shape, rate):
        return GAUSSIAN.posterior_draws(stats, np.array([0.0, kappa, shape, rate]), 1, 4000, rng)[:, 0, 0].std()

    default = spread(0.01, 2.5, 0.75)
    assert spread(1e-6, 1e9, 1e-3) < 1e-3 * default                  # the crafted prior: the draws are the mean
    assert spread(MAX_MEAN_PRECISION, MAX_VARIANCE_SHAPE, 1e-12) > 0.5 * default

    strong = dataclasses.replace(CONFIG, prior=dataclasses.replace(CONFIG.prior, variance_shape=1e9))
    deployed = LocalSilo(silo_data, policy=SiloPolicy())
    with pytest.raises(DisclosureError, match=r"variance_shape \(a0\) 1e\+09 \(at most 10\)"):
        deployed.handle(summarize_request(strong, 0, n_silos=2))
    assert _summary(silo_data, summarize_request, config=strong)[1].n_gaussian == 2     # the analyst's own: runs
    silo, _ = _summary(silo_data, summarize_request, policy=SiloPolicy(budget={"round_start": 2}))
    k = silo.local.n_clusters
    start = dict(names=(silo.name,), start=np.arange(k)[None], n_components=k, alpha=0.01,
                 beta=np.full(silo.n_columns, 0.5), checkpoints=np.array([6]), stop=False, n_chains=1, anneal=1.0,
                 anneal_until=1, max_stored=50, min_size=10, birth_share=0.0, birth_budget=0, silo_weight_prior=0.0,
                 secure=True, seed_entropy=7, spawn_key=(3,))
    with pytest.raises(DisclosureError, match=r"mean_precision \(kappa0\) 50 \(at most 1\)"):
        silo.handle(RoundStartRequest(**start, gaussian_prior=np.array([0.0, 50.0, 2.5, 0.75])))
    with pytest.raises(DisclosureError, match="rounds-key"):        # within the caps: on to the next rule
        silo.handle(RoundStartRequest(**start, gaussian_prior=np.array([0.0, 0.01, 2.5, 0.75])))
