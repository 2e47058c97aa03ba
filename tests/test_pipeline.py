"""End-to-end VCMC through the Silo interface: recovery, reproducibility, transports, stage timings."""

import dataclasses

import numpy as np
import pytest

from vcmc.api import fit, make_transport
from vcmc.config import MatchingConfig
from vcmc.metrics import adjusted_rand_index
from vcmc.pipeline import run_vcmc, server_steps, summarize_silos


@pytest.fixture(scope="module")
def nested_result(nested_easy, short_config):
    return fit(nested_easy, config=short_config, rng=3)


def test_vcmc_recovers_nested_easy(nested_result, nested_easy):
    res = nested_result
    assert res.n_clusters == 6
    ari = adjusted_rand_index(np.concatenate(res.assignments), np.concatenate(nested_easy.labels))
    assert ari >= 0.9
    # every aggregated draw is on the simplex by construction
    np.testing.assert_allclose(res.pi_draws.sum(axis=1), 1.0, atol=1e-9)
    assert np.all(res.weights_ci[:, 0] <= res.weights) and np.all(res.weights <= res.weights_ci[:, 1])
    # global weights close to the truth (pooled Table 1 row), after aligning clusters by size
    est = np.sort(res.weights[res.cluster_sizes > 0])[::-1]
    true = np.sort(nested_easy.global_weights)[::-1]
    np.testing.assert_allclose(est, true, atol=0.04)


def test_partition_counts_match_assignments(nested_result):
    res = nested_result
    for s, lab in enumerate(res.assignments):
        np.testing.assert_array_equal(np.bincount(lab, minlength=res.weights.size), res.partition_counts[s])
    assert set(res.timings) >= {"apply", "matching", "aggregation", "total"}


def test_same_seed_same_result_and_transport_invariance(nested_easy, short_config):
    cfg = dataclasses.replace(short_config, sampler=dataclasses.replace(short_config.sampler, n_iter=600,
                                                                        burn_in=300))
    a = fit(nested_easy, config=cfg, rng=5, transport="inprocess")
    b = fit(nested_easy, config=cfg, rng=5, transport="process", jobs=2)
    np.testing.assert_array_equal(a.partition_counts, b.partition_counts)
    np.testing.assert_allclose(a.pi_draws, b.pi_draws)
    np.testing.assert_allclose(a.profile_draws, b.profile_draws)


def test_matchings_share_one_apply_step(nested_easy, short_config):
    """Server steps can be re-run with another matching on the same summaries (no new MCMC)."""
    with make_transport(nested_easy.silos, short_config, kind="inprocess") as tr:
        summaries, failures = summarize_silos(tr, short_config, rng=9)
        assert not failures
        res = {}
        for m in ("ball", "hungarian", "min-divergence"):
            cfg = dataclasses.replace(short_config, matching=MatchingConfig(method=m))
            res[m] = server_steps(summaries, tr, cfg, rng=9)
        again = run_vcmc(tr, short_config, rng=9)
    truth = np.concatenate(nested_easy.labels)
    for m, r in res.items():
        assert adjusted_rand_index(np.concatenate(r.assignments), truth) > 0.85, m
    np.testing.assert_allclose(again.pi_draws, res["ball"].pi_draws)


def test_rows_are_labelled_by_the_global_posterior_and_the_classification_is_reported():
    """A small silo's rows are classified better with profiles estimated from every silo than with its own;
    each silo keeps its rows' memberships and sends only cluster-level sums."""
    from vcmc.config import AggregationConfig, FitConfig, SamplerConfig
    from vcmc.research.simulate import simulate

    w = [[0.4, 0.3, 0.3], [0.4, 0.3, 0.3]]
    data = simulate(n_per_silo=[150, 3000], weights=w, n_modalities=(3,) * 8, concentration=1.0, rng=4)
    base = FitConfig(sampler=SamplerConfig(n_iter=2000, burn_in=1000, thin=5))
    results = {}
    for mode in ("posterior", "local"):
        # the one-shot pass's labelling (the default rounds label the rows by the pooled chain instead)
        cfg = dataclasses.replace(base, aggregation=AggregationConfig(assign=mode, rounds=1))
        with make_transport(data.silos, cfg, kind="inprocess") as tr:
            results[mode] = run_vcmc(tr, cfg, rng=2)
    small = {m: adjusted_rand_index(data.labels[0], r.assignments[0]) for m, r in results.items()}
    assert small["posterior"] > small["local"] + 0.02
    post = results["posterior"]
    cls = post.diagnostics["classification"]
    assert 0.0 < cls["relative_entropy"] <= 1.0
    assert set(cls["relative_entropy_per_silo"]) == {"silo_1", "silo_2"}
    assert all(0.3 < p <= 1.0 for p in cls["average_probability"] if p is not None)


