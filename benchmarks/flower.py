"""A Flower deployment of N sites on one host (loopback only), against ``vcmc fit`` on the same files.

For each ``--sites N``: N simulated silo files (the paper's nested design's silo weights repeated, easy
separability, ``--rows`` rows each) and their shared schema; a SuperLink (plain text, 127.0.0.1) and N
SuperNodes, each with its silo file in its node config, started with the operators' command ``vcmc supernode``
and a launch cap of ``--max-clientapps`` ClientApps alive at once over the host (default: the host's cores;
``--flower-superexec``: ``flower-supernode`` with Flower's own SuperExec and no cap, the deployment before the
cap); ``flwr run`` of ``flower_app/`` with the seed and options given (``--rounds R``: R global-informed
rounds, for which every site gets its rounds' key from ``vcmc keygen`` and pins the others', node config
``rounds-key`` and ``rounds-peers``, with ``reproducible-rounds = true``); then ``vcmc fit`` on the same files
with the same seed and the same *effective* options, ``--rounds R --silo-policy FILE`` (R = 1: the one-shot
pass) whose FILE holds the sites' node-config keys other than their paths (``site_limits``), in one process.
``--busy K`` runs K CPU-bound processes beside the whole invocation (a host doing other work). ``--continuous G``
adds G measurements (Gaussian items, in the data's units) to every site's file. Reported:

- wall time of the Flower run (submission to result.json) and of ``vcmc fit``, and per stage: the
  ServerApp's ``server.log`` (each round: hello, summarize, assign, assess ...: "N of N silos replied in
  T s") and result.json's server-side timings (matching, aggregation, rounds: seconds per round);
- peak memory per process kind (SuperLink, SuperNode, SuperExec, ClientApp, ServerApp), sampled from
  /proc every ``--sample`` seconds: the largest peak RSS (VmHWM) of one process of the kind, and the
  largest PSS summed over the kind's live processes at one instant (shared pages counted once), with
  the number of processes of each kind seen and the most alive at once (ClientApp: one launch per
  message, Flower's design);
- whether the Flower result equals ``vcmc fit``'s (silos, weights, cluster sizes, WAIC, and every silo's
  assignments.csv and memberships.csv, which the deployment writes on the silo's side);
- CPU seconds per process kind, and ClientApp launches against the messages sent to silos (a launch more
  than the messages is a ClientApp Flower restarted after its task token expired: ``401 Unauthorized``
  in the SuperNodes' logs, docs/federation.md §3.6);
- once per invocation, each message of a 2-silo run with rounds answered again in a fresh process as the
  SuperExec runs it (``clientapp_cost``: seconds to load the ClientApp, seconds to answer, peak RSS, the
  heavy libraries it imported, the size of the node state it carries), and the CPU seconds a ClientApp
  process spends importing Flower with ``flwr-clientapp`` against vcmc's launcher, in
  ``OUT/clientapp-cost.json``.

``--round-cost N`` instead measures the rounds in a deployment of N sites: ``--repeats`` runs of ``--rounds
R`` for each ClientApp launcher (Flower's ``flwr-clientapp``, vcmc's, vcmc's forked from a warm process; then
the last under vcmc's SuperNode launcher: ``LAUNCHERS``), in turn, and the median seconds
per round, ClientApp CPU seconds per message and launches (``OUT/round-cost.json``).
``--superexec-poll-interval S`` sets the SuperExecs' poll interval; ``--idle SECONDS`` instead measures
the CPU that 8 idle SuperNodes and SuperExecs use with Flower's default interval and with ``S``
(``OUT/idle-cpu.json``).

Writes ``OUT/flower-<N>.json`` (``flower-<N>-rounds<R>.json``) per deployment and ``OUT/README.md`` (a table
of every ``flower-*.json`` in OUT), each with the command and the commit. A deployment is stopped if the
host's available memory falls under ``--min-available-mb``.

    python benchmarks/flower.py --sites 8 30 --iterations 2000 --rows 300 --busy 2          # one-shot, busy host
    python benchmarks/flower.py --sites 8 --iterations 2000 --rows 300 --rounds 21 --busy 2 # rounds at 8 sites
    python benchmarks/flower.py --round-cost 4 --rounds 16 --repeats 3                      # per round, launchers
    python benchmarks/flower.py --idle 60 --superexec-poll-interval 5                       # idle CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from _provenance import commit

from vcmc.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "federation"))
from flowerlab import Lab, is_clientapp, is_warm_clientapp, processes_with  # noqa: E402 - the test suite's lab

KINDS = (("flower-superlink", "SuperLink"), ("flower-supernode", "SuperNode"), ("flower-superexec", "SuperExec"),
         ("vcmc superexec", "SuperExec"), ("flwr-clientapp", "ClientApp"), ("vcmc.flower.clientapp_main", "ClientApp"),
         ("flwr-serverapp", "ServerApp"), ("multiprocessing.forkserver", "Warm process"),
         ("vcmc.flower.supernode_main", "SuperNode"))
KIND_NAMES = tuple(dict.fromkeys(k for _, k in KINDS))


def _kind(cmdline: str) -> str | None:
    for marker, kind in KINDS:
        if marker in cmdline:
            return kind
    return None


def _proc_memory(pid: int) -> tuple[int, int, int]:
    """(peak RSS, current RSS, PSS) of a process in kB; zeros when it is gone."""
    hwm = rss = pss = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    return hwm, rss, pss


class MemorySampler(threading.Thread):
    """Samples every process whose environment holds ``marker`` (the deployment's FLWR_HOME)."""

    def __init__(self, marker: str, every: float, min_available_mb: float = 0.0, on_low_memory=None):
        super().__init__(daemon=True)
        self.min_available_mb = min_available_mb
        self.on_low_memory = on_low_memory
        self.low_memory = False
        self.marker = marker.encode()
        self.every = every
        self.stop = threading.Event()
        self.kinds: dict[str, dict] = {k: {"processes": set(), "peak_rss_mb": 0.0, "peak_pss_sum_mb": 0.0,
                                           "peak_alive": 0} for k in KIND_NAMES}
        self.cpu_ticks: dict[int, tuple[str, int]] = {}     # pid -> (kind, user + system clock ticks seen)
        self.peak_total_pss_mb = 0.0
        self.peak_live = 0

    def run(self) -> None:
        while not self.stop.is_set():
            pss_sum = dict.fromkeys(self.kinds, 0)
            alive = dict.fromkeys(self.kinds, 0)
            live = 0
            for p in Path("/proc").iterdir():
                if not p.name.isdigit():
                    continue
                try:
                    if self.marker not in (p / "environ").read_bytes():
                        continue
                    cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                kind = "ClientApp" if is_warm_clientapp(int(p.name)) else _kind(cmd)
                if kind is None or (kind == "ClientApp" and not is_clientapp(int(p.name))):
                    continue      # (a fork of a ClientApp before it runs its own program is not another one)
                hwm, _, pss = _proc_memory(int(p.name))
                if not hwm:
                    continue
                live += 1
                self.cpu_ticks[int(p.name)] = (kind, max(_cpu_ticks(int(p.name)),
                                                         self.cpu_ticks.get(int(p.name), ("", 0))[1]))
                k = self.kinds[kind]
                k["processes"].add(int(p.name))
                k["peak_rss_mb"] = max(k["peak_rss_mb"], hwm / 1024)
                pss_sum[kind] += pss
                alive[kind] += 1
            for kind, total in pss_sum.items():
                self.kinds[kind]["peak_pss_sum_mb"] = max(self.kinds[kind]["peak_pss_sum_mb"], total / 1024)
                self.kinds[kind]["peak_alive"] = max(self.kinds[kind]["peak_alive"], alive[kind])
            self.peak_total_pss_mb = max(self.peak_total_pss_mb, sum(pss_sum.values()) / 1024)
            self.peak_live = max(self.peak_live, live)
            if self.min_available_mb and _available_mb() < self.min_available_mb and not self.low_memory:
                # a shared machine without swap: stop this deployment before the kernel kills someone's work
                self.low_memory = True
                if self.on_low_memory is not None:
                    self.on_low_memory()
            self.stop.wait(self.every)

    def summary(self) -> dict:
        tick = os.sysconf("SC_CLK_TCK")
        cpu = {k: sum(t for kind, t in self.cpu_ticks.values() if kind == k) / tick for k in self.kinds}
        return {"per_kind": {k: {"processes_seen": len(v["processes"]), "peak_alive": v["peak_alive"],
                                 "peak_rss_mb": round(v["peak_rss_mb"], 1),
                                 "peak_pss_sum_mb": round(v["peak_pss_sum_mb"], 1), "cpu_s": round(cpu[k], 1)}
                             for k, v in self.kinds.items()},
                "peak_total_pss_mb": round(self.peak_total_pss_mb, 1), "peak_live_processes": self.peak_live}


def _cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process in clock ticks (0 when it is gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])
    return 0


