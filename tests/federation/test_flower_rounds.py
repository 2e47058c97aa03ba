"""The global-informed rounds through a real Flower deployment (SuperLink and one SuperNode per silo on
127.0.0.1), each silo's operator having pinned the others' keys: the server relays masked, padded and tagged
vectors, and with ``reproducible-rounds`` the answer is the in-process rounds' to the bit; each silo's final
labels on its own host."""

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
             "aggregation.rounds": 4, "assessment.enabled": False}


@pytest.mark.slow
@pytest.mark.flower
def test_rounds_over_real_supernodes_equal_the_in_process_rounds(tmp_path):
    from vcmc.config import PrivacyConfig, config_from_mapping
    from vcmc.data import read_csv
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import run_vcmc
    from vcmc.research.simulate import simulate_design
    from vcmc.silo.local import LocalSilo
    from vcmc.silo.secure_sum import new_key

    sim = simulate_design("nested", "easy", rng=3, n_per_silo=120)
    schema_path, csvs = write_silos(sim, tmp_path, N_SILOS)
    keys = {name: new_key() for name, _ in csvs}
    peers = ",".join(f"{n}={k[1]}" for n, k in keys.items())
    lab = Lab(tmp_path, secure=False)
    out_dir = tmp_path / "results"
    try:
        lab.start_superlink()
        for i, (name, csv) in enumerate(csvs):
            (tmp_path / f"{name}.key").write_text(keys[name][0])
            lab.start_supernode(f'data-path="{csv}" schema-path="{schema_path}" silo-name="{name}" '
                                f'min-cluster-size=5 rounds-key="{tmp_path / f"{name}.key"}" rounds-peers="{peers}" '
                                f'reproducible-rounds=true out-dir="{tmp_path / "silo-out" / name}"',
                                log=f"supernode{i}.log")
        run_config = " ".join([f'out-dir="{out_dir}"', f'schema-path="{schema_path}"', f"seed={SEED}",
                               f"min-nodes={N_SILOS}", "wait-nodes=90", "round-timeout=300",
                               *(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in OVERRIDES.items())])
        status, server_log = lab.run_app(APP_DIR, run_config, done_file=out_dir / "result.json", timeout=300)
    finally:
        lab.close()
    assert status == "finished:completed", f"status {status}; server log:\n{server_log}"
    flower = json.loads((out_dir / "result.json").read_text())
    rounds = flower["diagnostics"]["rounds"]
    assert rounds["n_rounds"] == 4 and len(rounds["per_round"]) == 4 and rounds["secure_sum"]

    # the analyst's own session on the same files and seed: the same chain, the same answer
    cfg = config_from_mapping(OVERRIDES)
    silos = [LocalSilo(read_csv(p, schema=str(schema_path), name=n), privacy=PrivacyConfig(min_cluster_size=5))
             for n, p in sorted(csvs)]
    with InProcessTransport(silos) as tr:
        local = run_vcmc(tr, cfg, rng=SEED)
    assert [r["k"] for r in rounds["per_round"]] == [r["k"] for r in local.diagnostics["rounds"]["per_round"]]
    np.testing.assert_allclose([c["weight"] for c in flower["clusters"]], local.weights, rtol=1e-12)
    # each silo wrote its final (rounds') labels on its own host
    for s, name in enumerate(local.silos):
        assign = pd.read_csv(tmp_path / "silo-out" / name / "assignments.csv")
        np.testing.assert_array_equal(assign.cluster.to_numpy(), local.assignments[s] + 1)
