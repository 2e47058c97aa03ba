"""A Flower deployment gives the answer ``vcmc fit`` gives for the same files and the same effective options.

Three sites on loopback, each started with the operators' command ``vcmc supernode`` (TLS, SuperNode
authentication, the launch cap: at most 2 ClientApps alive at once over the three), whose operators allow the
rounds (``allow-strategies="contingency,rounds"``). Two runs: the deployment's default (the one-shot pass)
against ``vcmc fit --rounds 1``, as the result's note says; and 4 rounds against ``vcmc fit --rounds 4
--node-config`` with the operators' limits. Compared: each silo's assignments.csv and memberships.csv (written
on its host), the weights and sizes of result.json and WAIC.
"""

import json
import re
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

APP_DIR = Path(__file__).resolve().parents[2] / "flower_app"
sys.path.insert(0, str(Path(__file__).parent))
from flowerlab import Lab, is_clientapp, make_node_key, processes_with, write_silos  # noqa: E402

N_SILOS = 3
CAP = 2
SEED = 13
OPTIONS = {"sampler.n-iter": 300, "aggregation.max-iter": 100, "privacy.min-cluster-size": 5}
LIMITS = 'min-cluster-size=5 allow-strategies="contingency,rounds"'


class ClientAppWatch(threading.Thread):
    """The ClientApp processes of a lab, sampled from /proc: most alive at once, and every one seen."""

    def __init__(self, marker: str):
        super().__init__(daemon=True)
        self.marker, self.stop, self.peak, self.seen = marker, threading.Event(), 0, set()

    def run(self) -> None:
        while not self.stop.is_set():
            live = [pid for pid in processes_with(self.marker) if is_clientapp(pid)]
            self.peak = max(self.peak, len(live))
            self.seen.update(live)
            self.stop.wait(0.05)


def _fit(tmp: Path, csvs, schema: Path, out: str, *extra: str) -> Path:
    from vcmc.cli import main

    sets = [x for k, v in OPTIONS.items() for x in ("--set", f"{k}={v}")]
    assert main(["fit", *(str(p) for _, p in csvs), "--schema", str(schema), "--out", str(tmp / out), "--seed",
                 str(SEED), *sets, *extra]) == 0
    return tmp / out


def _same_results(flower_dir: Path, silo_out: dict[str, Path], fit_dir: Path) -> None:
    flower = json.loads((flower_dir / "result.json").read_text())
    fit = json.loads((fit_dir / "result.json").read_text())
    assert flower["silos"] == fit["silos"]
    assert [c["weight"] for c in flower["clusters"]] == pytest.approx([c["weight"] for c in fit["clusters"]],
                                                                      rel=1e-12, abs=1e-15)
    assert [c["size_per_silo"] for c in flower["clusters"]] == [c["size_per_silo"] for c in fit["clusters"]]
    # after the rounds a deployment has the one-shot pass's WAIC only (no assessment after the rounds outside the
    # analyst's own session), and so has vcmc fit with the operators' limits
    waic = [r["diagnostics"].get("waic") or r["diagnostics"]["one_shot"]["waic"] for r in (flower, fit)]
    assert waic[0]["elpd_waic"] == pytest.approx(waic[1]["elpd_waic"], rel=1e-12)
    assert waic[0]["p_waic"] == pytest.approx(waic[1]["p_waic"], rel=1e-12)
    for kind in ("assignments", "memberships"):
        fitted = pd.read_csv(fit_dir / f"{kind}.csv")
        for name, folder in silo_out.items():
            mine = pd.read_csv(folder / f"{kind}.csv")
            theirs = fitted[fitted.silo == name].reset_index(drop=True)
            assert list(mine.columns) == list(theirs.columns)
            pd.testing.assert_frame_equal(mine.drop(columns=[c for c in mine if c.startswith("p")]),
                                          theirs.drop(columns=[c for c in theirs if c.startswith("p")]))
            np.testing.assert_allclose(mine.filter(regex="^p").to_numpy(), theirs.filter(regex="^p").to_numpy(),
                                       rtol=1e-12, atol=1e-15)


