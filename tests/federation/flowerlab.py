"""A real Flower deployment on 127.0.0.1 for tests: a SuperLink and SuperNodes in subprocesses.

``Lab(tmp_path, secure=True)`` runs the SuperLink with TLS (a CA and a server certificate for 127.0.0.1
made by the openssl commands of docs/federation.md, run as documented) and SuperNode authentication
(``--enable-supernode-auth``: only SuperNodes whose public key was registered with
``flwr supernode register`` may connect). Flags and behaviour as in the installed flwr 1.42: the SuperLink
serves its HTTP API over TLS when given ``--ssl-ca-certfile/--ssl-certfile/--ssl-keyfile``; a SuperNode
verifies it with ``--root-certificates`` and signs with ``--auth-supernode-private-key`` (an EC key in
OpenSSH format); an unregistered SuperNode fails to activate, logs Flower's exit code 305 and ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent


def _ephemeral_ports() -> range:
    """The ports the kernel hands to outgoing connections (every gRPC client of every lab on this host takes them)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A port free now and outside the ephemeral range: a port the kernel chose (``bind(0)``) is an ephemeral one,
    which an outgoing connection of another process may take before the server binds it ("address already in
    use" on a host running other labs)."""
    ephemeral = _ephemeral_ports()
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(10_000, 65_000)
        if port in ephemeral:
            continue
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            return port
    raise RuntimeError("no free port outside the ephemeral range")


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment mentions ``marker`` (the lab's FLWR_HOME)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (p / "environ").read_bytes() and \
                    "zombie" not in (p / "status").read_text().lower():
                found.append(int(p.name))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


CLIENTAPP_MARKERS = (b"flwr-clientapp", b"vcmc.flower.clientapp_main")
"""Command-line words of a ClientApp process: Flower's program, or vcmc's launcher (vcmc.flower.superexec)."""

WARM_CLIENTAPP_NAME = b"vcmc-clientapp"
"""The process name (``/proc/PID/comm``) of a ClientApp forked from a SuperExec's warm process
(``vcmc.flower.warm.PROCESS_NAME``), whose command line is the warm process's."""


def _comm(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/comm").read_bytes().strip()
    except OSError:
        return b""


def is_warm_clientapp(pid: int) -> bool:
    """A ClientApp forked from a SuperExec's warm process (by its process name)."""
    return _comm(pid) == WARM_CLIENTAPP_NAME


def is_clientapp(pid: int) -> bool:
    """A live ClientApp process started by a SuperExec: not a fork of a ClientApp that has not yet run its own
    program (it shows its parent's command line for that instant), and not exiting (a process gives its memory
    back before it closes its files, a launch slot's among them: no VmRSS then)."""
    warm = is_warm_clientapp(pid)
    if not warm and not any(m in _cmdline(pid) for m in CLIENTAPP_MARKERS):
        return False
    try:
        parent = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        if "VmRSS:" not in Path(f"/proc/{pid}/status").read_text():
            return False
    except (OSError, ValueError, IndexError):
        return False
    if warm:
        return not is_warm_clientapp(parent)
    return not any(m in _cmdline(parent) for m in CLIENTAPP_MARKERS)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "federation.md"
_TLS_MARKER = "<!-- tls-commands:"


def documented_tls_commands(san: str) -> str:
    """The openssl block of docs/federation.md (the fenced block after its ``tls-commands`` marker), with
    its ``SAN=`` line set to ``san``; every other line as documented."""
    text = DOCS.read_text(encoding="utf-8")
    after = text[text.index(_TLS_MARKER):]
    block = after[after.index("```bash\n") + len("```bash\n"):]
    block = block[:block.index("\n```")]
    lines = block.splitlines()
    assert lines[0].startswith("SAN="), f"the documented TLS block must start with SAN=...; got {lines[0]!r}"
    return "\n".join([f'SAN="{san}"', *lines[1:]]) + "\n"


def make_tls(folder: Path, san: str = "DNS:localhost,IP:127.0.0.1") -> dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1 / localhost, made by running docs/federation.md's openssl
    commands in ``folder`` (so the documented commands are the tested ones)."""
    script = documented_tls_commands(san)
    (folder / "make-tls.sh").write_text(script)
    done = subprocess.run(["bash", "-euo", "pipefail", "make-tls.sh"], cwd=folder, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "server.pem: OK" in done.stdout, done.stdout + done.stderr
    return {"ca": folder / "ca.crt", "cert": folder / "server.pem", "key": folder / "server.key"}


def make_node_key(folder: Path, name: str) -> Path:
    """A SuperNode's EC P-384 key pair in OpenSSH format (``name`` and ``name.pub``); returns the private key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    k = ec.generate_private_key(ec.SECP384R1())
    private = folder / name
    private.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                        serialization.NoEncryption()))
    private.chmod(0o600)
    (folder / f"{name}.pub").write_bytes(k.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                     serialization.PublicFormat.OpenSSH))
    return private


