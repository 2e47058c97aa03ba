"""The apply step of one silo: recovery, reproducibility, memory, errors."""

import tracemalloc

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from vcmc.config import PostprocessConfig, PriorConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DataError
from vcmc.mcmc.apply import run_apply_step
from vcmc.model import log_likelihood_rows
from vcmc.research.simulate import PAPER_N_MODALITIES, simulate_design

SHORT = SamplerConfig(n_iter=3000, burn_in=1500, thin=5)


@pytest.fixture(scope="module")
def nested_easy():
    return simulate_design("nested", "easy", rng=20260)


def _clusters_present_plus_small_ghosts(local, n_present):
    """The local partition holds the clusters present, plus at most a few small components that the
    fractionated prior keeps alive (each under 3% of the silo; the server's matching merges them)."""
    sizes = np.sort(local.cluster_sizes)[::-1]
    assert local.n_clusters >= n_present
    assert np.all(sizes[n_present:] < 0.03 * sizes.sum()), sizes
    assert sizes[:n_present].min() >= 0.05 * sizes.sum(), sizes


def _random_codes(rng, n, n_mod=PAPER_N_MODALITIES):
    return np.stack([rng.integers(0, k, size=n) for k in n_mod], axis=1)


@pytest.mark.parametrize("seed", [1, 2])
def test_recovers_the_six_clusters_of_silo_one_under_fractionation(nested_easy, seed):
    codes, truth = nested_easy.silos[0].codes, nested_easy.labels[0]
    n_true = np.unique(truth).size
    assert n_true == 6
    local = run_apply_step(codes, nested_easy.n_modalities, prior=PriorConfig(), sampler=SHORT, n_silos=4,
                           rng=seed)
    assert adjusted_rand_score(truth, local.partition) >= 0.9
    _clusters_present_plus_small_ghosts(local, n_true)
    assert local.cluster_sizes.sum() == codes.shape[0]
    # Fractionation keeps a few tiny components alive (docs/design.md §0): the chain's own count of
    # occupied components exceeds the truth
    assert local.diagnostics["k_hat"] > n_true
    np.testing.assert_allclose(local.pi_draws.sum(axis=1), 1.0)


def test_without_fractionation_the_posterior_mode_of_occupied_components_is_the_truth(nested_easy):
    codes, truth = nested_easy.silos[0].codes, nested_easy.labels[0]
    local = run_apply_step(codes, nested_easy.n_modalities, sampler=SHORT, n_silos=1, rng=5)
    post = local.n_clusters_posterior()
    assert int(np.argmax(post)) == np.unique(truth).size
    assert local.diagnostics["k_hat"] == np.unique(truth).size
    assert adjusted_rand_score(truth, local.partition) >= 0.9


def test_estimates_of_the_weights_are_close_to_the_truth(nested_easy):
    codes, truth = nested_easy.silos[0].codes, nested_easy.labels[0]
    local = run_apply_step(codes, nested_easy.n_modalities, sampler=SHORT, n_silos=4, rng=7)
    # Compare each local cluster's posterior median weight to the empirical share of its majority label.
    for k in range(local.n_clusters):
        members = truth[local.partition == k]
        share = np.mean(truth == np.bincount(members).argmax())
        assert abs(np.median(local.pi_draws[:, k]) - share) < 0.03


def test_same_seed_same_local_posterior_and_multiple_chains_are_aligned():
    sim = simulate_design("homogeneous", "easy", rng=11, n_per_silo=400)
    codes = sim.silos[0].codes
    sampler = SamplerConfig(n_iter=1500, burn_in=500, thin=5, n_chains=2)
    a = run_apply_step(codes, sim.n_modalities, sampler=sampler, n_silos=4, rng=99)
    b = run_apply_step(codes, sim.n_modalities, sampler=sampler, n_silos=4, rng=99)
    for name in ("partition", "membership", "pi_draws", "profile_draws", "n_occupied", "log_posterior"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    c = run_apply_step(codes, sim.n_modalities, sampler=sampler, n_silos=4, rng=100)
    assert not np.array_equal(a.pi_draws, c.pi_draws)
    assert a.n_occupied.shape == (2, sampler.n_kept)
    assert a.pi_draws.shape[0] == 2 * sampler.n_kept
    # both chains describe the same clusters after alignment: their medians agree
    half = sampler.n_kept
    np.testing.assert_allclose(np.median(a.pi_draws[:half], axis=0), np.median(a.pi_draws[half:], axis=0),
                               atol=0.04)
    assert a.diagnostics["rhat_pi_max"] < 1.1


def test_jobs_do_not_change_the_result():
    sim = simulate_design("homogeneous", "easy", rng=12, n_per_silo=300)
    codes = sim.silos[1].codes
    sampler = SamplerConfig(n_iter=600, burn_in=200, thin=4, n_chains=2)
    one = run_apply_step(codes, sim.n_modalities, sampler=sampler, n_silos=4, rng=3, jobs=1)
    two = run_apply_step(codes, sim.n_modalities, sampler=sampler, n_silos=4, rng=3, jobs=2)
    for name in ("partition", "membership", "pi_draws", "profile_draws", "n_occupied", "log_posterior"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))