def _available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def make_files(folder: Path, n_sites: int, rows: int, seed: int, continuous: int = 0) -> tuple[list[Path], Path]:
    from vcmc.research.simulate import design_weights, simulate

    w = design_weights("nested")
    if continuous:
        return make_mixed_files(folder, w[np.arange(n_sites) % w.shape[0]], rows, seed, continuous)
    sim = simulate(n_per_silo=rows, weights=w[np.arange(n_sites) % w.shape[0]], n_modalities=[2] * 4 + [3] * 6,
                   concentration=0.3, rng=seed)
    schema = folder / "schema.json"
    sim.schema.to_json(schema)
    files = []
    for d in sim.silos:
        files.append(folder / f"{d.name}.csv")
        d.to_frame().to_csv(files[-1], index=False)
    return files, schema


def make_mixed_files(folder: Path, weights: np.ndarray, rows: int, seed: int, g: int) -> tuple[list[Path], Path]:
    """Silo files with ``g`` measurements (mmHg-like: location 120, scale 15) beside ten categorical items, the
    clusters' means spread over +-1.5 standardised units, 3% of values missing."""
    import dataclasses

    from vcmc.data.schema import ContinuousVariable, Schema
    from vcmc.research.simulate_mixed import simulate_mixed

    k = weights.shape[1]
    rng = np.random.default_rng(seed)
    means, sds = rng.uniform(-1.5, 1.5, size=(k, g)), rng.uniform(0.4, 0.8, size=(k, g))
    silos, _ = simulate_mixed([rows] * weights.shape[0], weights, means, sds, n_modalities=[2] * 4 + [3] * 6,
                              concentration=0.3, missing=0.03, rng=rng)
    schema = Schema(silos[0].schema.variables, continuous=tuple(
        ContinuousVariable(f"X{j + 1}", 120.0, 15.0, "mmHg") for j in range(g)))
    path = folder / "schema.json"
    schema.to_json(path)
    files = []
    for d in silos:
        files.append(folder / f"{d.name}.csv")
        dataclasses.replace(d, schema=schema, values=120.0 + 15.0 * d.values).to_frame().to_csv(files[-1], index=False)
    return files, path


_ROUND = re.compile(r"vcmc INFO: (?P<stage>[a-z_ ]+?(?: round \d+)?): (?P<ok>\d+) of (?P<n>\d+) silos replied in "
                    r"(?P<s>[\d.]+) s \((?P<bytes>[^)]+) received\)")


def stages_from_log(text: str) -> list[dict]:
    return [{"stage": m["stage"], "silos": int(m["n"]), "replied": int(m["ok"]), "seconds": float(m["s"]),
             "received": m["bytes"]} for m in _ROUND.finditer(text)]


def site_limits(options: dict, rounds: int) -> dict:
    """The sites' node-config keys other than their paths and rounds' keys (each SuperNode's, and the
    ``--silo-policy`` file of ``vcmc fit``): the run's minimum cluster size and, for rounds, their streams from the
    run's seed (``reproducible-rounds``, so that the two answers can be compared to the bit)."""
    limits: dict = {"min-cluster-size": options["privacy.min-cluster-size"]}
    if rounds > 1:
        limits["reproducible-rounds"] = True
    return limits


def _toml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else json.dumps(value)


def node_config_text(node: dict) -> str:
    """A node config as ``flower-supernode --node-config`` takes it (TOML values, strings double-quoted)."""
    return " ".join(f"{k}={_toml(v)}" for k, v in node.items())


