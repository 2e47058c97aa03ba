"""A federated fit with continuous items end to end (docs/design.md §17): the default run's clusters, the Gaussian
draws in the result and on the original scale, and the gate's checks of announced Gaussian draws."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

import vcmc
from vcmc.config import FitConfig, SamplerConfig
from vcmc.data.schema import ContinuousVariable, Schema
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import AnnounceRequest, AssignRequest
from vcmc.report.build import write_report
from vcmc.report.outputs import write_outputs
from vcmc.research.simulate_mixed import simulate_mixed
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy

MEANS = np.array([[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]])
SDS = np.array([[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]])
CONFIG = FitConfig(sampler=SamplerConfig(n_iter=1500))


@pytest.fixture(scope="module")
def mixed():
    silos, truth = simulate_mixed([300, 400, 500], [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]], MEANS, SDS,
                                  missing=0.03, rng=5)
    # the data in units of location 50 and scale 10
    schema = Schema(silos[0].schema.variables, continuous=(ContinuousVariable("X1", 50.0, 10.0, "mmHg"),
                                                          ContinuousVariable("X2", 50.0, 10.0, "mmHg")))
    silos = [dataclasses.replace(s, schema=schema, values=50.0 + 10.0 * s.values) for s in silos]
    return silos, truth


@pytest.fixture(scope="module")
def result(mixed):
    return vcmc.fit(mixed[0], config=CONFIG, rng=1)


def test_default_run_finds_the_clusters_and_their_means(mixed, result):
    _, truth = mixed
    assert result.n_clusters == 3
    assert adjusted_rand_score(truth.labels, np.concatenate(result.assignments)) > 0.9
    assert result.gaussian_draws.shape[1:] == (3, 4)
    means = np.sort(result.gaussian_draws.mean(axis=0)[:, 0])
    assert np.allclose(means, np.sort(MEANS[:, 0]), atol=0.15)
    # the default run's rounds cover the continuous items (docs/design.md §17.8)
    assert result.diagnostics["rounds"]["n_rounds"] > 1 and result.diagnostics["rounds_plan"]["rounds"] != 1
    checks = result.diagnostics["ppc"]["continuous"]["table"]
    assert len(checks) == 4 and all(0.02 < row["ppp"] < 0.98 for row in checks)      # the model fits the data
    assert np.isfinite(result.diagnostics["waic"]["elpd_waic"])
    k_post = result.diagnostics["n_clusters_posterior"]["global"]     # the pooled chain's occupied components
    assert k_post["values"][int(np.argmax(k_post["probabilities"]))] == 3


def test_continuous_csv_is_on_the_original_scale(mixed, result, tmp_path):
    paths = write_outputs(result, tmp_path, schema=mixed[0][0].schema, netcdf=False)
    table = pd.read_csv(paths["continuous"])
    x1 = np.sort(table.loc[table["variable"] == "X1", "mean"].to_numpy())
    assert np.allclose(x1, np.sort(50 + 10 * MEANS[:, 0]), atol=1.5)
    assert (table["mean_ci95_low"] < table["mean"]).all() and (table["unit"] == "mmHg").all()
    assert np.allclose(np.sort(table.loc[table["variable"] == "X2", "sd"]), np.sort(10 * SDS[:, 1]), rtol=0.2)
    report = write_report(tmp_path)
    page = report.html.read_text()
    assert "Continuous variables" in page and "mmHg" in page and report.figures["continuous"].is_file()


def test_announced_gaussian_draws_far_from_the_silo_s_are_refused(mixed, summarize_request):
    silo = LocalSilo(mixed[0][0], policy=SiloPolicy())          # a deployment's default rules
    silo.handle(summarize_request(CONFIG, 0, n_silos=3))
    local = silo.local
    k = local.n_clusters
    pi = local.pi_draws[:5]
    prof = local.profile_draws[:5, :, :10]
    own = local.profile_draws[:5, :, 10:]
    ok = AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi, profiles=prof, gaussian=own)
    far = dataclasses.replace(ok, gaussian=own + np.r_[3.0, 0.0, 0.0, 0.0])
    with pytest.raises(DisclosureError, match="far from the silo's own posterior"):
        silo.gate.admit(far)
    with pytest.raises(ConfigError, match="Gaussian draws come exactly when"):
        silo.gate.admit(dataclasses.replace(ok, gaussian=None))
    silo.gate.admit(ok)
    assign = AssignRequest(assignment=np.arange(k), n_global=k, pi=pi, profiles=prof, gaussian=own)
    with pytest.raises(DisclosureError, match="Gaussian draws that were not announced"):
        silo.gate.admit(dataclasses.replace(assign, gaussian=own * 1.01))
    with pytest.raises(ConfigError, match="needs their Gaussian draws"):
        silo.gate.admit(dataclasses.replace(assign, gaussian=None))


def test_vcmc_predict_scores_new_rows_with_their_measurements(mixed, result, tmp_path):
    from vcmc.cli import main

    write_outputs(result, tmp_path / "fit", schema=mixed[0][0].schema)
    new = tmp_path / "new.csv"
    mixed[0][0].to_frame().to_csv(new, index=False)
    assert main(["predict", str(tmp_path / "fit"), str(new), "--out", str(tmp_path / "out")]) == 0
    labels = pd.read_csv(tmp_path / "out" / "assignments.csv")["cluster"].to_numpy() - 1
    assert np.mean(labels == result.assignments[0]) > 0.95       # global weights here, the silo's own in the fit
