"""A Flower deployment gives the answer ``vcmc fit`` gives for the same files and the same effective options.

Three sites on loopback, each started with the operators' command ``vcmc supernode`` (TLS, SuperNode
authentication, the launch cap: at most 2 ClientApps alive at once over the three), each with its rounds' key
from ``vcmc keygen`` and the others' pinned (node config ``rounds-key``, ``rounds-peers``) and
``reproducible-rounds = true``, so that the rounds' streams come from the run's seed. One lab, shared by the
test below (a ClientApp launch costs about 2 s of CPU), makes two runs: the one-shot pass (``aggregation.rounds
= 1``) and 6 rounds. Each is compared with ``vcmc fit --rounds R --silo-policy FILE``, whose FILE holds the
sites' node-config keys other than their paths (the same limits, ``reproducible-rounds = true``): each silo's
assignments.csv and memberships.csv (written on its host), the weights and sizes of result.json and WAIC.
"""

import contextlib
import io
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")      # the rounds' keys

APP_DIR = Path(__file__).resolve().parents[2] / "flower_app"
sys.path.insert(0, str(Path(__file__).parent))
from flowerlab import Lab, is_clientapp, make_node_key, processes_with, write_silos  # noqa: E402

N_SILOS = 3
CAP = 2
SEED = 13
ROUNDS = 6
OPTIONS = {"sampler.n-iter": 300, "aggregation.max-iter": 100, "privacy.min-cluster-size": 5}
LIMITS = {"min-cluster-size": 5, "reproducible-rounds": True}
"""The sites' node-config keys other than their paths and rounds' keys: in every SuperNode's node config and in
the --silo-policy file."""

pytestmark = [pytest.mark.slow, pytest.mark.flower]


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


def _toml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else json.dumps(value)


def _keygen(key: Path, name: str) -> str:
    """``vcmc keygen KEY --silo-name NAME``, as an operator runs it: the public line it prints."""
    from vcmc.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["keygen", str(key), "--silo-name", name]) == 0
    return out.getvalue().strip()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """The lab's two runs: ``{"one-shot": (result folder, {silo: its files}), "rounds": ...}`` and what the lab
    saw (the ClientApps' peak and count, the messages the SuperNodes received, the app bundle's hash logged)."""
    from vcmc.research.simulate import simulate_design

    tmp = tmp_path_factory.mktemp("flower-equals-fit")
    sim = simulate_design("nested", "easy", rng=8, n_per_silo=120)
    schema, csvs = write_silos(sim, tmp, N_SILOS)
    publics = {name: _keygen(tmp / f"{name}.rounds.key", name) for name, _ in csvs}
    policy = tmp / "silo-policy.toml"
    policy.write_text("".join(f"{k} = {_toml(v)}\n" for k, v in LIMITS.items()))
    # every operator pinned the reviewed app bundle (vcmc superexec --bundle-hash flower_app/)
    pinned = subprocess.run([str(Path(sys.executable).parent / "vcmc"), "superexec", "--bundle-hash", str(APP_DIR)],
                            capture_output=True, text=True, timeout=120).stdout.strip()
    assert len(pinned) == 64, pinned
    lab = Lab(tmp, secure=True, max_clientapps=CAP, poll_interval=0.2, trusted_bundles=(pinned,))
    watch = ClientAppWatch(str(lab.home))
    silo_out = {name: tmp / "silo-out" / name for name, _ in csvs}
    runs = {}
    try:
        watch.start()
        lab.start_superlink()
        for i, (name, csv) in enumerate(csvs):
            peers = tmp / f"{name}.peers"        # the lines the other operators sent
            peers.write_text("".join(f"{line}\n" for n, line in publics.items() if n != name))
            key = make_node_key(tmp, f"site{i}")
            lab.register(key)
            limits = " ".join(f"{k}={_toml(v)}" for k, v in LIMITS.items())
            lab.start_supernode(f'data-path="{csv}" schema-path="{schema}" silo-name="{name}" {limits} '
                                f'rounds-key="{tmp / f"{name}.rounds.key"}" rounds-peers="{peers}" '
                                f'out-dir="{silo_out[name]}"', key=key, log=f"supernode{i}.log")
        for label, rounds in (("one-shot", 1), ("rounds", ROUNDS)):
            out = tmp / f"flower-{label}"
            run_config = " ".join([f'out-dir="{out}"', f'schema-path="{schema}"', f"seed={SEED}",
                                   f"min-nodes={N_SILOS}", "wait-nodes=120", "round-timeout=600",
                                   *(f"{k}={v}" for k, v in {**OPTIONS, "aggregation.rounds": rounds}.items())])
            status, log = lab.run_app(APP_DIR, run_config, done_file=out / "result.json", timeout=600)
            assert status == "finished:completed", f"{label}: status {status}; server log:\n{log}"
            runs[label] = (out, {n: tmp / f"silo-{label}" / n for n in silo_out})
            for name, folder in silo_out.items():       # each run rewrites the silos' files: keep this run's
                runs[label][1][name].mkdir(parents=True)
                for f in folder.iterdir():
                    f.rename(runs[label][1][name] / f.name)
        received = sum(len(re.findall(r"Receiving: query\.", p.read_text(errors="replace")))
                       for p in tmp.glob("supernode*.log"))
        modified = _modified_bundle_run(lab, tmp, watch, N_SILOS)
    finally:
        watch.stop.set()
        watch.join(5)
        lab.close()
    return {"tmp": tmp, "csvs": csvs, "schema": schema, "policy": policy, "runs": runs, "peak": watch.peak,
            "launched": len(watch.seen) - modified["launched"], "received": received,
            "log0": (tmp / "supernode0.log").read_text(), "pinned": pinned, "modified": modified}


