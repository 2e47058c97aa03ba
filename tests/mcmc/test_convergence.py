"""``--iterations auto``: chains stop at the convergence targets, reproducibly, and say what they reached."""

import dataclasses

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from vcmc.config import FitConfig, PriorConfig, SamplerConfig
from vcmc.exceptions import ConfigError
from vcmc.mcmc.apply import run_apply_step
from vcmc.mcmc.diagnostics import ess, rhat
from vcmc.research.simulate import simulate_design

AUTO = SamplerConfig(n_iter=20_000, burn_in=1000, thin=5, stop="converged", check_every=500)


@pytest.fixture(scope="module")
def nested_easy():
    return simulate_design("nested", "easy", rng=20260)


def test_an_easy_silo_stops_early_at_the_targets_and_still_recovers_its_clusters(nested_easy):
    codes, truth = nested_easy.silos[0].codes, nested_easy.labels[0]
    local = run_apply_step(codes, nested_easy.n_modalities, prior=PriorConfig(), sampler=AUTO, n_silos=4, rng=1)
    d = local.diagnostics
    assert d["converged"] == 1.0
    assert d["iterations_run"] < AUTO.n_iter
    assert (d["iterations_run"] - AUTO.burn_in) % AUTO.check_every == 0
    assert adjusted_rand_score(truth, local.partition) >= 0.9
    # the stopping rule's own statistics hold on what was kept: the log posterior's split R-hat and ESS
    lp = local.log_posterior
    assert float(rhat(lp)) <= AUTO.target_rhat
    assert float(ess(lp, "bulk")) >= AUTO.target_ess and float(ess(lp, "tail")) >= AUTO.target_ess


def test_a_chain_capped_before_the_targets_reports_it_did_not_converge(nested_easy):
    capped = SamplerConfig(n_iter=1600, burn_in=1000, thin=5, stop="converged", check_every=300)
    local = run_apply_step(nested_easy.silos[0].codes, nested_easy.n_modalities, sampler=capped, n_silos=4,
                           rng=1)
    assert local.diagnostics["converged"] == 0.0
    assert local.diagnostics["iterations_run"] == capped.n_iter
    assert local.log_posterior.shape == (1, capped.n_kept)


def test_where_chains_stop_depends_on_the_seed_only_not_on_blocks_or_processes(nested_easy):
    codes, k = nested_easy.silos[1].codes, nested_easy.n_modalities
    two = SamplerConfig(n_iter=20_000, burn_in=1000, thin=5, stop="converged", check_every=500, n_chains=2)
    runs = [run_apply_step(codes, k, sampler=s, n_silos=4, rng=7, jobs=j)
            for s, j in ((two, 1), (dataclasses.replace(two, block_size=130), 1), (two, 2))]
    for other in runs[1:]:
        assert other.diagnostics["iterations_run"] == runs[0].diagnostics["iterations_run"]
        np.testing.assert_array_equal(other.log_posterior, runs[0].log_posterior)
    # chains stopped at different lengths are pooled at the shortest: the draws form a (chains, draws) grid
    assert runs[0].log_posterior.shape[0] == 2


def test_fixed_runs_ignore_the_targets_and_record_the_iterations(nested_easy):
    fixed = SamplerConfig(n_iter=1200, burn_in=600, thin=5)
    local = run_apply_step(nested_easy.silos[0].codes, nested_easy.n_modalities, sampler=fixed, n_silos=4, rng=1)
    assert local.diagnostics["iterations_run"] == 1200
    assert "converged" not in local.diagnostics


@pytest.mark.parametrize(("option", "value"), [("stop", "until-done"), ("target_rhat", 1.0), ("target_ess", 2),
                                               ("check_every", 0)])
def test_bad_targets_are_named(option, value):
    with pytest.raises(ConfigError, match=option):
        SamplerConfig(**{option: value})


def test_the_result_warns_about_a_silo_that_did_not_converge(nested_easy):
    from vcmc import fit

    config = FitConfig(sampler=SamplerConfig(n_iter=1300, burn_in=1000, thin=5, stop="converged",
                                             check_every=300))
    result = fit(nested_easy, config=config, rng=3)
    # 60 kept draws: the ESS target of 400 cannot be met, and the warning says that is what failed
    warned = [w for w in result.diagnostics["warnings"] if "did not converge" in w and "ESS" in w]
    assert len(warned) == nested_easy.n_silos
    assert all(result.diagnostics["local"][s]["converged"] == 0.0 for s in result.silos)
