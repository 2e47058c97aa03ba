"""A deployment preview (``vcmc fit --silo-policy FILE``): the silos built as a SuperNode's node config builds
them, the rounds' keys generated for the run, in this process."""

import json

import numpy as np
import pytest

pytest.importorskip("cryptography")

import vcmc  # noqa: E402
from vcmc.config import config_from_mapping  # noqa: E402
from vcmc.exceptions import ConfigError  # noqa: E402
from vcmc.flower.preview import deployment_silos, node_configs, parse_silo_policy, read_silo_policy  # noqa: E402
from vcmc.silo.policy import SiloPolicy  # noqa: E402

QUICK = {"sampler.n-iter": 300, "aggregation.max-iter": 60, "assessment.enabled": False, "aggregation.rounds": 30}


@pytest.fixture(scope="module")
def sim():
    from vcmc.research.simulate import simulate_design

    return simulate_design("nested", "easy", rng=3, n_per_silo=120)


def test_the_file_gives_every_silo_its_node_config(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('min-cluster-size = 8\nallow-strategies = ["contingency", "rounds"]\n\n'
                    '[silos.silo_2]\nsuppress-cells-below = 4\nmin-peers = 4\n')
    policy = read_silo_policy(path)
    configs = node_configs(policy, ["silo_1", "silo_2"])
    assert configs["silo_1"] == {"min-cluster-size": 8, "allow-strategies": "contingency,rounds"}
    assert configs["silo_2"]["suppress-cells-below"] == 4 and configs["silo_2"]["min-cluster-size"] == 8
    (tmp_path / "p.json").write_text(json.dumps({"round-to": 5}))
    assert read_silo_policy(tmp_path / "p.json") == {"all": {"round-to": 5}, "silos": {}}


@pytest.mark.parametrize("raw, said", [
    ({"rounds-key": "/k"}, "names a file"),
    ({"data-path": "x.csv"}, "names a file"),
    ({"min-clustr-size": 3}, "not a node-config key"),
    ({"silos": {"silo_9": {"min-cluster-size": 3}}}, "name no silo"),
    ({"silos": ["silo_1"]}, "one table per silo"),
])
def test_what_a_preview_refuses_names_the_key(raw, said):
    with pytest.raises(ConfigError, match=said):
        node_configs(parse_silo_policy(raw), ["silo_1", "silo_2"])


def test_the_silos_are_a_deployments_with_pinned_keys(sim):
    silos = deployment_silos(sim.silos, parse_silo_policy({"min-cluster-size": 7, "min-peers": 3}))
    assert all(not s.own_session and s.privacy.min_cluster_size == 7 for s in silos)
    assert all(s.gate.policy == SiloPolicy(min_peers=3) for s in silos)
    names = {s.name for s in silos}
    for s in silos:
        assert set(s.rounds_peers) == names - {s.name} and s.rounds_key
    # every silo pins the public key that goes with each other silo's private key
    from vcmc.silo.secure_sum import public_of

    by_name = {s.name: s for s in silos}
    assert all(s.rounds_peers[n] == public_of(by_name[n].rounds_key) for s in silos for n in s.rounds_peers)


def test_a_preview_runs_the_deployments_secure_rounds_and_says_so(sim):
    # reproducible-rounds: the rounds' streams from the run's seed (not the silos' group secret), so the preview's
    # answer is the analyst's own session's to the bit (one model in both modes, docs/design.md §16)
    result = vcmc.fit(sim, config=config_from_mapping(QUICK), rng=5, silo_policy={"reproducible-rounds": True})
    preview = result.diagnostics["deployment_preview"]
    assert "deployment preview" in preview["what"] and set(preview["node_config"]) == set(result.silos)
    assert result.diagnostics["rounds"]["secure_sum"] and result.diagnostics["rounds_plan"]["secure_sum"]
    own = vcmc.fit(sim, config=config_from_mapping(QUICK), rng=5)
    assert not own.diagnostics["rounds"]["secure_sum"] and "deployment_preview" not in own.diagnostics
    np.testing.assert_array_equal(np.concatenate(result.assignments), np.concatenate(own.assignments))
    np.testing.assert_array_equal(result.profile_draws, own.profile_draws)


def test_a_preview_of_a_pooled_method_is_refused(sim):
    with pytest.raises(ConfigError, match="deployment preview"):
        vcmc.fit(sim, method="full-mcmc", config=config_from_mapping(QUICK), rng=5, silo_policy={})


def test_vcmc_fit_silo_policy_writes_a_preview(tmp_path):
    from vcmc.cli import main

    data = tmp_path / "data"
    assert main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "3", "--out", str(data),
                 "--n-per-silo", "120"]) == 0
    files = [str(p) for p in sorted(data.glob("silo_*.csv"))]
    policy = tmp_path / "policy.toml"
    policy.write_text("min-cluster-size = 6\n")
    out = tmp_path / "fit"
    assert main(["fit", *files, "--out", str(out), "--seed", "2", "--iterations", "300", "--rounds", "30",
                 "--no-assessment", "--silo-policy", str(policy)]) == 0
    diag = json.loads((out / "result.json").read_text())["diagnostics"]
    assert diag["deployment_preview"]["node_config"]["silo_1"] == {"min-cluster-size": 6}
    assert diag["rounds"]["secure_sum"]
    bad = tmp_path / "bad.toml"
    bad.write_text('rounds-peers = "a=b"\n')
    assert main(["fit", *files, "--out", str(tmp_path / "fit2"), "--silo-policy", str(bad)]) != 0


def test_a_preview_with_fewer_silos_than_the_operators_min_peers_is_the_one_shot_pass_and_says_why(sim):
    two = sim.silos[:2]
    result = vcmc.fit(two, config=config_from_mapping({**QUICK, "aggregation.rounds": 0}), rng=5, silo_policy={})
    plan = result.diagnostics["rounds_plan"]
    assert plan["rounds"] == 1 and "min-peers" in plan["reason"] and "rounds" not in result.diagnostics
    three = vcmc.fit(two, config=config_from_mapping({**QUICK, "aggregation.rounds": 0}), rng=5,
                     silo_policy={"min-peers": 2})
    assert three.diagnostics["rounds_plan"]["rounds"] > 1 and three.diagnostics["rounds"]["secure_sum"]


def test_operators_with_different_minimum_cluster_sizes_run_one_chain_at_the_largest(sim):
    # each silo's chain must be the same chain: the participants agree the largest minimum at the births round
    policy = {"silos": {"silo_1": {"min-cluster-size": 25}}}
    result = vcmc.fit(sim, config=config_from_mapping(QUICK), rng=5, silo_policy=policy)
    assert result.diagnostics["rounds"]["secure_sum"] and result.n_clusters >= 1
    assert result.diagnostics["deployment_preview"]["node_config"]["silo_1"] == {"min-cluster-size": 25}
    # the answer's clusters hold at least the largest minimum (25 rows) on average over the kept draws; at the
    # default minimum (10) this design keeps clusters of 12-24 rows. The rows' final labels are a separate draw
    # and may leave a cluster empty, so the weights are what is checked.
    n_rows = sum(len(s.codes) for s in sim.silos)
    assert (n_rows * result.weights).min() >= 20
