"""A malicious server against the rounds and their secure sums (issue 42), through the deployed ClientApp.

Three silos whose operators each made their key with ``vcmc keygen`` and pinned the other two (node config
``rounds-key``, ``rounds-peers``, ``min-peers`` 3, ``min-cluster-size`` 10, ``allow-strategies`` with the
rounds), a fourth whose operator did not allow the rounds, and a modified ServerApp
(``malicious_rounds_app/``) that runs the attacks of ``vcmc_malicious_rounds.attacks`` and records what came
back: over real Flower with TLS and SuperNode authentication (slow), and through Flower's wire encoding in this
process (``test_flower_boundary.WireGrid``, the quick suite). Each test asserts that an attack was refused for the
rule it breaks, or that what the honest chain gave the server carries nothing below the operators' limits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("cryptography")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "malicious_rounds_app"))
from flowerlab import BIN, Lab, make_node_key  # noqa: E402

APP = Path(__file__).parent / "malicious_rounds_app"
N_ROWS = 60                 # per silo: three or four local clusters of 12-28 rows each
SILOS = ("hospital_a", "hospital_b", "hospital_c")
OUTSIDER = "outsider"       # its operator allows the contingency strategy only
MIN_SIZE = 10
CHECKPOINTS = 4             # the honest chain's rounds
BUDGET = "round_start=8,round_finish=2,round_result=2,round_assess=2"
"""Raised by this test's operators so that every crafted request meets its own rule, not a spent budget (a
refused request counts); the default, one start per run, is ``test_the_default_budget_allows_one_start``."""
A, B, C = SILOS
pytestmark = pytest.mark.xdist_group("malicious-rounds")      # one worker sets up the real-Flower lab, once


def _keygen(folder: Path, name: str) -> str:
    """The operator's ``vcmc keygen``: the private key written to the silo's host, the public line printed."""
    done = subprocess.run([str(BIN / "vcmc"), "keygen", str(folder / f"{name}.key"), "--silo-name", name],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith(f"{name}=") and oct((folder / f"{name}.key").stat().st_mode)[-3:] == "600"
    return line


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """The silos' files, each operator's key and pinned peers, and the attacker's plan."""
    from vcmc.config import FitConfig, PostprocessConfig, SamplerConfig
    from vcmc.research.simulate import simulate_design

    folder = tmp_path_factory.mktemp("malicious-rounds")
    sim = simulate_design("nested", "easy", rng=3, n_per_silo=N_ROWS)
    sim.schema.to_json(folder / "schema.json")
    for name, data in zip((*SILOS, OUTSIDER), sim.silos, strict=False):
        data.to_frame().to_csv(folder / f"{name}.csv", index=False)
    lines = {name: _keygen(folder, name) for name in SILOS}
    for name in SILOS:      # each operator pins the lines the two others sent
        (folder / f"{name}.peers").write_text("".join(f"{lines[m]}\n" for m in SILOS if m != name))
    config = FitConfig(sampler=SamplerConfig(n_iter=300, burn_in=150, thin=5),
                       postprocess=PostprocessConfig(min_cluster_fraction=0.05)).to_dict()
    plan = {"config": config, "silos": list(SILOS), "outsider": OUTSIDER, "checkpoints": CHECKPOINTS,
            "publics": {name: lines[name].partition("=")[2] for name in SILOS}}
    return folder, plan


def node_config(folder: Path, name: str, variant: str, *, budget: str | None = BUDGET) -> dict:
    """The SuperNode's node config (the same keys and values as the text ``--node-config`` is given)."""
    config = {"data-path": str(folder / f"{name}.csv"), "schema-path": str(folder / "schema.json"),
              "silo-name": name, "out-dir": str(folder / variant / name), "min-cluster-size": MIN_SIZE}
    if name == OUTSIDER:
        return {**config, "allow-strategies": "contingency"}
    config.update({"allow-strategies": "contingency,rounds", "min-peers": 3,
                   "rounds-key": str(folder / f"{name}.key"), "rounds-peers": str(folder / f"{name}.peers")})
    return {**config, "request-budget": budget} if budget else config


def _as_text(config: dict) -> str:
    return " ".join(f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}" for k, v in config.items())


class _WireRun:
    """The in-process Flower run: the ServerApp's identity set as Flower sets it, restored afterwards."""

    def __enter__(self):
        from flwr.supercore.task_identity import TaskIdentity

        self.saved = {k: getattr(TaskIdentity, k, None) for k in ("_run_id", "_node_id", "_task_id")}
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = 1, 0, 1
        return self

    def __exit__(self, *exc):
        from flwr.supercore.task_identity import TaskIdentity

        for k, v in self.saved.items():
            setattr(TaskIdentity, k, v)


