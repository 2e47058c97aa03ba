"""Flower deployment: a real SuperLink and one SuperNode per silo on 127.0.0.1, and the pure adapters."""

import json
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
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


def test_silo_operator_sets_data_and_limits_in_node_config(tmp_path):
    from vcmc.config import PrivacyConfig
    from vcmc.exceptions import ConfigError
    from vcmc.flower.client import privacy_from_node_config, silo_from_node_config
    from vcmc.simulate import simulate_design

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
OVERRIDES = {"sampler.n-iter": 600, "sampler.burn-in": 300, "aggregation.max-iter": 100,
             "privacy.min-cluster-size": 5}
SEED = 5


@pytest.fixture(params=["plain", "tls-auth"])
def federation(request, tmp_path):
    from vcmc.simulate import simulate_design

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
                                "min-cluster-size=5", key=key, log=f"supernode{i}.log")
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