class Lab:
    """SuperLink + SuperNodes on loopback; ``close()`` stops them all and checks none is left behind.

    ``max_clientapps`` (an int, 0 for no cap): every SuperNode is started with the operators' command
    ``vcmc supernode`` (``--isolation process`` and vcmc's SuperExec, at most that many ClientApps alive at once
    over the lab's SuperNodes, which share one slots folder); None: with ``flower-supernode`` itself
    (``--isolation subprocess``, Flower's SuperExec). ``light_clientapp=False`` has vcmc's SuperExec start
    Flower's own ``flwr-clientapp``."""

    def __init__(self, tmp_path: Path, *, secure: bool = False, max_clientapps: int | None = None,
                 light_clientapp: bool = True, poll_interval: float | None = None,
                 trusted_bundles: tuple[str, ...] = (), warm_clientapps: bool = True, flower_supernode: bool = False):
        self.tmp = tmp_path
        self.secure = secure
        self.max_clientapps = max_clientapps
        self.light_clientapp = light_clientapp
        self.warm_clientapps = warm_clientapps
        self.flower_supernode = flower_supernode
        self.poll_interval = poll_interval
        self.trusted_bundles = tuple(trusted_bundles)     # the app bundles' hashes every site pinned
        self.slots_dir = tmp_path / "launch-slots"
        self.home = tmp_path / "flwr"
        self.home.mkdir()
        self.env = dict(os.environ, FLWR_HOME=str(self.home), FLWR_TELEMETRY_ENABLED="0",
                        FLWR_DISABLE_UPDATE_CHECK="1", FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
                        PATH=f"{BIN}:{os.environ['PATH']}")
        self.port = free_port()
        self.procs: list[subprocess.Popen] = []
        self.tls = make_tls(tmp_path) if secure else None
        link = f'address = "127.0.0.1:{self.port}"\n'
        link += f'root-certificates = "{self.tls["ca"]}"\n' if secure else "insecure = true\n"
        (self.home / "config.toml").write_text(f'[superlink]\ndefault = "t"\n[superlink.t]\n{link}')

    def spawn(self, *args, log: str) -> subprocess.Popen:
        with open(self.tmp / log, "w") as fh:     # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(args, env=self.env, cwd=self.tmp, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs.append(proc)
        return proc

    def start_superlink(self) -> None:
        security = (["--ssl-ca-certfile", str(self.tls["ca"]), "--ssl-certfile", str(self.tls["cert"]),
                     "--ssl-keyfile", str(self.tls["key"]), "--enable-supernode-auth"] if self.secure
                    else ["--insecure"])
        self.spawn(str(BIN / "flower-superlink"), *security, "--host", "127.0.0.1", "--port", str(self.port),
                   log="superlink.log")
        self.wait_health()

    def wait_health(self, timeout: float = 60) -> None:
        scheme = "https" if self.secure else "http"
        context = ssl.create_default_context(cafile=str(self.tls["ca"])) if self.secure else None
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"{scheme}://127.0.0.1:{self.port}/health", timeout=2, context=context) as r:
                if r.status == 200:
                    return
            time.sleep(0.5)
        raise TimeoutError(f"SuperLink on port {self.port} did not become healthy")

    def flwr(self, *args, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "flwr"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def register(self, private_key: Path) -> int:
        """Register a SuperNode's public key with the SuperLink (``flwr supernode register``); its node id."""
        done = self.flwr("supernode", "register", f"{private_key}.pub", "t", "--format", "json")
        assert done.returncode == 0, done.stdout + done.stderr
        reply = json.loads(done.stdout)
        assert reply.get("success"), reply
        return int(reply["node-id"])

    def nodes(self) -> list[dict]:
        done = self.flwr("supernode", "list", "t", "--format", "json")
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout).get("nodes", [])

    def start_supernode(self, node_config: str, *, log: str, key: Path | None = None,
                        insecure: bool | None = None) -> subprocess.Popen:
        insecure = (not self.secure) if insecure is None else insecure
        security = ["--insecure"] if insecure else ["--root-certificates", str(self.tls["ca"])]
        if self.max_clientapps is not None:     # the operators' command (docs/federation.md §3.3)
            if key is not None:
                security += ["--auth-key", str(key)]
            extra = ["--max-clientapps", str(self.max_clientapps), "--slots-dir", str(self.slots_dir)]
            if not self.light_clientapp:
                extra.append("--flower-clientapp")
            if not self.warm_clientapps:
                extra.append("--cold-clientapps")
            if self.flower_supernode:
                extra.append("--flower-supernode")
            if self.poll_interval is not None:
                extra += ["--poll-interval", f"{self.poll_interval:g}"]
            for bundle in self.trusted_bundles:
                extra += ["--trusted-bundle", bundle]
            return self.spawn(str(BIN / "vcmc"), "supernode", *security, "--superlink", f"127.0.0.1:{self.port}",
                              "--host", "127.0.0.1", "--port", str(free_port()), *extra, "--node-config",
                              node_config, log=log)
        if key is not None:
            security += ["--auth-supernode-private-key", str(key)]
        return self.spawn(str(BIN / "flower-supernode"), *security, "--superlink", f"127.0.0.1:{self.port}",
                          "--host", "127.0.0.1", "--port", str(free_port()), "--node-config", node_config, log=log)

    def run_app(self, app_dir: Path, run_config: str, *, done_file: Path, timeout: float = 240) -> tuple[str, str]:
        """Submit a run and wait until it finished (``flwr run`` exits 0 whatever happens next: the status is
        read with ``flwr list``, and the cheap ``done_file`` is polled in between). Returns (status, log)."""
        submitted = self.flwr("run", str(app_dir), "t", "--format", "json", "--run-config", run_config)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert "run-id" in json.loads(submitted.stdout), submitted.stdout
        run_id = json.loads(submitted.stdout)["run-id"]
        self.last_run_id = run_id
        status, last_list = None, 0.0
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            done = done_file.exists()
            if done or time.monotonic() - last_list > 15:
                last_list = time.monotonic()
                listing = self.flwr("list", "t", "--run-id", str(run_id), "--format", "json")
                if listing.returncode == 0:
                    runs = json.loads(listing.stdout).get("runs", [])
                    status = runs[0].get("status") if runs else None
                    if status and status.startswith("finished"):
                        break
            time.sleep(1)
        log = "" if status == "finished:completed" else self.flwr("log", str(run_id), "t", "--show",
                                                                   timeout=30).stdout[-4000:]
        return status, log

    def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        deadline = time.monotonic() + 10
        while processes_with(str(self.home)) and time.monotonic() < deadline:
            time.sleep(0.5)
        leftovers = processes_with(str(self.home))
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"processes left behind: {leftovers}"


def write_silos(sim, folder: Path, n_silos: int) -> tuple[Path, list[tuple[str, Path]]]:
    """The first ``n_silos`` silos of a simulated dataset as CSV files in ``folder`` and their schema beside
    them: ``(schema path, [(silo name, csv path), ...])``."""
    schema_path = folder / "schema.json"
    sim.schema.to_json(schema_path)
    csvs = []
    for d in sim.silos[:n_silos]:
        path = folder / f"{d.name}.csv"
        d.to_frame().to_csv(path, index=False)
        csvs.append((d.name, path))
    return schema_path, csvs