def _wire_grid(folder: Path, variant: str, **kwargs):
    from test_flower_boundary import WireGrid

    return WireGrid({100 + i: node_config(folder, name, variant, **kwargs)
                     for i, name in enumerate((*SILOS, OUTSIDER))})


@pytest.fixture(scope="module")
def wire_attacked(federation):
    """Every attack through Flower's wire encoding in this process: (what the server received, the WireGrid
    whose silos' state the test may read)."""
    from vcmc_malicious_rounds.attacks import run_round_attacks

    folder, plan = federation
    plan = {**plan, "out": str(folder / "attacks-flower-wire.json")}
    grid = _wire_grid(folder, "flower-wire")
    with _WireRun():
        yield run_round_attacks(grid, plan, run_key="1"), grid


@pytest.fixture(scope="module", params=["flower-wire", pytest.param("tls-auth", marks=pytest.mark.slow)])
def attacked(request, federation):
    """(what the server received, the WireGrid whose silos' state the test may read, or None). Over real Flower
    the attacks on what the server relays (keys, shares, vectors, rounds) and the honest chain; the requests the
    gate refuses at the door are the same code whatever the transport (``DOOR``, in process only), and each
    message over real Flower is a ClientApp process."""
    folder, plan = federation
    variant = request.param
    if variant == "flower-wire":
        yield request.getfixturevalue("wire_attacked")
        return
    plan = {**plan, "out": str(folder / f"attacks-{variant}.json"), "door": False}
    (folder / "plan.json").write_text(json.dumps(plan))
    lab_dir = folder / "lab"
    lab_dir.mkdir()
    lab = Lab(lab_dir, secure=True)
    t0 = time.monotonic()
    try:
        lab.start_superlink()
        for name in (*SILOS, OUTSIDER):
            key = make_node_key(lab_dir, f"{name}-node-key")
            lab.register(key)
            lab.start_supernode(_as_text(node_config(folder, name, variant)), key=key, log=f"{name}.log")
        # a guard against a hung run, not a timing (about 90 messages, each a fresh ClientApp process)
        status, log = lab.run_app(APP, f'plan="{folder / "plan.json"}"', done_file=Path(plan["out"]), timeout=900)
        assert status == "finished:completed", f"status {status}; server log:\n{log}"
        results = json.loads(Path(plan["out"]).read_text())
    finally:
        lab.close()
    print(f"\nthe malicious rounds' run over real Flower (TLS, SuperNode authentication, {len(SILOS) + 1} "
          f"SuperNodes): {time.monotonic() - t0:.0f} s")
    yield results, None


DOOR = {
    # attack: (the silos that must refuse it, the rule their refusal names)
    # attack: (the silos that must refuse it, the rule their refusal names)
    "plain-round-start": ((A,), "this round start asks for plain ones"),
    "unpinned-participant": ((B,), "participants ['mallory'] have no key pinned by its operator"),
    "too-few-participants": ((C,), "requires at least 3 participants in the rounds (node config 'min-peers')"),
    "strategy-not-allowed": ((OUTSIDER,), "its operator does not allow the 'rounds' or 'secure-rounds' strategy"),
    "n-components-beyond-cap": ((A,), "n_components in [1, 500]"),
    "checkpoints-beyond-sweep-budget": ((B,), "within the run's budget of round sweeps"),
    "anneal-below-1": ((C,), "anneal >= 1"),
    "birth-share-out-of-range": ((A,), "birth_share must be in [0, 0.1]"),
    "start-entry-out-of-range": ((B,), "start must be (3, K) integers in [-1, n_components)"),
    "sweep-before-start": ((C,), "no rounds were started in this run"),
    "finish-before-stop": ((A,), "comes after the pooled chain stopped"),
    "result-before-stop": ((B,), "comes after the pooled chain stopped"),
    "assess-before-stop": ((C,), "comes after the pooled chain stopped"),
    "sweep-after-stop": ((A,), "the pooled chain stopped at round 2; no further sweep is answered"),
    "thin-answer-finish": ((B,), "no component of the pooled chain holds the minimum cluster size (10)"),
    "thin-answer-result": ((C,), "no component of the pooled chain holds the minimum cluster size (10)"),
    "thin-answer-result-2": ((A,), "no component of the pooled chain holds the minimum cluster size (10)"),
    "thin-answer-assess": ((C,), "no component of the pooled chain holds the minimum cluster size (10)"),
}
RELAYED = {
    "server-key-in-a-peers-place": ((A, B), "the share relayed from participant 2 does not decrypt under its "
                                            "pinned key"),
    "split-view": ((A, B, C), "does not decrypt under its pinned key"),
    "vector-dropped": ((A,), "vectors must be (3, L) uint64, one per participant"),
    "round-skipped": ((B,), "answered once each, in order: round 1 is next, not 2"),
    "round-replayed": ((C,), "answered once each, in order: round 1 is next, not 0"),
    "vector-altered": ((A,), "round 1's vector of participant 1 does not verify"),
    "vectors-reordered": ((B,), "round 1's vector of participant 0 does not verify"),
    "vector-replaced": ((C,), "round 1's vector of participant 0 does not verify"),
}


