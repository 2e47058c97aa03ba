"""Flower deployment: a real SuperLink and one SuperNode per silo on 127.0.0.1, and the pure adapters."""

import json
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from vcmc.config import (
    FitConfig,  # noqa: E402
    config_from_mapping,  # noqa: E402
)
from vcmc.flower.records import decode_record, encode_record  # noqa: E402
from vcmc.flower.server import SERVER_KEYS  # noqa: E402
from vcmc.protocol import HelloReply, SummarizeRequest  # noqa: E402

APP_DIR = Path(__file__).resolve().parents[2] / "flower_app"
sys.path.insert(0, str(Path(__file__).parent))
from flowerlab import Lab, make_node_key  # noqa: E402


def test_app_defaults_are_the_library_defaults():
    """The Flower run config builds the same FitConfig as the CLI and the API when nothing is overridden."""
    app_config = tomllib.loads((APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    flat = {}
    for key, value in app_config.items():
        if isinstance(value, dict):          # Flower flattens nested tables into dotted keys
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    assert config_from_mapping(flat, ignore=SERVER_KEYS) == FitConfig()
    assert set(SERVER_KEYS) <= set(flat)


def test_record_encoding_round_trips_big_seeds_and_arrays():
    req = SummarizeRequest(config_json="{}", n_silos=3, seed_entropy=2**100 + 7, spawn_key=(0, 2))
    back = decode_record(encode_record(req))
    assert back == req
    hello = HelloReply(silo="A", schema_fingerprint="f" * 16, n_modalities=(2, 3), vcmc_version="0.1")
    assert decode_record(encode_record(hello)) == hello


def test_records_carry_the_assessment_messages():
    from vcmc.flower.records import ACTION
    from vcmc.protocol import MESSAGE_TYPES, REPLY_TYPE, AssessReply, AssessRequest

    rng = np.random.default_rng(0)
    req = AssessRequest(pi=rng.dirichlet([1, 1], size=4), profiles=rng.random((4, 2, 5)),
                        pairs=np.array([[1, 3]]), seed_entropy=2**100 + 3, spawn_key=(2, 1))
    back = decode_record(encode_record(req))
    assert isinstance(back, AssessRequest) and back.seed_entropy == req.seed_entropy
    np.testing.assert_array_equal(back.profiles, req.profiles)
    reply = AssessReply(n_rows=50, n_observed=np.full(5, 50), observed=np.arange(5), replicated=np.ones((4, 5)),
                        pair_n_observed=np.array([50]), pair_observed=np.array([7]),
                        pair_replicated=np.ones((4, 1)), occupied=np.ones((4, 2), dtype=np.int8), lppd=-3.5,
                        p_waic=0.25, elpd=-3.75, elpd_m2=1.5, n_suppressed=0)
    got = decode_record(encode_record(reply))
    assert got.lppd == -3.5 and got.occupied.dtype == np.int8
    # every request a silo answers has a ClientApp action
    assert {m.KIND for m in MESSAGE_TYPES if m in REPLY_TYPE} == set(ACTION)


def test_node_config_out_dir_must_be_absolute_and_receives_the_silos_files(tmp_path):
    from vcmc.exceptions import ConfigError
    from vcmc.flower.client import silo_from_node_config, write_local_results
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("homogeneous", "easy", rng=1, n_per_silo=40)
    sim.silos[0].to_frame().to_csv(tmp_path / "a.csv", index=False)
    sim.schema.to_json(tmp_path / "schema.json")      # 40 rows: inference would refuse the rare modalities
    node = {"data-path": str(tmp_path / "a.csv"), "schema-path": str(tmp_path / "schema.json"), "silo-name": "site_a"}
    with pytest.raises(ConfigError, match="'out-dir' must be an absolute path"):
        silo_from_node_config({**node, "out-dir": "relative/dir"})
    silo = silo_from_node_config({**node, "out-dir": str(tmp_path / "out")})
    silo.assignments = np.zeros(40, dtype=np.int64)
    silo.memberships = np.tile([0.75, 0.25], (40, 1))
    write_local_results(silo, {**node, "out-dir": str(tmp_path / "out")})
    assign = pd.read_csv(tmp_path / "out" / "assignments.csv")
    assert assign.silo.unique().tolist() == ["site_a"] and (assign.probability == 0.75).all()
    assert list(pd.read_csv(tmp_path / "out" / "memberships.csv").columns) == ["silo", "row", "p_1", "p_2"]


def test_silo_operator_sets_data_and_limits_in_node_config(tmp_path):
    from vcmc.config import PrivacyConfig
    from vcmc.exceptions import ConfigError
    from vcmc.flower.client import privacy_from_node_config, silo_from_node_config
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("homogeneous", "easy", rng=1, n_per_silo=40)
    sim.silos[0].to_frame().to_csv(tmp_path / "a.csv", index=False)
    sim.schema.to_json(tmp_path / "schema.json")
    node = {"data-path": str(tmp_path / "a.csv"), "schema-path": str(tmp_path / "schema.json"),
            "silo-name": "site_a", "min-cluster-size": 7, "round-to": 5, "dp-epsilon": "none"}
    silo = silo_from_node_config(node, node_id=3)
    assert silo.name == "site_a" and silo.privacy == PrivacyConfig(min_cluster_size=7, round_to=5)
    np.testing.assert_array_equal(silo.codes, sim.silos[0].codes)
    assert silo.data.schema.fingerprint() == sim.schema.fingerprint()
    unnamed = {k: v for k, v in node.items() if k != "silo-name"}
    assert silo_from_node_config(unnamed, node_id=3).name == "node-3"
    assert privacy_from_node_config({}) == PrivacyConfig()
    with pytest.raises(ConfigError, match="no 'data-path'"):
        silo_from_node_config({"silo-name": "x"})


# ------------------------------------------------------------------------------------------------------
# Real deployment on loopback: a SuperLink and one SuperNode per silo in subprocesses (tests/federation/
# flowerlab.py), plain or with TLS and SuperNode authentication

N_SILOS = 3
OVERRIDES = {"sampler.n-iter": 600, "aggregation.max-iter": 100,   # burn-in: derived, half of n-iter
             "privacy.min-cluster-size": 5}
SEED = 5


@pytest.fixture(params=["plain", "tls-auth"])
def federation(request, tmp_path):
    from vcmc.research.simulate import simulate_design

    secure = request.param == "tls-auth"
    sim = simulate_design("nested", "easy", rng=8, n_per_silo=150)
    schema_path = tmp_path / "schema.json"
    sim.schema.to_json(schema_path)
    csvs = []
    for d in sim.silos[:N_SILOS]:
        path = tmp_path / f"{d.name}.csv"
        d.to_frame().to_csv(path, index=False)
        csvs.append((d.name, path))
    lab = Lab(tmp_path, secure=secure)
    try:
        lab.start_superlink()
        for i, (name, csv) in enumerate(csvs):
            # with authentication, each silo makes its key pair and the coordinator registers the public key
            key = make_node_key(tmp_path, f"silo{i}") if secure else None
            if key is not None:
                lab.register(key)
            lab.start_supernode(f'data-path="{csv}" schema-path="{schema_path}" silo-name="{name}" '
                                f'min-cluster-size=5 out-dir="{tmp_path / "silo-out" / name}"', key=key,
                                log=f"supernode{i}.log")
        yield lab, tmp_path, csvs, schema_path
    finally:
        lab.close()


@pytest.mark.slow
@pytest.mark.flower
def test_flower_run_equals_in_process_run(federation):
    lab, tmp, csvs, schema_path = federation
    out_dir = tmp / "results"
    run_config = " ".join([f'out-dir="{out_dir}"', f"seed={SEED}", f"min-nodes={N_SILOS}", "wait-nodes=90",
                           "round-timeout=300", *(f"{k}={v}" for k, v in OVERRIDES.items())])
    status, server_log = lab.run_app(APP_DIR, run_config, done_file=out_dir / "result.json", timeout=170)
    assert status == "finished:completed", f"status {status}; server log:\n{server_log}"

    flower = json.loads((out_dir / "result.json").read_text())

    # the same run in this process, from the same files, seed and options
    from vcmc.data import read_csv
    from vcmc.federation.faults import load_summaries
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import run_vcmc
    from vcmc.silo.local import LocalSilo

    cfg = config_from_mapping(OVERRIDES)
    from vcmc.config import PrivacyConfig

    silos = [LocalSilo(read_csv(p, schema=str(schema_path), name=n),
                       privacy=PrivacyConfig(min_cluster_size=5)) for n, p in sorted(csvs)]
    with InProcessTransport(silos) as tr:
        local = run_vcmc(tr, cfg, rng=SEED)

    assert flower["silos"] == list(local.silos)
    saved = load_summaries(out_dir / "summaries")
    for s in silos:
        np.testing.assert_array_equal(saved[s.name].pi_draws, s.local.pi_draws)
    np.testing.assert_allclose([c["weight"] for c in flower["clusters"]], local.weights, rtol=1e-12)
    sizes = [[c["size_per_silo"][s] for c in flower["clusters"]] for s in local.silos]
    np.testing.assert_array_equal(sizes, local.partition_counts)
    # each silo wrote its rows' memberships and labels on its own host; none of them reached the server
    assert not (out_dir / "memberships.csv").exists() and not (out_dir / "assignments.csv").exists()
    for s, name in enumerate(local.silos):
        member = pd.read_csv(tmp / "silo-out" / name / "memberships.csv")
        assign = pd.read_csv(tmp / "silo-out" / name / "assignments.csv")
        np.testing.assert_allclose(member.filter(like="p_").to_numpy(), local.memberships[s], rtol=1e-12)
        np.testing.assert_array_equal(assign.cluster.to_numpy(), local.assignments[s] + 1)
    # the model assessment went through the ClientApp too, with the same streams
    assert flower["diagnostics"]["waic"]["elpd_waic"] == pytest.approx(local.diagnostics["waic"]["elpd_waic"],
                                                                       rel=1e-12)
    ppc_local = local.diagnostics["ppc"]["pairs"]
    assert flower["diagnostics"]["ppc"]["pairs"]["p_value"] == ppc_local["p_value"]
    if lab.secure:     # every silo connected over TLS, authenticated by its registered key
        assert sorted(n["status"] for n in lab.nodes()) == ["online"] * N_SILOS


@pytest.mark.slow
@pytest.mark.flower
def test_unauthorised_and_plain_text_supernodes_are_refused(tmp_path):
    """With TLS and SuperNode authentication: a SuperNode whose key was never registered fails to activate
    (Flower's exit code 305 in its log, the process ends; the SuperLink logs the refused public key); one
    without TLS never connects; neither appears among the SuperLink's nodes, only the registered one is
    online."""
    lab = Lab(tmp_path, secure=True)
    data = tmp_path / "a.csv"
    data.write_text("V1\n1\n2\n")
    try:
        lab.start_superlink()
        good = make_node_key(tmp_path, "registered")
        node_id = lab.register(good)
        lab.start_supernode(f'data-path="{data}" silo-name="good"', key=good, log="good.log")
        stranger = lab.start_supernode(f'data-path="{data}" silo-name="stranger"',
                                       key=make_node_key(tmp_path, "stranger"), log="stranger.log")
        plain = lab.start_supernode(f'data-path="{data}" silo-name="plain"', insecure=True, log="plain.log")
        assert stranger.wait(90) != 0
        refused = (tmp_path / "stranger.log").read_text()
        assert "Exit Code: 305" in refused and "Failed to activate SuperNode" in refused, refused[-2000:]
        assert "No SuperNode found with the given public key" in (tmp_path / "superlink.log").read_text()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            nodes = lab.nodes()
            if [n["status"] for n in nodes] == ["online"]:
                break
            time.sleep(2)
        assert [(int(n["node-id"]), n["status"]) for n in nodes] == [(node_id, "online")]
        assert plain.poll() is None        # still trying: a plain-text client cannot talk to a TLS SuperLink
        assert "SuperNode ID" not in (tmp_path / "plain.log").read_text()
    finally:
        lab.close()
