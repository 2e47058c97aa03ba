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
from vcmc.protocol import HelloReply, SiloConfig, SummarizeRequest  # noqa: E402

APP_DIR = Path(__file__).resolve().parents[2] / "flower_app"
sys.path.insert(0, str(Path(__file__).parent))
from flowerlab import Lab, make_node_key, write_silos  # noqa: E402


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
    req = SummarizeRequest(config=SiloConfig.from_fit_config(FitConfig()), n_silos=3, seed_entropy=2**100 + 7,
                           spawn_key=(0, 2))
    back = decode_record(encode_record(req))
    assert back == req
    hello = HelloReply(silo="A", schema_fingerprint="f" * 16, n_modalities=(2, 3), vcmc_version="0.1")
    assert decode_record(encode_record(hello)) == hello


def test_records_carry_the_assessment_messages():
    from vcmc.protocol import AssessReply, AssessRequest, registry

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
    # the deployed ClientApp has a handler for every request's action (registered from the registry)
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "flower_app" / "vcmc_flower" / "client_app.py"
    spec = importlib.util.spec_from_file_location("deployed_client_app", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.app._registered_funcs) == {f"query.{a}" for a in registry.actions()}


def test_node_config_out_dir_must_be_absolute_and_receives_the_silos_files(tmp_path):
    from vcmc.exceptions import ConfigError
    from vcmc.flower.client import silo_from_node_config
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
    silo.write_labels()
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


# over TLS with authenticated SuperNodes only, as operators deploy: plain-text transport carries the same records
# and is exercised end to end by the LCA's real-Flower run (tests/flower/test_lca_flower.py) and the catalogue's
# lab; repeating this run in plain text cost CI about 70 s for no other code path
@pytest.fixture(params=["tls-auth"])
def federation(request, tmp_path):
    from vcmc.research.simulate import simulate_design

    secure = request.param == "tls-auth"
    sim = simulate_design("nested", "easy", rng=8, n_per_silo=150)
    schema_path, csvs = write_silos(sim, tmp_path, N_SILOS)
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
    run_config = " ".join([f'out-dir="{out_dir}"', f'schema-path="{schema_path}"', f"seed={SEED}",
                           f"min-nodes={N_SILOS}", "wait-nodes=90",
                           "round-timeout=300", *(f"{k}={v}" for k, v in OVERRIDES.items())])
    status, server_log = lab.run_app(APP_DIR, run_config, done_file=out_dir / "result.json", timeout=170)
    assert status == "finished:completed", f"status {status}; server log:\n{server_log}"

    flower = json.loads((out_dir / "result.json").read_text())
    # the operators' view: vcmc's progress reaches `flwr log` (Flower streams the ServerApp's output)
    streamed = lab.flwr("log", str(lab.last_run_id), "t", "--show", timeout=60).stdout
    for name, _ in csvs:
        assert f"summarize: silo '{name}' replied in" in streamed, streamed[-3000:]
    assert f"results written to {out_dir}" in streamed
    assert f"summarize: {N_SILOS} of {N_SILOS} silos replied" in (out_dir / "server.log").read_text()
    assert (out_dir / "schema.json").is_file()

    # the same run in this process, from the same files, seed and options
    from vcmc.data import read_csv
    from vcmc.federation.faults import load_summaries
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import run_vcmc

    # the default rounds (auto) of a deployment whose operators set no rounds keys are the one-shot pass, and
    # the result says why
    plan = flower["diagnostics"]["rounds_plan"]
    assert plan["requested"] == "auto" and plan["rounds"] == 1 and "rounds-key" in plan["reason"]
    cfg = config_from_mapping({**OVERRIDES, "aggregation.rounds": 1})
    from vcmc.flower.preview import deployment_silos, parse_silo_policy

    # the silos as the SuperNodes' node configs build them (a deployment's release rules: vcmc fit --silo-policy)
    silos = deployment_silos([read_csv(p, schema=str(schema_path), name=n) for n, p in sorted(csvs)],
                             parse_silo_policy({"min-cluster-size": 5}))
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


# ------------------------------------------------------------------------------------------------------
# Operations: progress in the log, dropped sites, node state, the schema in the results, the silo order


@pytest.fixture
def task_identity(monkeypatch):
    """The identity Flower gives a ServerApp process (needed to build Flower messages outside one)."""
    from flwr.supercore.task_identity import TaskIdentity

    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)