def _uniform_words(vectors) -> np.ndarray:
    """|entries| read as the int64 a count would be: a masked and padded vector's are uniform 64-bit words."""
    return np.abs(np.asarray(vectors, dtype=np.uint64).view(np.int64).astype(np.float64))


def _refused(results, attack, silos, rule):
    assert "abort" not in results, f"a step the attacks needed was not answered: {results['abort']}"
    got = results[attack]
    assert set(silos) <= set(got)
    for silo in silos:
        assert not got[silo]["ok"], f"silo {silo} answered {attack}: {got[silo]}"
        assert rule in got[silo]["reason"], got[silo]["reason"]
        assert set(got[silo]) == {"ok", "reason"}                 # nothing but the refusal's text came back


@pytest.mark.flower
@pytest.mark.parametrize("attack", sorted(RELAYED))
def test_an_attack_on_what_the_server_relays_is_refused(attacked, attack):
    _refused(attacked[0], attack, *RELAYED[attack])


@pytest.mark.flower
@pytest.mark.parametrize("attack", sorted(DOOR))
def test_a_crafted_request_is_refused_at_the_door(wire_attacked, attack):
    _refused(wire_attacked[0], attack, *DOOR[attack])


@pytest.mark.flower
def test_a_forged_share_stops_every_silo_that_needs_it(attacked):
    # the silo whose shares the server replaced decrypts the others' and goes on: its reply is a masked vector,
    # useless to the server (the group secret hashes every share), and its peers refused the round
    results, grid = attacked
    got = results["server-key-in-a-peers-place"][C]
    assert got["ok"] and got["round"] == 0
    assert np.all(_uniform_words(got["vector"]) > 2.0**40)
    if grid is not None:
        # the forgery was exact but for the key: the server computed the context every silo computed
        silo = _silo_state(grid, A)
        assert results["server-context"] == silo.round_session.context


@pytest.mark.flower
def test_a_split_view_fails_at_the_first_relayed_round_for_every_silo(attacked):
    results, _ = attacked
    assert all(results["split-view:start"][s]["ok"] for s in SILOS)      # each took its start ...
    assert all(not results["split-view"][s]["ok"] for s in SILOS)        # ... and none got past round -1


@pytest.mark.flower
def test_the_honest_chain_through_the_malicious_server_completes(attacked):
    results, _ = attacked
    assert "abort" not in results
    rounds = [r["round"] for r in results["relayed"] if r["chain"] == "honest"]
    assert rounds == list(range(-1, CHECKPOINTS + 1))
    assert all(results[f"honest:round {CHECKPOINTS}"][s]["stop"] for s in SILOS)
    assert all(results["honest:finish"][s]["ok"] and results["honest:result"][s]["ok"] for s in SILOS)


@pytest.mark.flower
def test_what_the_server_relayed_carries_no_count(attacked):
    results, _ = attacked
    n_rows = N_ROWS * len(SILOS)
    # every vector of a round (round 0 of a chain without births is empty)
    relayed = [r for r in results["relayed"] if r["round"] >= 0 and len(r["vectors"][0])]
    assert len(relayed) >= CHECKPOINTS + 1
    n_words = 0
    for r in relayed:
        vectors = np.asarray(r["vectors"], dtype=np.uint64)
        # a count is at most the silos' rows; a masked and padded entry is a uniform 64-bit word (one below 2^40
        # has odds 2^-24): essentially none
        assert np.all(_uniform_words(vectors) > 2.0**40), (r["chain"], r["round"])
        # nor their sum over the silos, what a server summing them gets: the pads stay in it (no entry in [0, N])
        total = vectors.sum(axis=0, dtype=np.uint64)
        assert np.all(_uniform_words(total) > max(2.0**40, n_rows)), (r["chain"], r["round"])
        n_words += vectors.size
    assert n_words > 10_000
    # the same data, the same start, another chain: every vector of every round differs
    tamper = {r["round"]: np.asarray(r["vectors"], dtype=np.uint64) for r in results["relayed"]
              if r["chain"] == "tamper"}
    honest = {r["round"]: np.asarray(r["vectors"], dtype=np.uint64) for r in results["relayed"]
              if r["chain"] == "honest"}
    for r in (0, 1):
        assert np.all(tamper[r] != honest[r]), r
    shares = tamper[-1] != 0                               # the shares (a silo sends none to itself)
    assert np.all(tamper[-1][shares] != honest[-1][shares])