def rounds_keys(folder: Path, names: list[str]) -> dict[str, dict[str, str]]:
    """Every site's rounds' key (``vcmc keygen``, as its operator runs it) and a file of the other sites' public
    lines (the ones their operators sent): ``{name: {"rounds-key": path, "rounds-peers": path}}``."""
    publics = {}
    for name in names:
        done = subprocess.run([str(Path(sys.executable).parent / "vcmc"), "keygen", str(folder / f"{name}.rounds.key"),
                               "--silo-name", name], capture_output=True, text=True, check=True)
        publics[name] = done.stdout.strip()
    out = {}
    for name in names:
        peers = folder / f"{name}.peers"
        peers.write_text("".join(f"{line}\n" for n, line in publics.items() if n != name))
        out[name] = {"rounds-key": str(folder / f"{name}.rounds.key"), "rounds-peers": str(peers)}
    return out


def run_flower(tmp: Path, files: list[Path], schema: Path, options: dict, seed: int, sample: float,
               timeout: float, min_available_mb: float = 0.0, superexec_poll_interval: float | None = None,
               run_options: dict | None = None, max_clientapps: int | None = None, light_clientapp: bool = True,
               rounds: int = 1, warm_clientapps: bool = True, flower_supernode: bool = False) -> dict:
    """A deployment of one site per file on loopback and one run of it; ``max_clientapps`` None: the sites
    started with ``flower-supernode`` (Flower's SuperExec, no cap), else with ``vcmc supernode`` (its ClientApps
    forked from a warm process unless ``warm_clientapps`` is False, through vcmc's SuperNode launcher unless
    ``flower_supernode``)."""
    lab = Lab(tmp, max_clientapps=max_clientapps, light_clientapp=light_clientapp, warm_clientapps=warm_clientapps,
              flower_supernode=flower_supernode)
    if superexec_poll_interval is not None:
        # Flower's own setting (flwr 1.42, flwr.supercore.superexec.run_superexec): how often each SuperExec
        # asks its SuperNode for a task to launch (default 1 s); inherited by the SuperExec that each
        # SuperNode starts with --isolation subprocess, and read by vcmc superexec
        lab.env["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] = f"{superexec_poll_interval:g}"

    def stop_deployment() -> None:
        import signal

        for p in list(lab.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)

    sampler = MemorySampler(str(lab.home), sample, min_available_mb, stop_deployment)
    sampler.start()
    out_dir = tmp / "flower-result"
    silo_out = tmp / "silo-out"
    keys = rounds_keys(tmp, [f.stem for f in files]) if rounds > 1 else {}
    try:
        t0 = time.monotonic()
        lab.start_superlink()
        for i, f in enumerate(files):
            node = {"data-path": str(f), "schema-path": str(schema), "silo-name": f.stem,
                    **site_limits(options, rounds), **keys.get(f.stem, {}), "out-dir": str(silo_out / f.stem)}
            lab.start_supernode(node_config_text(node), log=f"supernode{i}.log")
        deadline = time.monotonic() + 900      # 30 sites starting on 2 busy cores take minutes
        while len([n for n in lab.nodes() if n.get("status") == "online"]) < len(files):
            if time.monotonic() > deadline:
                raise TimeoutError("not every SuperNode came online within 900 s")
            time.sleep(2)
        t_up = time.monotonic() - t0
        run_config = " ".join([f'out-dir="{out_dir}"', f'schema-path="{schema}"', f"seed={seed}",
                               f"min-nodes={len(files)}", "wait-nodes=120",
                               *(f"{k}={v}" for k, v in {**options, **(run_options or {})}.items())])
        t1 = time.monotonic()
        status, server_log = lab.run_app(ROOT / "flower_app", run_config, done_file=out_dir / "result.json",
                                         timeout=timeout)
        wall = time.monotonic() - t1
        if sampler.low_memory:
            raise RuntimeError(f"stopped: the host's available memory fell under {min_available_mb:g} MB "
                               "(--min-available-mb); run it on a machine with more memory")
        if status != "finished:completed":
            raise RuntimeError(f"Flower run ended {status}:\n{server_log}")
        log_text = (out_dir / "server.log").read_text()
        result = json.loads((out_dir / "result.json").read_text())
        node_logs = [p.read_text(errors="replace") for p in tmp.glob("supernode*.log")]
        unauthorised = sum("401 Unauthorized" in text for text in node_logs)
        unauthorised_lines = sum(text.count("401 Unauthorized") for text in node_logs)
        received = sum(len(re.findall(r"Receiving: query\.", text)) for text in node_logs)
        over_cap = sum(text.count("started over the cap") for text in node_logs)
    finally:
        sampler.stop.set()
        sampler.join(5)
        lab.close()
    stages = stages_from_log(log_text)
    memory = sampler.summary()
    launches = memory["per_kind"]["ClientApp"]["processes_seen"]
    timings = result["timings_s"]
    n_rounds = (result["diagnostics"].get("rounds") or {}).get("n_rounds") or 0
    per_round = round(timings["rounds"] / n_rounds, 2) if n_rounds and "rounds" in timings else None
    return {"deployment_up_s": round(t_up, 1), "run_wall_s": round(wall, 1), "stages": stages,
            "server_timings_s": timings, "seconds_per_round": per_round, "memory": memory,
            "messages_to_silos": received, "clientapp_launches": launches,
            "clientapp_relaunches": max(launches - received, 0),
            "max_clientapps": max_clientapps, "peak_clientapps_alive": memory["per_kind"]["ClientApp"]["peak_alive"],
            "clientapp_launcher": "flwr-clientapp" if max_clientapps is None or not light_clientapp
            else "vcmc.flower.clientapp_main" + (", forked warm" if warm_clientapps else "")
            + (", Flower's SuperNode" if flower_supernode and max_clientapps is not None else ""),
            "launches_over_the_cap": over_cap,
            "superexec_poll_interval_s": superexec_poll_interval or 1.0,
            "supernode_logs_with_401_unauthorized": unauthorised, "lines_401_unauthorized": unauthorised_lines,
            "result": result, "silo_out": silo_out}


def run_fit(tmp: Path, files: list[Path], schema: Path, options: dict, seed: int, rounds: int = 1) -> dict:
    """``vcmc fit`` on the same files with the deployment's effective options: its ``rounds`` (1: the one-shot
    pass) with every silo built as the sites' node configs build them (``--silo-policy FILE``, a deployment
    preview, FILE holding ``site_limits``)."""
    out = tmp / "fit-result"
    sets = [x for k, v in options.items() for x in ("--set", f"{k}={v}")]
    policy = tmp / "silo-policy.toml"
    policy.write_text("".join(f"{k} = {_toml(v)}\n" for k, v in site_limits(options, rounds).items()))
    effective = ["--rounds", str(rounds), "--silo-policy", str(policy)]
    cmd = [str(Path(sys.executable).parent / "vcmc"), "fit", *map(str, files), "--schema", str(schema), "--out",
           str(out), "--seed", str(seed), *sets, *effective]
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _TIMED, *cmd], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"vcmc fit failed:\n{done.stderr[-3000:]}")
    peak = json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mb"]
    return {"wall_s": round(wall, 1), "peak_rss_mb": peak, "result": json.loads((out / "result.json").read_text()),
            "out": out, "effective_options": effective}


