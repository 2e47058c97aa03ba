"""The Gibbs sampler with Gaussian items beside categorical ones (docs/design.md §17.3): known truth on simulated
mixed data, missing values, fractionation, and the categorical path untouched."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from vcmc.config import PriorConfig, SamplerConfig
from vcmc.mcmc.apply import run_apply_step
from vcmc.mcmc.sampler import run_chain
from vcmc.research.simulate_mixed import simulate_mixed

MEANS = np.array([[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]])
SDS = np.array([[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]])


@pytest.fixture(scope="module")
def mixed():
    return simulate_mixed([900], [0.5, 0.3, 0.2], MEANS, SDS, missing=0.05, rng=2026)


def _matched_means(local, truth, n_col):
    """Each true cluster's posterior draws of its means, through the majority local cluster of its rows."""
    out = []
    for c in range(MEANS.shape[0]):
        k = np.bincount(local.partition[truth.labels == c]).argmax()
        out.append(local.profile_draws[:, k, n_col:])
    return np.stack(out, axis=1)              # (T, K, 2G)


def test_recovers_known_clusters_means_and_variances(mixed):
    silos, truth = mixed
    silo = silos[0]
    local = run_apply_step(silo.codes, silo.n_modalities, sampler=SamplerConfig(n_iter=3000, thin=2), rng=7,
                           values=silo.values)
    assert local.n_gaussian == 2 and local.profile_draws.shape[2] == 10 + 4
    assert adjusted_rand_score(truth.labels, local.partition) > 0.9
    assert local.n_clusters == 3
    draws = _matched_means(local, truth, 10)
    lo, hi = np.quantile(draws, [0.025, 0.975], axis=0)
    covered = (lo[:, :2] <= MEANS) & (hi[:, :2] >= MEANS)
    assert covered.sum() >= 5                       # 6 intervals at 95%: one miss has probability 0.03
    assert np.allclose(np.sqrt(np.median(draws[:, :, 2:], axis=0)), SDS, rtol=0.2)


def test_an_empty_gaussian_block_is_the_categorical_chain(mixed):
    silo = mixed[0][0]
    sampler = SamplerConfig(n_iter=60, thin=2)
    plain = run_chain(silo.codes, silo.n_modalities, prior=PriorConfig(), sampler=sampler, rng=1)
    empty = run_chain(silo.codes, silo.n_modalities, prior=PriorConfig(), sampler=sampler, rng=1,
                      values=np.empty((silo.n_rows, 0)))
    assert np.array_equal(plain.profiles, empty.profiles) and np.array_equal(plain.final_z, empty.final_z)


def test_fractionated_chains_and_an_all_missing_item(mixed):
    silo = mixed[0][0]
    values = silo.values.copy()
    values[:, 1] = np.nan                           # nobody observed: the item's draws are the local prior's
    chain = run_chain(silo.codes, silo.n_modalities, prior=PriorConfig(), sampler=SamplerConfig(n_iter=200, thin=5),
                      n_silos=5, rng=3, values=values)
    assert np.all(np.isfinite(chain.profiles)) and np.all(chain.profiles[:, :, 10 + 2:] > 0)
    assert np.all(np.isfinite(chain.log_posterior))


def test_merged_clusters_keep_the_mixture_s_mean_and_variance(mixed):
    from vcmc.mcmc.postprocess import merge_clusters

    silo = mixed[0][0]
    local = run_apply_step(silo.codes, silo.n_modalities, sampler=SamplerConfig(n_iter=300, thin=5), rng=2,
                           values=silo.values)
    merged = merge_clusters(local, np.zeros(local.n_clusters, dtype=np.int64))
    w = local.pi_draws / local.pi_draws.sum(axis=1, keepdims=True)
    mu, var = local.profile_draws[:, :, 10:12], local.profile_draws[:, :, 12:]
    mean = np.einsum("tk,tkg->tg", w, mu)
    assert np.allclose(merged.profile_draws[:, 0, 10:12], mean)
    assert np.allclose(merged.profile_draws[:, 0, 12:], np.einsum("tk,tkg->tg", w, var + mu ** 2) - mean ** 2)