@pytest.mark.slow
@pytest.mark.flower
def test_deployment_equals_vcmc_fit_one_shot_and_rounds_under_the_launch_cap(tmp_path):
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("nested", "easy", rng=8, n_per_silo=120)
    schema, csvs = write_silos(sim, tmp_path, N_SILOS)
    lab = Lab(tmp_path, secure=True, max_clientapps=CAP, poll_interval=0.2)
    watch = ClientAppWatch(str(lab.home))
    silo_out = {name: tmp_path / "silo-out" / name for name, _ in csvs}
    runs = {}
    try:
        watch.start()
        lab.start_superlink()
        for i, (name, csv) in enumerate(csvs):
            key = make_node_key(tmp_path, f"site{i}")
            lab.register(key)
            lab.start_supernode(f'data-path="{csv}" schema-path="{schema}" silo-name="{name}" {LIMITS} '
                                f'out-dir="{silo_out[name]}"', key=key, log=f"supernode{i}.log")
        for label, extra in (("one-shot", {}), ("rounds", {"aggregation.rounds": 4})):
            out = tmp_path / f"flower-{label}"
            run_config = " ".join([f'out-dir="{out}"', f'schema-path="{schema}"', f"seed={SEED}",
                                   f"min-nodes={N_SILOS}", "wait-nodes=120", "round-timeout=600",
                                   *(f"{k}={v}" for k, v in {**OPTIONS, **extra}.items())])
            status, log = lab.run_app(APP_DIR, run_config, done_file=out / "result.json", timeout=600)
            assert status == "finished:completed", f"{label}: status {status}; server log:\n{log}"
            runs[label] = (out, {n: tmp_path / f"silo-{label}" / n for n in silo_out})
            for name, folder in silo_out.items():       # each run rewrites the silos' files: keep this run's
                runs[label][1][name].mkdir(parents=True)
                for f in folder.iterdir():
                    f.rename(runs[label][1][name] / f.name)
    finally:
        watch.stop.set()
        watch.join(5)
        lab.close()
    # the launch cap held, and every message had one ClientApp (no relaunch after a missed start window)
    received = sum(len(re.findall(r"Receiving: query\.", p.read_text(errors="replace")))
                   for p in tmp_path.glob("supernode*.log"))
    assert 0 < watch.peak <= CAP and len(watch.seen) == received, (watch.peak, len(watch.seen), received)
    # the app bundle's hash each SuperExec logs is the one `vcmc superexec --bundle-hash` gives an operator to pin
    import subprocess

    pinned = subprocess.run([str(Path(sys.executable).parent / "vcmc"), "superexec", "--bundle-hash", str(APP_DIR)],
                            capture_output=True, text=True, timeout=120).stdout.strip()
    assert len(pinned) == 64 and f"app bundle (FAB) sha256 {pinned}" in (tmp_path / "supernode0.log").read_text()

    # the deployment's default is the one-shot pass, and its result says how vcmc fit gives the same answer
    one_shot, one_shot_files = runs["one-shot"]
    plan = json.loads((one_shot / "result.json").read_text())["diagnostics"]["rounds_plan"]
    assert plan["rounds"] == 1 and plan["other_mode"]["differs"] and "vcmc fit --rounds 1" in plan["other_mode"]["note"]
    assert "note: the analyst's own session's default" in (one_shot / "server.log").read_text()
    fit = _fit(tmp_path, csvs, schema, "fit-one-shot", "--rounds", "1")
    _same_results(one_shot, one_shot_files, fit)

    # the rounds the operators allowed, against vcmc fit with the operators' limits
    rounds, rounds_files = runs["rounds"]
    flower = json.loads((rounds / "result.json").read_text())
    assert flower["diagnostics"]["rounds"]["n_rounds"] == 4 and "waic" not in flower["diagnostics"]
    fit = _fit(tmp_path, csvs, schema, "fit-rounds", "--rounds", "4", "--node-config", LIMITS)
    assert json.loads((fit / "result.json").read_text())["diagnostics"]["rounds"]["per_round"] == \
        flower["diagnostics"]["rounds"]["per_round"]
    _same_results(rounds, rounds_files, fit)