class Busy:
    """``n`` CPU-bound processes (a loop of arithmetic, no data) beside the measured deployment: a host doing
    other work. Each is its own process, stopped on exit."""

    def __init__(self, n: int):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True:\n    sum(range(10000))"])
                      for _ in range(n)]

    def cpu_s(self) -> float:
        return round(sum(_cpu_ticks(p.pid) for p in self.procs) / os.sysconf("SC_CLK_TCK"), 1)

    def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait(10)


# runs a command and prints its children's peak RSS (ru_maxrss of the largest child, MB)
_TIMED = ("import json, resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
          "sys.exit(r.returncode) if r.returncode else print(json.dumps({'peak_rss_mb': "
          "round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}))")


def data_read_cost(csv: Path, schema: Path, repeats: int = 5) -> dict:
    """What one ClientApp message pays for the silo's data: reading and encoding the file (every message
    before the data were kept in the node state) against rebuilding them from the node state, the state
    passed through Flower's own Context serialisation as the SuperNode passes it to each ClientApp."""
    from flwr.app import Context, RecordDict
    from flwr.common.serde import context_from_proto, context_to_proto

    from vcmc.flower.client import read_node_data
    from vcmc.flower.node_data import cached_silo_data

    node = {"data-path": str(csv), "schema-path": str(schema), "silo-name": csv.stem}
    context = Context(run_id=1, node_id=1, node_config=node, state=RecordDict(), run_config={})
    cached_silo_data(context, lambda: read_node_data(node))
    wire = context_to_proto(context).SerializeToString()
    read, cached = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        read_node_data(node)
        read.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        from flwr.proto.message_pb2 import Context as ProtoContext

        restored = context_from_proto(ProtoContext.FromString(wire))
        cached_silo_data(restored, lambda: (_ for _ in ()).throw(AssertionError("read the file again")))
        cached.append(time.perf_counter() - t0)
    return {"read_and_encode_file_s": round(float(np.median(read)), 4),
            "from_node_state_s": round(float(np.median(cached)), 4), "node_state_bytes": len(wire)}


# One message handled in a fresh process, as Flower's SuperExec runs it: the ClientApp module loaded as
# Flower loads it (flower_app/vcmc_flower/client_app.py), then the captured request answered from the
# captured node state. Prints one JSON line.
_ONE_MESSAGE = """
import json, pickle, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import vcmc_flower.client_app
t1 = time.perf_counter()
from flwr.supercore.task_identity import TaskIdentity
TaskIdentity._run_id = 1; TaskIdentity._node_id = 1; TaskIdentity._task_id = 1
from flwr.app import Message
from flwr.common.serde import context_from_proto
from flwr.proto.message_pb2 import Context
from vcmc.flower.client import client_handle
from vcmc.flower.records import encode_record
stage, request, context = pickle.loads(open(sys.argv[2], "rb").read())[int(sys.argv[3])]
state_bytes = len(context)
context = context_from_proto(Context.FromString(context))
before = set(sys.modules)
t2 = time.perf_counter()
reply = client_handle(Message(encode_record(request), dst_node_id=1, message_type=stage), context)
t3 = time.perf_counter()
assert not reply.has_error(), reply.error.reason
heavy = ("arviz", "arviz_plots", "arviz_stats", "matplotlib", "xarray", "scipy", "numba", "pandas", "pyarrow")
print(json.dumps({"stage": stage.removeprefix("query."), "load_clientapp_s": round(t1 - t0, 3),
                  "node_state_bytes": state_bytes,
                  "handle_s": round(t3 - t2, 3),
                  "peak_rss_mb": round(int(next(line.split()[1] for line in open("/proc/self/status")
                                                if line.startswith("VmHWM:"))) / 1024, 1),
                  "imported_by_handler": sorted(m for m in heavy if m in sys.modules and m not in before),
                  "imported_with_clientapp": sorted(m for m in heavy if m in before)}))
"""