class LoopbackGrid:
    """A ``Grid`` with Flower's push/pull interface whose SuperNodes are the ClientApp handler in this
    process (each with its own ``Context``, so node state persists between messages as on a SuperNode).

    ``dead = {node id: message type}``: from that message on, the node is gone and the reply is the error
    the SuperLink itself sends for a node whose heartbeats stopped (Flower's own
    ``create_message_error_unavailable_res_message``, from the SuperLink's node id). Replies become
    available on the second pull, so the transport has to poll."""

    def __init__(self, node_configs: dict[int, dict], dead: dict[int, str] | None = None,
                 silent: set[int] | None = None):
        from flwr.app import Context, RecordDict

        self.contexts = {n: Context(run_id=1, node_id=n, node_config=c, state=RecordDict(), run_config={})
                         for n, c in node_configs.items()}
        self.dead = dict(dead or {})
        self.silent = set(silent or ())      # connected, never answering (a stuck ClientApp)
        self._gone: set[int] = set()
        self._replies: dict[str, tuple[int, object]] = {}
        self._count = 0

    def get_node_ids(self):
        return list(self.contexts)

    def push_messages(self, messages):
        from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message

        from vcmc.flower.client import client_handle

        ids = []
        for m in messages:
            self._count += 1
            m.metadata.__dict__["_message_id"] = f"msg-{self._count}"
            node = int(m.metadata.dst_node_id)
            if self.dead.get(node) == m.metadata.message_type:
                self._gone.add(node)
            ids.append(m.metadata.message_id)
            if node in self.silent:
                continue
            reply = (create_message_error_unavailable_res_message(m.metadata, "node_unavail") if node in self._gone
                     else client_handle(m, self.contexts[node]))
            self._replies[m.metadata.message_id] = (0, reply)
        return ids

    def pull_messages(self, message_ids):
        out = []
        for mid in message_ids:
            if mid in self._replies:
                polls, reply = self._replies[mid]
                if polls >= 1:
                    out.append(reply)
                    del self._replies[mid]
                else:
                    self._replies[mid] = (polls + 1, reply)
        return out


def _labelled_silos(folder: Path, n_silos: int = 4, n_rows: int = 120, rng: int = 8):
    """Simulated silos written with named variables and text modalities, and their shared schema."""
    from vcmc.data import infer_schema
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("nested", "easy", rng=rng, n_per_silo=n_rows)
    frames = {}
    for d in sim.silos[:n_silos]:
        f = d.to_frame()
        f.columns = [f"item_{c.lower()}" for c in f.columns]
        frames[d.name] = f.apply(lambda col: col.map(lambda v: f"level_{v}"))
    schema = infer_schema(list(frames.values()))
    folder.mkdir(parents=True, exist_ok=True)
    schema.to_json(folder / "schema.json")
    paths = {}
    for name, f in frames.items():
        paths[name] = folder / f"{name}.csv"
        f.to_csv(paths[name], index=False)
    return paths, folder / "schema.json", schema


def _server_context(run_config: dict):
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config)


FAST = {"sampler.n-iter": 400, "sampler.burn-in": 200, "aggregation.max-iter": 20, "aggregation.n-starts": 20,
        "privacy.min-cluster-size": 5}


def test_silo_order_is_canonical_whatever_the_order_given():
    from vcmc.federation.order import canonical_order

    assert canonical_order(["silo_10", "silo_2", "silo_1", "site_b", "site_a"]) == \
        ["silo_1", "silo_2", "silo_10", "site_a", "site_b"]
    assert canonical_order(["s01", "s1", "s001"]) == ["s001", "s01", "s1"]     # total: ties by the text