REFUSED_BUNDLE = re.compile(r"vcmc SuperExec: task \d+ not launched: its app bundle \(FAB sha256 ([0-9a-f]{64})\) is "
                            r"not one this site trusts")


def _modified_bundle_run(lab, tmp: Path, watch, n_sites: int) -> dict:
    """A run of the app bundle with one line added to its ClientApp, as a server could ship: every site's
    SuperExec must refuse to launch it (no ClientApp process starts, so no data file is opened). Flower leaves a
    task that was not launched to expire and be claimed again, so the run is stopped once every site refused."""
    import shutil
    import time

    app = tmp / "modified_app"
    shutil.copytree(APP_DIR, app, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    client = next(app.rglob("client_app.py"))
    client.write_text(client.read_text() + "\nREAD_THE_ROWS = True  # a change the operators never reviewed\n")
    launched_before = len(watch.seen)
    out = tmp / "flower-modified"
    submitted = lab.flwr("run", str(app), "t", "--format", "json", "--run-config",
                         f'out-dir="{out}" min-nodes={n_sites} wait-nodes=60')
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id = json.loads(submitted.stdout)["run-id"]
    refused: dict[int, set[str]] = {}
    t0 = time.monotonic()
    while time.monotonic() - t0 < 600 and len(refused) < n_sites:      # a hang guard, not a timing
        for i in range(n_sites):
            found = set(REFUSED_BUNDLE.findall((tmp / f"supernode{i}.log").read_text(errors="replace")))
            if found:
                refused[i] = found
        time.sleep(1)
    lab.flwr("stop", str(run_id), "t")
    return {"refused": refused, "launched": len(watch.seen) - launched_before,
            "result": (out / "result.json").exists()}


def _fit(d: dict, out: str, rounds: int) -> Path:
    from vcmc.cli import main

    sets = [x for k, v in OPTIONS.items() for x in ("--set", f"{k}={v}")]
    folder = d["tmp"] / out
    assert main(["fit", *(str(p) for _, p in d["csvs"]), "--schema", str(d["schema"]), "--out", str(folder),
                 "--seed", str(SEED), *sets, "--rounds", str(rounds), "--silo-policy", str(d["policy"])]) == 0
    return folder


def _same_results(flower_dir: Path, silo_out: dict[str, Path], fit_dir: Path) -> None:
    flower = json.loads((flower_dir / "result.json").read_text())
    fit = json.loads((fit_dir / "result.json").read_text())
    assert flower["silos"] == fit["silos"]
    assert [c["weight"] for c in flower["clusters"]] == pytest.approx([c["weight"] for c in fit["clusters"]],
                                                                      rel=1e-12, abs=1e-15)
    assert [c["size_per_silo"] for c in flower["clusters"]] == [c["size_per_silo"] for c in fit["clusters"]]
    waic = [r["diagnostics"]["waic"] for r in (flower, fit)]
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


def test_a_deployment_equals_vcmc_fit_with_its_silo_policy_one_shot_and_rounds_under_the_launch_cap(deployment):
    """One test over the one lab: pytest-xdist may otherwise hand this module's tests to both workers, each of
    which would start its own lab (xdist_group does not hold them together under pytest 9.2)."""
    # the launch cap held: at most CAP ClientApps alive at once over the three sites, and every message had one
    # ClientApp (no relaunch after a missed start window)
    assert 0 < deployment["peak"] <= CAP, deployment["peak"]
    assert deployment["launched"] == deployment["received"], (deployment["launched"], deployment["received"])

    # the app bundle's hash each SuperExec logs is the one `vcmc superexec --bundle-hash` gives an operator to pin
    pinned = deployment["pinned"]
    assert f"app bundle (FAB) sha256 {pinned}" in deployment["log0"]
    # a bundle whose ClientApp differs by one line: every site refused it before any ClientApp process started
    modified = deployment["modified"]
    assert sorted(modified["refused"]) == list(range(N_SILOS)), modified
    assert all(pinned not in hashes for hashes in modified["refused"].values())
    assert modified["launched"] == 0 and not modified["result"]

    # the one-shot pass, against vcmc fit --rounds 1 --silo-policy
    out, files = deployment["runs"]["one-shot"]
    plan = json.loads((out / "result.json").read_text())["diagnostics"]["rounds_plan"]
    assert plan["rounds"] == 1 and not plan["other_mode"]["differs"]
    assert "vcmc fit --rounds 1 --silo-policy" in plan["other_mode"]["note"]
    _same_results(out, files, _fit(deployment, "fit-one-shot", 1))

    # the rounds, against vcmc fit --rounds 6 --silo-policy: the same to the bit (reproducible-rounds)
    out, files = deployment["runs"]["rounds"]
    flower = json.loads((out / "result.json").read_text())
    rounds = flower["diagnostics"]["rounds"]
    assert rounds["n_rounds"] == ROUNDS and rounds["secure_sum"]
    # the result and the ServerApp's log say how vcmc fit gives this answer
    other = flower["diagnostics"]["rounds_plan"]["other_mode"]
    assert other["mode"] == "own session" and other["differs"] and "--silo-policy" in other["note"]
    assert f"note: the analyst's own session (vcmc fit) makes the same {ROUNDS} rounds" in \
        (out / "server.log").read_text()
    fit = _fit(deployment, "fit-rounds", ROUNDS)
    fitted = json.loads((fit / "result.json").read_text())["diagnostics"]
    assert fitted["rounds"]["per_round"] == rounds["per_round"] and "deployment_preview" in fitted
    _same_results(out, files, fit)