def test_memberships_come_back_with_the_labels_by_either_local_transport(nested_easy, short_config):
    """In-process and process-pool runs return each row's memberships through the transport's private
    call; the label is their argmax and the cluster-level sums the silos sent agree with them."""
    cfg = dataclasses.replace(short_config, sampler=dataclasses.replace(short_config.sampler, n_iter=600,
                                                                        burn_in=300))
    a = fit(nested_easy, config=cfg, rng=5, transport="inprocess")
    b = fit(nested_easy, config=cfg, rng=5, transport="process", jobs=2)
    for res in (a, b):
        assert len(res.memberships) == len(res.silos)
        for s, (m, lab) in enumerate(zip(res.memberships, res.assignments, strict=True)):
            assert m.shape == (lab.size, res.weights.size)
            np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-12)
            np.testing.assert_array_equal(np.argmax(m, axis=1), lab)
            np.testing.assert_array_equal(np.bincount(lab, minlength=m.shape[1]), res.partition_counts[s])
    for ma, mb in zip(a.memberships, b.memberships, strict=True):
        np.testing.assert_allclose(ma, mb, rtol=1e-12)
    # the assessment is the same whatever the transport (its streams come in the requests)
    assert a.diagnostics["waic"]["elpd_waic"] == pytest.approx(b.diagnostics["waic"]["elpd_waic"], rel=1e-12)
    assert a.diagnostics["ppc"]["pairs"]["table"] == b.diagnostics["ppc"]["pairs"]["table"]


def test_result_diagnostics_hold_the_assessment_contract(nested_result):
    d = nested_result.diagnostics
    k = d["n_clusters_posterior"]
    assert set(k) >= {"global", "local"} and set(k["local"]) == set(nested_result.silos)
    assert sum(k["global"]["probabilities"]) == pytest.approx(1.0)
    # the six clusters are well separated: K = 6 is the posterior mode (the default rounds' pooled chain, like
    # full-data MCMC's, occupies a stray seventh or eighth component with a row or two in some rounds)
    assert k["global"]["values"][int(np.argmax(k["global"]["probabilities"]))] == 6
    for s in nested_result.silos:
        assert sum(k["local"][s]["probabilities"]) == pytest.approx(1.0)
    ppc = d["ppc"]
    assert ppc["n_replicates"] == 100
    n_mod = nested_result.n_modalities
    for check, n_entries in (("prevalence", sum(n_mod)), ("pairs", ppc["pairs"]["n_pairs"])):
        assert set(ppc[check]) >= {"statistic", "p_value", "table"}
        assert len(ppc[check]["table"]) == n_entries * (1 + len(nested_result.silos))
        row = ppc[check]["table"][0]
        assert row["silo"] == "pooled" and 0.0 <= row["ppp"] <= 1.0
        lo, hi = row["replicated_ci95"]
        assert lo <= row["replicated_mean"] <= hi
    # data simulated from a latent class model and a converged fit: the checks do not reject it
    assert ppc["prevalence"]["p_value"] > 0.01 and ppc["pairs"]["p_value"] > 0.01
    waic = d["waic"]
    assert waic["n_rows"] == 4000 and waic["p_waic"] > 0 and waic["se"] > 0
    assert set(waic) >= {"elpd_waic", "se", "p_waic", "n_rows", "definition"}


def test_chains_are_kept_and_arviz_reads_them(nested_easy, short_config, tmp_path):
    """--chains 2: posterior.nc has a chain dimension; on this well-separated design the chains agree, so
    ArviZ's rank-normalised split R-hat of every weight is finite and near 1 (under 1.05) and the bulk ESS
    is a good part of the draws."""
    import arviz as az

    from vcmc.report import write_outputs

    # the one-shot pass keeps the chains (the rounds are one pooled chain: their result has one)
    cfg = dataclasses.replace(short_config, sampler=dataclasses.replace(short_config.sampler, n_chains=2),
                              aggregation=dataclasses.replace(short_config.aggregation, rounds=1))
    res = fit(nested_easy, config=cfg, rng=3)
    assert res.n_chains == 2
    tree = az.from_netcdf(write_outputs(res, tmp_path)["posterior"])
    assert tree["posterior"]["pi"].shape == (2, cfg.sampler.n_kept, res.weights.size)
    rhat = az.rhat(tree, var_names=["pi", "profiles"])
    ess = az.ess(tree, var_names=["pi"])
    assert np.all(np.isfinite(rhat["pi"].values)) and float(rhat["pi"].max()) < 1.05
    assert float(np.nanmax(rhat["profiles"].values)) < 1.05
    assert float(ess["pi"].min()) > 100
    summary = az.summary(tree, var_names=["pi"])
    assert np.all(np.isfinite(summary["r_hat"].to_numpy(dtype=float)))


def test_a_silo_refusing_the_assessment_is_left_out_of_it_only(nested_easy, short_config):
    from vcmc.config import PrivacyConfig
    from vcmc.federation.transport import InProcessTransport
    from vcmc.silo.local import LocalSilo

    cfg = dataclasses.replace(short_config, sampler=dataclasses.replace(short_config.sampler, n_iter=600,
                                                                        burn_in=300))
    silos = [LocalSilo(d, privacy=PrivacyConfig(share_assessment=(i != 2)))
             for i, d in enumerate(nested_easy.silos)]
    with InProcessTransport(silos) as tr:
        res = run_vcmc(tr, cfg, rng=5)
    refused = nested_easy.silos[2].name
    assert res.n_clusters >= 1 and res.assignments is not None
    assert refused not in res.diagnostics["ppc"]["silos"] and len(res.diagnostics["ppc"]["silos"]) == 3
    assert res.diagnostics["waic"]["n_rows"] == sum(d.n_rows for d in nested_easy.silos) - \
        nested_easy.silos[2].n_rows
    assert any(refused in w and "share-assessment = false" in w for w in res.diagnostics["warnings"])