@pytest.mark.slow
def test_vcmc_fit_result_does_not_depend_on_the_order_of_the_silos():
    from vcmc.api import fit
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("nested", "easy", rng=4, n_per_silo=80)
    silos = list(sim.silos[:3])
    cfg = config_from_mapping({**FAST, "assessment.enabled": False})
    given = fit(silos, config=cfg, rng=3)
    shuffled = fit(silos[::-1], config=cfg, rng=3)
    assert given.silos == shuffled.silos == ("silo_1", "silo_2", "silo_3")
    np.testing.assert_array_equal(given.weights, shuffled.weights)
    for a, b in zip(given.assignments, shuffled.assignments, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_dead_node_is_named_with_the_superlinks_error_and_the_time(tmp_path, task_identity):
    """The SuperLink's own error reply for a node that stopped sending heartbeats comes from the SuperLink's
    node id: it is matched to its silo by message id at once, not reported as a timeout at the round's end."""
    from vcmc.flower.server import FlowerTransport
    from vcmc.protocol import HelloRequest

    paths, schema, _ = _labelled_silos(tmp_path, n_silos=3, n_rows=40)
    configs = {10 + i: {"data-path": str(p), "schema-path": str(schema), "silo-name": n}
               for i, (n, p) in enumerate(paths.items())}
    grid = LoopbackGrid(configs, dead={11: "query.hello"})
    tr = FlowerTransport(grid, {"silo_1": 10, "silo_2": 11, "silo_3": 12}, default_timeout=600)
    t0 = time.monotonic()
    out = tr.call({n: HelloRequest() for n in tr.silos})
    assert time.monotonic() - t0 < 30                       # the round did not wait out its 600 s
    assert isinstance(out["silo_1"], HelloReply) and isinstance(out["silo_3"], HelloReply)
    reason = out["silo_2"].reason
    assert "SuperNode 11 became unavailable during hello_request" in reason
    assert "failed to report a heartbeat" in reason and "NODE_UNAVAILABLE" in reason
    assert "s after the request was sent" in reason and "within" not in reason.split("(")[0]


def test_a_connected_silent_node_is_reported_at_the_round_timeout(tmp_path, task_identity):
    from vcmc.flower.server import FlowerTransport
    from vcmc.protocol import HelloRequest

    paths, schema, _ = _labelled_silos(tmp_path, n_silos=2, n_rows=40)
    configs = {10 + i: {"data-path": str(p), "schema-path": str(schema), "silo-name": n}
               for i, (n, p) in enumerate(paths.items())}
    tr = FlowerTransport(LoopbackGrid(configs, silent={11}), {"silo_1": 10, "silo_2": 11}, default_timeout=3)
    out = tr.call({n: HelloRequest() for n in tr.silos})
    assert isinstance(out["silo_1"], HelloReply)
    assert "no reply to hello_request within the round timeout of 3 s (node 11)" in out["silo_2"].reason
    assert "did not report the node as unavailable" in out["silo_2"].reason


def test_silo_data_are_read_once_per_run_and_kept_in_the_node_state(tmp_path, task_identity, monkeypatch):
    from flwr.app import Array, ArrayRecord, Context, Message, RecordDict

    import vcmc.flower.client as client
    from vcmc.flower.node_data import DATA_KEY
    from vcmc.flower.records import encode_record
    from vcmc.protocol import HelloRequest

    paths, schema, sch = _labelled_silos(tmp_path, n_silos=1, n_rows=40)
    csv = paths["silo_1"]
    context = Context(run_id=1, node_id=3, state=RecordDict(), run_config={},
                      node_config={"data-path": str(csv), "schema-path": str(schema), "silo-name": "silo_1"})
    reads = []
    real_read = client.read_node_data
    monkeypatch.setattr(client, "read_node_data", lambda *a, **k: reads.append(1) or real_read(*a, **k))

    def hello():
        return client.client_handle(Message(encode_record(HelloRequest()), dst_node_id=3,
                                            message_type="query.hello"), context)

    first = decode_record(hello().content)
    assert context.state[DATA_KEY]["codes"].numpy().shape == (40, len(sch.names))
    for _ in range(3):
        assert decode_record(hello().content) == first
    assert len(reads) == 1                          # one reading of the file for the run's four messages
    # replaced before the run has silo state (only hellos so far): read again, as it is now
    frame = pd.read_csv(csv)
    frame.iloc[:20].to_csv(csv, index=False)
    again = hello()
    assert not again.has_error(), again.error.reason
    assert decode_record(again.content) == first and len(reads) == 2
    assert context.state[DATA_KEY]["codes"].numpy().shape == (20, len(sch.names))
    # replaced after the summary was computed from it: refused, not silently answered from other rows
    context.state["vcmc-silo-state"] = ArrayRecord({"local.partition": Array(np.zeros(20, dtype=np.int64))})
    frame.to_csv(csv, index=False)
    reply = hello()
    assert reply.has_error() and "DataError" in reply.error.reason and len(reads) == 2


def test_a_hello_imports_no_plotting_or_diagnostics_library(tmp_path):
    """Flower starts a ClientApp process per message: a message that needs no ArviZ, matplotlib,
    scipy.stats or numba must not pay for importing them."""
    import subprocess

    paths, schema, _ = _labelled_silos(tmp_path, n_silos=1, n_rows=40)
    code = f"""
import sys
from flwr.supercore.task_identity import TaskIdentity
TaskIdentity._run_id = 1; TaskIdentity._node_id = 3; TaskIdentity._task_id = 1
from flwr.app import Context, Message, RecordDict
from vcmc.flower.client import client_handle
from vcmc.flower.records import encode_record
from vcmc.protocol import HelloRequest
ctx = Context(run_id=1, node_id=3, state=RecordDict(), run_config={{}},
              node_config={{"data-path": {str(paths['silo_1'])!r}, "schema-path": {str(schema)!r}}})
reply = client_handle(Message(encode_record(HelloRequest()), dst_node_id=3, message_type="query.hello"), ctx)
assert not reply.has_error(), reply.error.reason
print(sorted(m for m in ("arviz", "matplotlib", "scipy.stats", "numba", "xarray") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_a_message_answered_from_the_node_state_imports_no_pandas(tmp_path):
    """After the run's first message the silo's codes are in the node state: a later message (here a second
    hello, in a new process with the Context as Flower serialises it between processes) parses no file and
    must not pay for pandas (and pyarrow)."""
    import subprocess

    paths, schema, _ = _labelled_silos(tmp_path, n_silos=1, n_rows=40)
    setup = f"""
import sys
from flwr.supercore.task_identity import TaskIdentity
TaskIdentity._run_id = 1; TaskIdentity._node_id = 3; TaskIdentity._task_id = 1
from flwr.app import Context, Message, RecordDict
from flwr.common.serde import context_from_proto, context_to_proto
from flwr.proto.message_pb2 import Context as ContextProto
from vcmc.flower.client import client_handle
from vcmc.flower.records import encode_record
from vcmc.protocol import HelloRequest
state = {str(tmp_path / "context.bin")!r}
def hello(ctx):
    reply = client_handle(Message(encode_record(HelloRequest()), dst_node_id=3, message_type="query.hello"), ctx)
    assert not reply.has_error(), reply.error.reason
"""
    first = setup + f"""
ctx = Context(run_id=1, node_id=3, state=RecordDict(), run_config={{}},
              node_config={{"data-path": {str(paths['silo_1'])!r}, "schema-path": {str(schema)!r}}})
hello(ctx)
assert "pandas" in sys.modules        # the first message reads the file
open(state, "wb").write(context_to_proto(ctx).SerializeToString())
"""
    later = setup + """
hello(context_from_proto(ContextProto.FromString(open(state, "rb").read())))
print(sorted(m for m in ("pandas", "pyarrow", "arviz", "matplotlib", "numba", "xarray") if m in sys.modules))
"""
    for code in (first, later):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.filterwarnings("default::UserWarning")     # a dropped silo's warning, logged as the ServerApp does
def test_serverapp_results_name_the_schema_and_serve_report_and_predict_like_vcmc_fit(tmp_path, task_identity):
    """The ServerApp (run-config schema-path) writes schema.json and named profiles; ``vcmc report`` and
    ``vcmc predict`` work on its folder as on ``vcmc fit``'s, with the same predictions; its progress,
    warnings and the result paths are in server.log; a silo that dies is dropped with the SuperLink's
    reason (min-silos)."""
    from vcmc.cli import main
    from vcmc.flower.server import server_main

    paths, schema, sch = _labelled_silos(tmp_path / "data")
    configs = {20 + i: {"data-path": str(p), "schema-path": str(schema), "silo-name": n}
               for i, (n, p) in enumerate(paths.items())}
    out = tmp_path / "flower"
    run_config = {"out-dir": str(out), "schema-path": str(schema), "min-nodes": 4, "seed": 5, **FAST}
    server_main(LoopbackGrid(configs), _server_context(run_config))
    fit_dir = tmp_path / "fit"
    sets = [x for k, v in FAST.items() for x in ("--set", f"{k}={v}")]
    # --rounds 1: what the default (auto) is in a deployment, whose operators have not allowed the rounds
    assert main(["fit", *map(str, paths.values()), "--schema", str(schema), "--out", str(fit_dir), "--seed", "5",
                 "--rounds", "1", *sets]) == 0

    assert json.loads((out / "schema.json").read_text()) == json.loads((fit_dir / "schema.json").read_text())
    prof = pd.read_csv(out / "profiles.csv")
    assert set(prof.variable) == set(sch.names) and set(prof.modality) <= {f"level_{k}" for k in range(1, 9)}
    pd.testing.assert_frame_equal(prof, pd.read_csv(fit_dir / "profiles.csv"))
    for folder in (out, fit_dir):
        assert main(["report", str(folder)]) == 0
        assert (folder / "report.html").is_file()
        assert main(["predict", str(folder), str(paths["silo_2"]), "--out", str(folder / "pred")]) == 0
    np.testing.assert_allclose(pd.read_csv(out / "pred" / "memberships.csv").filter(like="p_").to_numpy(),
                               pd.read_csv(fit_dir / "pred" / "memberships.csv").filter(like="p_").to_numpy(),
                               rtol=1e-12)

    log = (out / "server.log").read_text()
    for silo in paths:
        assert f"summarize: silo '{silo}' replied in" in log
    assert "summarize: 4 of 4 silos replied in" in log and "assess: 4 of 4 silos replied" in log
    assert f"results written to {out}" in log
    for w in json.loads((out / "result.json").read_text())["diagnostics"]["warnings"]:
        assert f"warning: {w}" in log

    # silo_3's node dies during summarize: dropped with the SuperLink's reason, the run goes on
    dropped = tmp_path / "dropped"
    server_main(LoopbackGrid(configs, dead={22: "query.summarize"}),
                _server_context({**run_config, "out-dir": str(dropped), "min-silos": 3}))
    result = json.loads((dropped / "result.json").read_text())
    assert result["silos"] == ["silo_1", "silo_2", "silo_4"]
    log = (dropped / "server.log").read_text()
    assert "summarize: silo 'silo_3' failed after" in log and "NODE_UNAVAILABLE" in log
    assert "SiloDroppedWarning: silo 'silo_3' dropped at stage 'summarize'" in log      # as it happened
    assert any("silo_3" in w and "became unavailable" in w for w in result["diagnostics"]["warnings"])


def test_a_run_config_schema_that_is_not_the_silos_is_refused_before_sampling(tmp_path, task_identity):
    from vcmc.exceptions import ConfigError
    from vcmc.flower.server import server_main

    paths, schema, sch = _labelled_silos(tmp_path / "data", n_silos=2, n_rows=40)
    other = tmp_path / "other.json"
    from vcmc.data import infer_schema

    infer_schema([pd.read_csv(paths["silo_1"]).iloc[:, :3]]).to_json(other)
    configs = {20 + i: {"data-path": str(p), "schema-path": str(schema), "silo-name": n}
               for i, (n, p) in enumerate(paths.items())}
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="the silos do not all use its coding|is not the schema silos 'silo_1'"):
        server_main(LoopbackGrid(configs), _server_context({"out-dir": str(out), "schema-path": str(other),
                                                             "min-nodes": 2, **FAST}))
    assert not (out / "summaries").exists()
    assert "run failed: ConfigError" in (out / "server.log").read_text()


@pytest.mark.slow
def test_estimator_labels_follow_the_order_of_x_though_the_result_is_in_canonical_order():
    import dataclasses

    from vcmc.estimator import FederatedLatentClassModel
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("nested", "easy", rng=4, n_per_silo=80)
    silos = [dataclasses.replace(sim.silos[0], name="site_b"), dataclasses.replace(sim.silos[1], name="site_a")]
    est = FederatedLatentClassModel(n_iter=400, burn_in=200, random_state=3).fit(silos)
    assert est.result_.silos == ("site_a", "site_b")
    keep = est.result_.cluster_sizes > 0
    index = np.cumsum(keep) - 1
    np.testing.assert_array_equal(est.labels_[:80], index[est.result_.assignments[1]])    # site_b, given first
    np.testing.assert_array_equal(est.labels_[80:], index[est.result_.assignments[0]])