def clientapp_cost(tmp: Path, options: dict, seed: int, rows: int = 300, rounds: int = 4) -> list[dict]:
    """What each message of a run costs the fresh ClientApp process started for it (one per message,
    Flower's design): seconds to load the ClientApp module, seconds to answer, peak RSS, which heavy
    libraries the module and the handler import and the node state the message carries. The messages are
    those of a 2-silo run with ``rounds`` rounds, each silo with its rounds' key (the ServerApp over the test suite's
    in-process ``LoopbackGrid``, each node with its own ``Context``); each kind of message (and two round
    sweeps) is then answered again in a new process from the node state it arrived with."""
    import pickle

    from flwr.common.serde import context_to_proto
    from flwr.supercore.task_identity import TaskIdentity
    from test_flower import LoopbackGrid  # the suite's in-process Grid: one implementation

    import vcmc.flower.client as client
    from vcmc.flower.records import decode_record
    from vcmc.flower.server import server_main

    files, schema = make_files(tmp, 2, rows, seed)
    keys = rounds_keys(tmp, [f.stem for f in files])
    # two silos: each operator's min-peers lowered to 2 so that the rounds can run
    nodes = {1 + i: {"data-path": str(f), "schema-path": str(schema), "silo-name": f.stem,
                     "min-cluster-size": options["privacy.min-cluster-size"], "min-peers": 2, **keys[f.stem]}
             for i, f in enumerate(files)}
    captured = []
    handle = client.client_handle

    def capturing(message, context):
        if context.node_id == 1:
            captured.append((message.metadata.message_type, decode_record(message.content),
                             context_to_proto(context).SerializeToString()))
        return handle(message, context)

    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = 1, 0, 1
    client.client_handle = capturing
    try:
        from flwr.app import Context, RecordDict

        rc = {**options, "aggregation.rounds": rounds, "out-dir": str(tmp / "probe-result"),
              "schema-path": str(schema), "seed": seed, "min-nodes": 2}
        server_main(LoopbackGrid(nodes), Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                                 run_config=rc))
    finally:
        client.client_handle = handle
    (tmp / "messages.pkl").write_bytes(pickle.dumps(captured))
    out, seen = [], {}
    for i, (stage, _, _) in enumerate(captured):
        seen[stage] = seen.get(stage, 0) + 1
        if seen[stage] > (2 if stage == "query.round_sweep" else 1):
            continue
        done = subprocess.run([sys.executable, "-c", _ONE_MESSAGE, str(ROOT / "flower_app"), str(tmp / "messages.pkl"),
                               str(i)], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"answering message {i} in a fresh process failed:\n{done.stderr[-3000:]}")
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


# CPU seconds a new process spends on its imports (the median of ``repeats`` processes)
_IMPORT_CPU = "import time; t = time.process_time(); {imports}; print(time.process_time() - t)"
LAUNCHER_IMPORTS = {
    "flwr-clientapp": "from flwr.supernode.cli import flwr_clientapp",
    "vcmc.flower.clientapp_main": "import vcmc.flower.clientapp_main; from flwr.supernode.runtime.run_clientapp "
                                  "import run_clientapp; from flwr.common.args import try_obtain_flwr_app_token",
}


def launcher_cost(repeats: int = 7) -> dict:
    """CPU seconds of the imports each ClientApp launcher makes before the app is loaded (new processes,
    alternating, median of ``repeats`` each), and of interpreter start-up alone."""
    times: dict[str, list[float]] = {"python alone": [], **{k: [] for k in LAUNCHER_IMPORTS}}
    for _ in range(repeats):
        for name in times:
            code = "pass" if name == "python alone" else LAUNCHER_IMPORTS[name]
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-c", _IMPORT_CPU.format(imports=code)], capture_output=True,
                               text=True, check=True)
            wall = time.perf_counter() - t
            times[name].append((float(r.stdout.strip()), wall))
    return {name: {"import_cpu_s": round(float(np.median([c for c, _ in v])), 3),
                   "process_wall_s": round(float(np.median([w for _, w in v])), 3)} for name, v in times.items()}


LAUNCHERS = {"flwr-clientapp": (False, False, True), "vcmc-cold": (True, False, True),
             "vcmc-warm-flower-supernode": (True, True, True), "vcmc-warm": (True, True, False)}
"""``--round-cost``'s deployments: (vcmc's ClientApp launcher, warm, Flower's own SuperNode): Flower's
``flwr-clientapp``, vcmc's launcher, vcmc's forked warm, each under Flower's SuperNode, then warm under vcmc's
SuperNode launcher (``vcmc.flower.supernode_main``), the default of ``vcmc supernode``."""


def round_cost(tmp_root: Path, n_sites: int, rows: int, rounds: int, repeats: int, options: dict, seed: int,
               sample: float, timeout: float, max_clientapps: int, launchers=tuple(LAUNCHERS)) -> dict:
    """Seconds per round of a deployment of ``n_sites`` (ClientApp start-up included), for each ClientApp
    launcher, ``repeats`` runs each, alternating; and the ClientApp CPU seconds per message."""
    runs = []
    for k in range(repeats):
        for light, warm, flower_node in (LAUNCHERS[name] for name in launchers):
            with tempfile.TemporaryDirectory(prefix="vcmc-round-cost-", dir=tmp_root) as name:
                tmp = Path(name)
                data = tmp / "data"
                data.mkdir()
                files, schema = make_files(data, n_sites, rows, seed)
                r = run_flower(tmp, files, schema, options, seed, sample, timeout,
                               run_options={"aggregation.rounds": rounds, "assessment.enabled": "false"},
                               max_clientapps=max_clientapps, light_clientapp=light, rounds=rounds,
                               warm_clientapps=warm, flower_supernode=flower_node)
            clientapp = r["memory"]["per_kind"]["ClientApp"]
            runs.append({"repeat": k, "launcher": r["clientapp_launcher"], "seconds_per_round": r["seconds_per_round"],
                         "rounds_s": r["server_timings_s"].get("rounds"), "run_wall_s": r["run_wall_s"],
                         "messages": r["messages_to_silos"], "clientapp_launches": r["clientapp_launches"],
                         "clientapp_cpu_s_per_message": round(clientapp["cpu_s"] / max(r["messages_to_silos"], 1), 3),
                         "clientapp_peak_rss_mb": clientapp["peak_rss_mb"],
                         "warm_process_cpu_s": r["memory"]["per_kind"]["Warm process"]["cpu_s"],
                         "warm_process_peak_rss_mb": r["memory"]["per_kind"]["Warm process"]["peak_rss_mb"]})
            print(json.dumps(runs[-1]))  # noqa: T201
    summary = {}
    for launcher in dict.fromkeys(r["launcher"] for r in runs):
        mine = [r for r in runs if r["launcher"] == launcher]
        summary[launcher] = {key: round(float(np.median([r[key] for r in mine])), 3)
                             for key in ("seconds_per_round", "clientapp_cpu_s_per_message", "run_wall_s")}
    return {"runs": runs, "median": summary}


