"""Continuous items through a deployment's code path (docs/design.md §17): the ServerApp (``server_main``) and the
ClientApp handler of each site, every message through Flower's protobuf wire format (``DirectGrid``), sites
built from node configs with their rounds' keys pinned. The global-informed rounds with the Gaussian sums equal
``vcmc fit --silo-policy`` to the bit (``reproducible-rounds``), continuous.csv included, and the latent class
analysis with Gaussian items equals ``vcmc fit --k`` (with the ServerApp's complete-data standard errors)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")      # the rounds' keys

sys.path.insert(0, str(Path(__file__).parent))
from test_lca_flower import DirectGrid, _server_run  # noqa: E402

SEED = 21
OPTIONS = {"sampler.n-iter": 300, "aggregation.max-iter": 100, "privacy.min-cluster-size": 5,
           "assessment.enabled": False}
LIMITS = {"min-cluster-size": 5, "reproducible-rounds": True}


@pytest.fixture(autouse=True)
def task_identity():
    """The run's identity a SuperNode sets for its ClientApp (the silos' run key is bound to it)."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = {k: getattr(TaskIdentity, k, None) for k in ("_run_id", "_node_id", "_task_id")}
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = 1, 0, 1
    yield
    for k, v in saved.items():
        setattr(TaskIdentity, k, v)


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Three sites' CSV files (two categorical items' worth of the simulator's and two measurements in mmHg), the
    schema beside them, each site's rounds' key and the others' pinned, and the --silo-policy file."""
    from vcmc.cli import main
    from vcmc.data.schema import ContinuousVariable, Schema
    from vcmc.research.simulate_mixed import simulate_mixed

    tmp = tmp_path_factory.mktemp("mixed-flower")
    means = np.array([[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]])
    sds = np.array([[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]])
    silos, _ = simulate_mixed([90, 110, 130], [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]], means, sds,
                              missing=0.03, rng=7)
    schema = Schema(silos[0].schema.variables, continuous=(ContinuousVariable("X1", 50.0, 10.0, "mmHg"),
                                                          ContinuousVariable("X2", 50.0, 10.0, "mmHg")))
    schema_path = tmp / "schema.json"
    schema.to_json(schema_path)
    csvs = {}
    for s in silos:
        csvs[s.name] = tmp / f"{s.name}.csv"
        dataclasses.replace(s, schema=schema, values=50.0 + 10.0 * s.values).to_frame().to_csv(csvs[s.name],
                                                                                               index=False)
    publics = {}
    for name in csvs:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["keygen", str(tmp / f"{name}.rounds.key"), "--silo-name", name]) == 0
        publics[name] = out.getvalue().strip()
    configs = {}
    for i, (name, csv) in enumerate(csvs.items()):
        peers = tmp / f"{name}.peers"
        peers.write_text("".join(f"{line}\n" for n, line in publics.items() if n != name))
        configs[10 + i] = {"data-path": str(csv), "schema-path": str(schema_path), "silo-name": name,
                           "rounds-key": str(tmp / f"{name}.rounds.key"), "rounds-peers": str(peers),
                           "out-dir": str(tmp / "silo-out" / name), "allow-strategies": "contingency,rounds,lca",
                           "exact-scalars": "true", **{k: str(v).lower() for k, v in LIMITS.items()}}
    policy = tmp / "silo-policy.toml"
    policy.write_text("".join(f"{k} = {str(v).lower()}\n" for k, v in LIMITS.items()))
    return {"tmp": tmp, "schema": schema_path, "csvs": csvs, "configs": configs, "policy": policy}


def test_the_rounds_with_gaussian_sums_equal_vcmc_fit_with_the_silo_policy(sites):
    from vcmc.cli import main

    tmp = sites["tmp"]
    out = tmp / "flower-rounds"
    _server_run(DirectGrid(sites["configs"]), {"out-dir": str(out), "schema-path": str(sites["schema"]),
                                               "seed": SEED, "min-nodes": 3, "aggregation.rounds": 6, **OPTIONS})
    fit = tmp / "fit-rounds"
    sets = [x for k, v in OPTIONS.items() for x in ("--set", f"{k}={str(v).lower()}")]
    assert main(["fit", *map(str, sites["csvs"].values()), "--schema", str(sites["schema"]), "--out", str(fit),
                 "--seed", str(SEED), *sets, "--rounds", "6", "--silo-policy", str(sites["policy"])]) == 0
    flower, local = (json.loads((d / "result.json").read_text()) for d in (out, fit))
    rounds = flower["diagnostics"]["rounds"]
    assert rounds["n_rounds"] == 6 and rounds["secure_sum"]
    assert local["diagnostics"]["rounds"]["per_round"] == rounds["per_round"]
    assert [c["weight"] for c in flower["clusters"]] == pytest.approx([c["weight"] for c in local["clusters"]],
                                                                      rel=1e-12, abs=1e-15)
    # the clusters' measurements in mmHg, the same to rounding
    a, b = pd.read_csv(out / "continuous.csv"), pd.read_csv(fit / "continuous.csv")
    assert set(a.variable) == {"X1", "X2"} and set(a.unit) == {"mmHg"}
    pd.testing.assert_frame_equal(a, b, rtol=1e-12)
    # each site's labels on its own host: the analyst's fit gives the same
    fitted = pd.read_csv(fit / "assignments.csv")
    for name in sites["csvs"]:
        mine = pd.read_csv(tmp / "silo-out" / name / "assignments.csv")
        np.testing.assert_array_equal(mine.cluster.to_numpy(), fitted[fitted.silo == name].cluster.to_numpy())


def test_the_latent_class_analysis_with_gaussian_items_equals_vcmc_fit_k(sites):
    from vcmc.cli import main

    tmp = sites["tmp"]
    out = tmp / "flower-lca"
    _server_run(DirectGrid(sites["configs"]), {"out-dir": str(out), "schema-path": str(sites["schema"]),
                                               "seed": SEED, "min-nodes": 3, "lca-k": 3, "lca-starts": 2,
                                               "lca-max-em-iterations": 30})
    local = tmp / "fit-lca"
    assert main(["fit", *map(str, sites["csvs"].values()), "--schema", str(sites["schema"]), "--k", "3",
                 "--starts", "2", "--max-em-iterations", "30", "--seed", str(SEED), "--min-best", "1",
                 "--standard-errors", "complete-data",
                 "--out", str(local)]) == 0
    a, b = (json.loads((d / "lca.json").read_text()) for d in (out, local))
    assert a["statistics"]["log_likelihood"] == pytest.approx(b["statistics"]["log_likelihood"], rel=1e-10)
    np.testing.assert_allclose(a["weights"], b["weights"], atol=1e-8)
    fa, fb = pd.read_csv(out / "continuous.csv"), pd.read_csv(local / "continuous.csv")
    assert set(fa.variable) == {"X1", "X2"}
    pd.testing.assert_frame_equal(fa, fb, rtol=1e-8)