@pytest.mark.flower
def test_what_the_answer_discloses_holds_the_minimum(attacked):
    results, grid = attacked
    answers = [results["honest:result"][s] for s in SILOS]
    first = answers[0]
    assert len({json.dumps(a, sort_keys=True) for a in answers}) == 1      # the same answer from every silo
    k = len(first["clusters"])
    assert 1 <= k <= N_ROWS * len(SILOS) // MIN_SIZE
    assert np.asarray(first["pi_draws"]).shape[1] == k and np.asarray(first["profile_draws"]).shape[1] == k
    assert first["log_joint_grid"] > 0                           # the log joints on a deployment's grid
    for s in SILOS:
        counts = np.asarray(results["honest:finish"][s]["counts"])
        assert counts.size == k and not np.any((counts > 0) & (counts < MIN_SIZE)), (s, counts)
    if grid is not None:
        # each of the answer's clusters held the minimum on average over the kept rounds (the silo's own record)
        chain = _silo_state(grid, A).chain
        mean_size = chain.size_sum[chain.chosen()] / chain.n_sized
        assert np.all(mean_size[np.asarray(first["clusters"])] >= MIN_SIZE)


def _silo_state(grid, name: str):
    """The silo as its SuperNode holds it after the run (the test reads the silo's host; no message does)."""
    from vcmc.flower.client import silo_from_node_config

    node = next(n for n, ctx in grid.contexts.items() if ctx.node_config["silo-name"] == name)
    context = grid.contexts[node]
    silo = silo_from_node_config(context.node_config, node, run_id=1)
    silo.restore_state({k: a.numpy() for k, a in context.state["vcmc-silo-state"].items()})
    return silo


@pytest.mark.flower
def test_the_plain_pooled_counts_are_not_the_sum_of_what_was_relayed(wire_attacked):
    # in process (the silos' secrets are on their hosts): the pooled counts of the honest chain's last round,
    # which the silos computed from the secrets that never left them; the server's sum of the same vectors is noise
    results, grid = wire_attacked
    from vcmc.silo import secure_sum

    session = _silo_state(grid, A).round_session
    last = [r for r in results["relayed"] if r["chain"] == "honest"][-1]
    vectors = np.asarray(last["vectors"], dtype=np.uint64)
    group, context = bytes.fromhex(session.group), bytes.fromhex(session.context)
    pads = sum(secure_sum.pad(group, context, last["round"], i, vectors.shape[1]) for i in range(len(SILOS)))
    pooled = (vectors.sum(axis=0, dtype=np.uint64) - pads).view(np.int64)
    n_components = int(session.plan["n_components"])
    assert np.all(pooled >= 0) and pooled[:n_components].sum() == N_ROWS * len(SILOS)    # a table of the rows
    relayed_sum = vectors.sum(axis=0, dtype=np.uint64).view(np.int64)
    assert not np.any(relayed_sum == pooled) and np.all(_uniform_words(relayed_sum) > 2.0**40)


@pytest.mark.flower
def test_the_default_budget_allows_one_start(federation):
    # the operators' default: one round start per run, so a chain the server broke cannot be started again
    from vcmc_malicious_rounds.attacks import honest_start

    from vcmc.config import config_from_mapping
    from vcmc.exceptions import SiloFailure
    from vcmc.flower.server import FlowerTransport, discover_silos
    from vcmc.protocol import SiloConfig, SummarizeRequest
    from vcmc.protocol.rounds import RoundStartRequest

    folder, plan = federation
    grid = _wire_grid(folder, "default-budget", budget=None)
    with _WireRun():
        names, _ = discover_silos(grid, grid.get_node_ids())
        tr = FlowerTransport(grid, {n: names[n] for n in SILOS})
        config = config_from_mapping(plan["config"])
        summaries = tr.call(dict.fromkeys(SILOS, SummarizeRequest(config=SiloConfig.from_fit_config(config),
                                                                  n_silos=3, seed_entropy=5, spawn_key=(0,))))
        k_local = {n: len(summaries[n].cluster_sizes) for n in SILOS}
        start = RoundStartRequest(**honest_start(list(SILOS), k_local, summaries[A].n_modalities, config, 4))
        first = tr.call(dict.fromkeys(SILOS, start))
        again = tr.call(dict.fromkeys(SILOS, start))
    assert not any(isinstance(r, SiloFailure) for r in first.values())
    for s in SILOS:
        assert isinstance(again[s], SiloFailure) and "budget of round_start requests (1) is spent" in again[s].reason
