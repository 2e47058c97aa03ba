"""The global-informed rounds through a real Flower deployment (SuperLink and one SuperNode per silo on
127.0.0.1), under secure aggregation (operators who allow only ``secure-rounds``): the same result as the
plain rounds in this process, each silo's final labels on its own host."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

APP_DIR = Path(__file__).resolve().parents[2] / "flower_app"
sys.path.insert(0, str(Path(__file__).parent))
from flowerlab import Lab, write_silos  # noqa: E402

N_SILOS = 3
SEED = 11
OVERRIDES = {"sampler.n-iter": 400, "aggregation.max-iter": 100, "privacy.min-cluster-size": 5,
             "aggregation.rounds": 3, "assessment.enabled": False}


@pytest.mark.slow
@pytest.mark.flower
def test_rounds_over_real_supernodes_equal_the_in_process_rounds(tmp_path):
    from vcmc.config import config_from_mapping
    from vcmc.data import read_csv
    from vcmc.federation.transport import InProcessTransport
    from vcmc.flower.client import policy_from_node_config, privacy_from_node_config
    from vcmc.pipeline import run_vcmc
    from vcmc.research.simulate import simulate_design
    from vcmc.silo.local import LocalSilo

    sim = simulate_design("nested", "easy", rng=3, n_per_silo=120)
    schema_path, csvs = write_silos(sim, tmp_path, N_SILOS)
    # the operators allow the rounds (here in this process plainly, in the deployment only under secure
    # aggregation); their minimum cluster size applies to every round's counts either way
    node = {"min-cluster-size": 5, "allow-strategies": "contingency,rounds"}
    lab = Lab(tmp_path, secure=False)
    out_dir = tmp_path / "results"
    try:
        lab.start_superlink()
        for i, (name, csv) in enumerate(csvs):
            lab.start_supernode(f'data-path="{csv}" schema-path="{schema_path}" silo-name="{name}" '
                                f'min-cluster-size=5 allow-strategies="contingency,secure-rounds" '
                                f'out-dir="{tmp_path / "silo-out" / name}"', log=f"supernode{i}.log")
        run_config = " ".join([f'out-dir="{out_dir}"', f'schema-path="{schema_path}"', f"seed={SEED}",
                               f"min-nodes={N_SILOS}", "wait-nodes=90", "round-timeout=300",
                               "aggregation.round-secure-sum=true",
                               *(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in OVERRIDES.items())])
        status, server_log = lab.run_app(APP_DIR, run_config, done_file=out_dir / "result.json", timeout=240)
    finally:
        lab.close()
    assert status == "finished:completed", f"status {status}; server log:\n{server_log}"
    flower = json.loads((out_dir / "result.json").read_text())
    rounds = flower["diagnostics"]["rounds"]
    assert rounds["n_rounds"] == 3 and len(rounds["per_round"]) == 3 and rounds["secure_sum"]

    # the births are not made in secure-sum rounds (a silo's birth counts would reach the server unmasked), so
    # the plain rounds compared with them leave them out too
    assert rounds["births"]["columns"] == [] and "secure-sum" in rounds["births"]["none_because"]
    cfg = config_from_mapping({**OVERRIDES, "aggregation.round-births": 0.0})
    silos = [LocalSilo(read_csv(p, schema=str(schema_path), name=n), privacy=privacy_from_node_config(node),
                       policy=policy_from_node_config(node)) for n, p in sorted(csvs)]
    with InProcessTransport(silos) as tr:
        local = run_vcmc(tr, cfg, rng=SEED)
    assert [(r["k"], r["log_joint"]) for r in rounds["per_round"]] == [
        (r["k"], r["log_joint"]) for r in local.diagnostics["rounds"]["per_round"]]
    np.testing.assert_allclose([c["weight"] for c in flower["clusters"]], local.weights, rtol=1e-12)
    # each silo wrote its final (rounds') labels on its own host
    for s, name in enumerate(local.silos):
        assign = pd.read_csv(tmp_path / "silo-out" / name / "assignments.csv")
        np.testing.assert_array_equal(assign.cluster.to_numpy(), local.assignments[s] + 1)