def idle_cost(tmp: Path, n_sites: int, seconds: float, poll_interval: float | None) -> dict:
    """CPU seconds per minute and per site that a deployment's SuperNodes and SuperExecs use while no run is
    going on (their polling), with Flower's SuperExec poll interval ``poll_interval`` (None: Flower's 1 s)."""
    lab = Lab(tmp)
    if poll_interval is not None:
        lab.env["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] = f"{poll_interval:g}"
    try:
        lab.start_superlink()
        for i in range(n_sites):
            lab.start_supernode(f'data-path="{tmp / "unused.csv"}" silo-name="site_{i + 1}"', log=f"idle{i}.log")
        deadline = time.monotonic() + 300
        while len([n for n in lab.nodes() if n.get("status") == "online"]) < n_sites:
            if time.monotonic() > deadline:
                raise TimeoutError("not every SuperNode came online within 300 s")
            time.sleep(2)
        time.sleep(10)      # past the start-up imports

        def ticks() -> dict[str, int]:
            out = dict.fromkeys(("SuperLink", "SuperNode", "SuperExec"), 0)
            for pid in processes_with(str(lab.home)):
                with contextlib.suppress(OSError):
                    kind = _kind(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
                    if kind in out:
                        out[kind] += _cpu_ticks(pid)
            return out

        before = ticks()
        time.sleep(seconds)
        after = ticks()
    finally:
        lab.close()
    per_minute = 60 / seconds / os.sysconf("SC_CLK_TCK")
    return {"sites": n_sites, "seconds": seconds, "superexec_poll_interval_s": poll_interval or 1.0,
            "cpu_s_per_minute": {k: round((after[k] - before[k]) * per_minute, 2) for k in before},
            "cpu_s_per_minute_per_site": {k: round((after[k] - before[k]) * per_minute / n_sites, 3)
                                          for k in ("SuperNode", "SuperExec")}}


def compare(flower: dict, fit: dict, silo_out: Path | None = None, fit_out: Path | None = None) -> dict:
    """The Flower result against vcmc fit's: silos, weights, cluster sizes, WAIC and, with the folders, every
    silo's assignments and memberships files (written on the silo's side by the deployment)."""
    import pandas as pd

    wf = np.array([c["weight"] for c in flower["clusters"]])
    wv = np.array([c["weight"] for c in fit["clusters"]])
    same_shape = wf.shape == wv.shape

    def waic(r):
        return (r.get("diagnostics", {}).get("waic") or {}).get("elpd_waic")

    out = {"same_silos_in_order": flower["silos"] == fit["silos"],
           "n_clusters": [flower["n_clusters"], fit["n_clusters"]],
           "max_abs_weight_difference": float(np.max(np.abs(wf - wv))) if same_shape else None,
           "same_cluster_sizes": same_shape and [c["size_per_silo"] for c in flower["clusters"]]
           == [c["size_per_silo"] for c in fit["clusters"]],
           "elpd_waic": [waic(flower), waic(fit)]}
    if silo_out is not None and fit_out is not None:
        worst, same_labels = 0.0, True
        for kind in ("assignments", "memberships"):
            fitted = pd.read_csv(fit_out / f"{kind}.csv")
            for name in flower["silos"]:
                mine = pd.read_csv(silo_out / name / f"{kind}.csv")
                theirs = fitted[fitted.silo == name].reset_index(drop=True)
                if mine.shape != theirs.shape or list(mine.columns) != list(theirs.columns):
                    return {**out, "same_row_files": False}
                p = [c for c in mine.columns if c.startswith("p")]
                worst = max(worst, float(np.max(np.abs(mine[p].to_numpy() - theirs[p].to_numpy()))))
                same_labels &= mine.drop(columns=p).equals(theirs.drop(columns=p))
        out["same_row_labels"] = bool(same_labels)
        out["max_abs_membership_difference"] = worst
    return out


def identical(c: dict) -> bool:
    w = [x for x in c["elpd_waic"] if x is not None]
    return bool(c["same_silos_in_order"] and c["same_cluster_sizes"] and (c["max_abs_weight_difference"] or 0) < 1e-9
                and c.get("same_row_labels", True) and (c.get("max_abs_membership_difference") or 0) < 1e-9
                and (len(w) != 2 or abs(w[0] - w[1]) <= 1e-9 * abs(w[0])))


def _label(r: dict) -> str:
    return f"{r['sites']} sites" + (f", {r['rounds']} rounds" if r.get("rounds", 1) > 1 else ", one-shot") + (
        f", {r['continuous']} continuous items" if r.get("continuous") else "")


def markdown(reports: list[dict], cost: dict | None = None, rounds: dict | None = None) -> str:
    lines = ["# Flower deployment on one host against `vcmc fit`", "",
             "Written by `benchmarks/flower.py` from the `flower-*.json`, `clientapp-cost.json` and `round-cost.json`",
             "files beside this one (each gives its command and commit). The sites are started with `vcmc supernode`",
             "and a launch cap (docs/federation.md §3.6) unless the cap column says `none (Flower's SuperExec)`;",
             "`busy` is the number of CPU-bound processes that ran beside the deployment (part of the command).",
             "`vcmc fit` ran with the deployment's effective options: `--rounds R --silo-policy FILE` (R = 1: the",
             "one-shot pass), FILE holding the sites' node-config keys other than their paths; for rounds every site",
             "had its rounds' key from `vcmc keygen` and `reproducible-rounds = true`. Figures from a shared 2-core",
             "machine: read the ratios within one run, not the seconds. Older measurements: 30-sites-shared-host.md",
             "(30 sites before the cap), clientapp-before-after.md, idle-cpu.json.",
             "", "| run | iterations | rows per site | busy | Flower run (s) | vcmc fit (s) | ratio | identical | "
             "s per round | peak PSS, all (MB) | cap (most ClientApps alive) | messages to silos | "
             "ClientApp launches (relaunches) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in reports:
        f = r["flower"]
        cap = f.get("max_clientapps")
        cap_text = "none (Flower's SuperExec)" if cap is None else f"{cap or 'none'}"
        lines.append(f"| {_label(r)} | {r['iterations']} | {r['rows']} | {r.get('busy', 0)} | {f['run_wall_s']} | "
                     f"{r['fit']['wall_s']} | {f['run_wall_s'] / r['fit']['wall_s']:.2f} | "
                     f"{'yes' if identical(r['comparison']) else 'NO'} | {f.get('seconds_per_round') or '–'} | "
                     f"{f['memory']['peak_total_pss_mb']} | {cap_text} ({f.get('peak_clientapps_alive', '?')}) | "
                     f"{f.get('messages_to_silos', '')} | {f.get('clientapp_launches', '')} "
                     f"({f.get('clientapp_relaunches', '')}) |")
    for r in reports:
        f = r["flower"]
        lines += ["", f"## {_label(r)}", "", f"Command: `{r['command']}` at commit `{r['commit']}`, "
                  f"{r['cores']} cores, {r.get('busy', 0)} CPU-bound processes beside it. `vcmc fit` options: "
                  f"`{' '.join(r['fit'].get('effective_options', []))}`.", "",
                  "Stages (ServerApp's server.log; server-side steps from result.json):",
                  "", "| stage | silos replied | seconds | received |", "| --- | --- | --- | --- |"]
        lines += [f"| {s['stage']} | {s['replied']} of {s['silos']} | {s['seconds']} | {s['received']} |"
                  for s in f["stages"]]
        t = f["server_timings_s"]
        lines += ["", "Server-side: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.items()) +
                  "; `vcmc fit`: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["fit"]["timings_s"].items()), "",
                  "| process kind | processes seen | most alive at once | peak RSS of one (MB) | "
                  "peak PSS of all at once (MB) | CPU, all (s) |", "| --- | --- | --- | --- | --- | --- |"]
        for kind, v in f["memory"]["per_kind"].items():
            lines.append(f"| {kind} | {v['processes_seen']} | {v.get('peak_alive', '')} | {v['peak_rss_mb']} | "
                         f"{v['peak_pss_sum_mb']} | {v.get('cpu_s', '')} |")
        lines.append(f"| `vcmc fit` (one process) | 1 | 1 | {r['fit']['peak_rss_mb']} | | |")
        c = r["comparison"]
        lines += ["", f"Against `vcmc fit`: weights differ by at most {c['max_abs_weight_difference']}, memberships by "
                  f"{c.get('max_abs_membership_difference', '–')}; same labels in every silo's assignments.csv: "
                  f"{c.get('same_row_labels', '–')}; WAIC elpd {c['elpd_waic'][0]} and {c['elpd_waic'][1]}.",
                  "", f"SuperNode logs with `401 Unauthorized`: {f.get('supernode_logs_with_401_unauthorized', '')} of "
                  f"{r['sites']} ({f.get('lines_401_unauthorized', '')} lines); launches over the cap: "
                  f"{f.get('launches_over_the_cap', '–')}; CPU of the busy processes {r.get('busy_cpu_s', '–')} s."]
        d = r.get("silo_data_per_message")
        if d:
            lines += ["", "Silo data per ClientApp message: reading and encoding the file "
                      f"{d['read_and_encode_file_s']} s, rebuilding from the node state {d['from_node_state_s']} s "
                      f"(state {d['node_state_bytes']} bytes)."]
    if rounds:
        lines += ["", "## The rounds in a deployment: seconds per round by ClientApp launcher", "",
                  f"Command: `{rounds['command']}` at commit `{rounds['commit']}`, {rounds['cores']} cores: "
                  f"{rounds['sites']} sites of {rounds['rows']} rows, {rounds['rounds']} rounds, cap "
                  f"{rounds['max_clientapps']}, runs alternating between the launchers.", "",
                  "| launcher | s per round (median) | ClientApp CPU s per message (median) | run (s, median) |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {k} | {v['seconds_per_round']} | {v['clientapp_cpu_s_per_message']} | {v['run_wall_s']} |"
                  for k, v in rounds["median"].items()]
    if cost:
        lines += ["", "## One message, one ClientApp process", "",
                  f"Command: `{cost['command']}` at commit `{cost['commit']}`. Each kind of message of a 2-silo run "
                  f"with rounds ({cost['rows']} rows each) answered again in a fresh process, as the SuperExec runs "
                  "it: load the ClientApp module (Flower's app API, vcmc's handler), then answer from the node "
                  "state the message came with.", "",
                  "| message | load ClientApp (s) | answer (s) | peak RSS (MB) | node state (bytes) | "
                  "heavy libraries the answer imported |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {m['stage']} | {m['load_clientapp_s']} | {m['handle_s']} | {m['peak_rss_mb']} | "
                  f"{m.get('node_state_bytes', '')} | {', '.join(m['imported_by_handler']) or 'none'} |"
                  for m in cost["messages"]]
        if cost.get("launchers"):
            lines += ["", "Imports of the ClientApp process before the app loads (CPU seconds, median of new "
                      "processes):", "", "| launcher | import CPU (s) | process wall (s) |", "| --- | --- | --- |"]
            lines += [f"| {k} | {v['import_cpu_s']} | {v['process_wall_s']} |" for k, v in cost["launchers"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sites", type=int, nargs="+", default=[8, 30])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=300, help="rows per site")
    ap.add_argument("--rounds", type=int, default=1, help="aggregation.rounds of the runs (1: the one-shot pass)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--continuous", type=int, default=0, metavar="G",
                    help="G continuous items (Gaussian) beside the ten categorical ones in every site's file")
    ap.add_argument("--sample", type=float, default=0.5, help="seconds between memory samples")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds a Flower run may take")
    ap.add_argument("--min-available-mb", type=float, default=2000,
                    help="stop a deployment when the host's available memory falls under this (0: never)")
    ap.add_argument("--max-clientapps", type=int, default=os.cpu_count() or 1,
                    help="launch cap of vcmc supernode: ClientApps alive at once over the host (default: its cores; "
                         "0: none)")
    ap.add_argument("--flower-superexec", action="store_true",
                    help="start the sites with flower-supernode and Flower's SuperExec (no cap) instead")
    ap.add_argument("--flower-clientapp", action="store_true",
                    help="vcmc's SuperExec starts Flower's flwr-clientapp instead of vcmc's launcher")
    ap.add_argument("--busy", type=int, default=0, metavar="K",
                    help="run K CPU-bound processes beside the whole invocation (a host doing other work)")
    ap.add_argument("--superexec-poll-interval", type=float, default=None,
                    help="seconds between each SuperExec's polls of its SuperNode for a task "
                         "(Flower's FLWR_SUPEREXEC_TASK_POLL_INTERVAL; Flower's default 1 s)")
    ap.add_argument("--skip-clientapp-cost", action="store_true", help="do not measure one message per process")
    ap.add_argument("--round-cost", type=int, default=0, metavar="N",
                    help="instead: seconds per round of N sites for each ClientApp launcher (round-cost.json)")
    ap.add_argument("--repeats", type=int, default=3, help="with --round-cost: runs per launcher")
    ap.add_argument("--launchers", nargs="+", default=list(LAUNCHERS), choices=list(LAUNCHERS),
                    help="with --round-cost: the deployments measured (default: all, in this order)")
    ap.add_argument("--idle", type=float, default=0, metavar="SECONDS",
                    help="instead of runs: measure the idle CPU of 8 SuperNodes for SECONDS with Flower's default "
                         "SuperExec poll interval and with --superexec-poll-interval (idle-cpu.json)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "flower")
    args = ap.parse_args()
    # SIGTERM (and SIGINT, ignored in a background job) must still stop every process of the deployment:
    # SystemExit unwinds through run_flower's ``finally`` and Lab.close()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    options = {"sampler.n-iter": args.iterations, "sampler.burn-in": args.iterations // 2,
               "privacy.min-cluster-size": 10}
    command = " ".join(["python", "benchmarks/flower.py", *sys.argv[1:]])
    cap = None if args.flower_superexec else args.max_clientapps
    args.out.mkdir(parents=True, exist_ok=True)
    if args.idle:
        rows = []
        for poll in (None, args.superexec_poll_interval or 5.0):
            with tempfile.TemporaryDirectory(prefix="vcmc-flower-idle-") as tmp_name:
                rows.append(idle_cost(Path(tmp_name), 8, args.idle, poll))
        atomic_write_text(args.out / "idle-cpu.json", json.dumps(
            {"benchmark": "flower-idle", "command": command, "commit": commit(), "cores": os.cpu_count(),
             "measurements": rows}, indent=2) + "\n")
        print(json.dumps(rows))  # noqa: T201
        return
    busy = Busy(args.busy)
    try:
        if args.round_cost:
            with tempfile.TemporaryDirectory(prefix="vcmc-round-cost-") as tmp_name:
                rc = round_cost(Path(tmp_name), args.round_cost, args.rows, args.rounds, args.repeats, options,
                                args.seed, args.sample, args.timeout, args.max_clientapps, args.launchers)
            atomic_write_text(args.out / "round-cost.json", json.dumps(
                {"benchmark": "flower-round-cost", "command": command, "commit": commit(), "cores": os.cpu_count(),
                 "sites": args.round_cost, "rows": args.rows, "rounds": args.rounds, "iterations": args.iterations,
                 "max_clientapps": args.max_clientapps, "busy": args.busy, **rc}, indent=2) + "\n")
        else:
            if not args.skip_clientapp_cost:
                with tempfile.TemporaryDirectory(prefix="vcmc-clientapp-") as tmp_name:
                    cost = {"benchmark": "flower-clientapp", "command": command, "commit": commit(),
                            "cores": os.cpu_count(), "rows": 300, "iterations": args.iterations,
                            "launchers": launcher_cost(),
                            "messages": clientapp_cost(Path(tmp_name), options, args.seed)}
                atomic_write_text(args.out / "clientapp-cost.json", json.dumps(cost, indent=2) + "\n")
            for n in args.sites:
                with tempfile.TemporaryDirectory(prefix=f"vcmc-flower-{n}-") as tmp_name:
                    tmp = Path(tmp_name)
                    data = tmp / "data"
                    data.mkdir()
                    files, schema = make_files(data, n, args.rows, args.seed, args.continuous)
                    flower = run_flower(tmp, files, schema, options, args.seed, args.sample, args.timeout,
                                        args.min_available_mb, args.superexec_poll_interval,
                                        run_options={"aggregation.rounds": args.rounds}, max_clientapps=cap,
                                        light_clientapp=not args.flower_clientapp, rounds=args.rounds)
                    fit = run_fit(tmp, files, schema, options, args.seed, rounds=args.rounds)
                    comparison = compare(flower["result"], fit["result"], flower["silo_out"], fit["out"])
                    per_message = data_read_cost(files[0], schema)
                report = {"benchmark": "flower", "command": command, "commit": commit(), "cores": os.cpu_count(),
                          "sites": n, "rows": args.rows, "continuous": args.continuous, "iterations": args.iterations,
                          "rounds": args.rounds,
                          "seed": args.seed, "busy": args.busy, "busy_cpu_s": busy.cpu_s(),
                          "flower": {k: v for k, v in flower.items() if k not in ("result", "silo_out")},
                          "fit": {"wall_s": fit["wall_s"], "peak_rss_mb": fit["peak_rss_mb"],
                                  "timings_s": fit["result"]["timings_s"],
                                  "effective_options": fit["effective_options"]},
                          "silo_data_per_message": per_message, "comparison": comparison}
                name = f"flower-{n}" + (f"-rounds{args.rounds}" if args.rounds > 1 else "") + (
                    f"-continuous{args.continuous}" if args.continuous else "")
                atomic_write_text(args.out / f"{name}.json", json.dumps(report, indent=2) + "\n")
                print(json.dumps({"sites": n, "flower_s": flower["run_wall_s"], "fit_s": fit["wall_s"],  # noqa: T201
                                  "identical": identical(comparison), **comparison}))
    finally:
        busy.close()
    saved = [json.loads(p.read_text()) for p in sorted(args.out.glob("flower-*.json"))]
    cost_file, rounds_file = args.out / "clientapp-cost.json", args.out / "round-cost.json"
    atomic_write_text(args.out / "README.md", markdown(
        sorted(saved, key=lambda r: (r["sites"], r.get("rounds", 1), r.get("continuous", 0))),
        json.loads(cost_file.read_text()) if cost_file.is_file() else None,
        json.loads(rounds_file.read_text()) if rounds_file.is_file() else None))


if __name__ == "__main__":
    main()