def test_progress_reports_every_iteration():
    rng = np.random.default_rng(1)
    done = []
    sampler = SamplerConfig(n_iter=250, burn_in=50, thin=5, block_size=100, n_chains=2)
    run_apply_step(_random_codes(rng, 80), PAPER_N_MODALITIES, sampler=sampler, rng=1, progress=done.append)
    assert sum(done) == 2 * 250


def test_memory_stays_linear_in_rows_for_a_large_silo():
    rng = np.random.default_rng(2)
    n, c = 20_000, 15
    codes = _random_codes(rng, n)
    sampler = SamplerConfig(n_iter=60, burn_in=20, thin=2, block_size=20)
    run_apply_step(codes[:50], PAPER_N_MODALITIES, sampler=sampler, rng=1)   # compile outside the trace
    tracemalloc.start()
    try:
        local = run_apply_step(codes, PAPER_N_MODALITIES, sampler=sampler, n_silos=4, rng=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    t, p = sampler.n_kept, 26
    # An n x n matrix would need n^2 >= 400 MB even as int8; the bound is a small multiple of n C+.
    bound = 64 * n * c + 64 * t * c * p + 2_000_000
    assert peak < bound, f"peak {peak / 1e6:.1f} MB above {bound / 1e6:.1f} MB"
    assert local.partition.shape == (n,)


@pytest.mark.parametrize("silo", [0, 3])
def test_psm_partition_on_a_small_silo_is_close_to_the_bayes_partition(nested_easy, silo):
    codes, truth = nested_easy.silos[silo].codes[:300], nested_easy.labels[silo][:300]
    # The best any estimator can do: allocation under the true weights and profiles.
    w = nested_easy.weights[silo]
    present = w > 0
    bayes = log_likelihood_rows(codes, w[present], nested_easy.profiles[present],
                                nested_easy.n_modalities).argmax(axis=1)
    local = run_apply_step(codes, nested_easy.n_modalities, sampler=SamplerConfig(n_iter=1500, burn_in=500),
                           postprocess=PostprocessConfig(partition="psm"), n_silos=4, rng=4)
    _clusters_present_plus_small_ghosts(local, int(present.sum()))
    assert adjusted_rand_score(truth, local.partition) >= adjusted_rand_score(truth, bayes) - 0.05


def test_psm_is_refused_for_a_large_silo():
    codes = _random_codes(np.random.default_rng(3), 5001)
    with pytest.raises(ConfigError, match="at most 5000 rows"):
        run_apply_step(codes, PAPER_N_MODALITIES, postprocess=PostprocessConfig(partition="psm"))


def test_bad_codes_are_refused_without_showing_values():
    codes = _random_codes(np.random.default_rng(4), 30)
    codes[5, 2] = 7
    with pytest.raises(DataError, match="column 2") as err:
        run_apply_step(codes, PAPER_N_MODALITIES, sampler=SamplerConfig(n_iter=10, burn_in=0))
    assert "7" not in str(err.value).replace("0..1", "")
    with pytest.raises(DataError, match="columns"):
        run_apply_step(codes[:, :3], PAPER_N_MODALITIES)
    with pytest.raises(ConfigError, match="n_silos"):
        run_apply_step(codes, PAPER_N_MODALITIES, n_silos=0)
    # no kept draw: refused when the options are built, before any sampling
    with pytest.raises(ConfigError, match="'thin' parameter of SamplerConfig must be at most n_iter - burn_in = 2"):
        SamplerConfig(n_iter=10, burn_in=8, thin=5)


@pytest.mark.slow
@pytest.mark.parametrize("design", ["nested", "non-nested", "homogeneous"])
def test_recovery_holds_across_replicated_easy_datasets(design):
    # Every silo of 3 replicated datasets: the local partition matches the truth (ARI >= 0.9) and the
    # number of local clusters after the minimum size rule is the number of clusters present.
    for rep in range(3):
        sim = simulate_design(design, "easy", rng=4000 + rep)
        for s, silo in enumerate(sim.silos):
            truth = sim.labels[s]
            local = run_apply_step(silo.codes, sim.n_modalities, sampler=SHORT, n_silos=4, rng=rep)
            n_present = np.unique(truth).size
            assert adjusted_rand_score(truth, local.partition) >= 0.9, (design, rep, s)
            _clusters_present_plus_small_ghosts(local, n_present)
