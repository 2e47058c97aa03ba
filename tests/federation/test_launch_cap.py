"""The launch cap (vcmc.flower.superexec), its check of Flower's internals, vcmc's ClientApp launcher and the
operators' command ``vcmc supernode``. Real processes and the installed Flower; the cap over real SuperNodes is
tested in test_flower_equals_fit.py."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from vcmc.exceptions import ConfigError, FlowerInternalsChanged  # noqa: E402
from vcmc.flower.superexec import CappedExecutor, LaunchSlots, check_flower_internals  # noqa: E402

HOLD = [sys.executable, "-c", "import sys; sys.stdin.read()"]      # a process that lives until its stdin closes


def _spec(task_id: int = 1, fab_hash: str | None = "ab" * 32):
    from flwr.supercore.constant import TaskType
    from flwr.supercore.superexec.executor.types import ExecutionSpec

    return ExecutionSpec(task_type=TaskType.CLIENT_APP, runtime_api_address="127.0.0.1:9094", token="t" * 8,
                         insecure=True, root_certificates_path=None, runtime_dependency_install=False,
                         parent_pid=123, suppress_output=True, task_id=task_id, fab_hash=fab_hash)


class HoldingExecutor(CappedExecutor):
    """The capped executor, its task processes replaced by processes that live until told to end."""

    def __init__(self, **kwargs):
        super().__init__(warm=False, **kwargs)

    def command(self, spec):
        return HOLD

    def launch(self, spec):
        import subprocess as sp

        real = sp.Popen
        sp.Popen = lambda args, **kw: real(args, **{**kw, "stdin": sp.PIPE})
        try:
            return super().launch(spec)
        finally:
            sp.Popen = real


def test_the_installed_flower_has_the_internals_the_cap_relies_on():
    check_flower_internals()


def test_a_changed_flower_internal_fails_naming_the_version_and_the_internal(monkeypatch):
    import flwr.supercore.superexec.run_superexec as loop

    import vcmc.flower.superexec as se

    monkeypatch.setattr(loop, "_TASK_POLL_INTERVAL_ENV", "SOMETHING_ELSE")
    with pytest.raises(FlowerInternalsChanged, match=r"flwr 1\.42\.\d+ .*run_superexec: the poll interval"):
        check_flower_internals()
    monkeypatch.undo()
    monkeypatch.setitem(se._REPEATED, ("supernode/cli/flwr_clientapp.py", "flwr_clientapp"), "0" * 16)
    with pytest.raises(FlowerInternalsChanged, match="flwr_clientapp.py: flwr_clientapp: its code changed"):
        check_flower_internals()
    monkeypatch.setattr(se, "_flower_version", lambda: "1.43.0")
    with pytest.raises(FlowerInternalsChanged, match=r"flwr 1\.43\.0 .*expected 1\.42\.x"):
        check_flower_internals()


def test_slots_are_shared_across_processes_and_held_by_a_launched_process_until_it_exits(tmp_path):
    slots = LaunchSlots(tmp_path / "slots", 2)
    other = LaunchSlots(tmp_path / "slots", 2)           # another SuperExec of the host
    a, b = slots.try_acquire(), other.try_acquire()
    assert a is not None and b is not None and {a.index, b.index} == {0, 1}
    assert slots.try_acquire() is None and other.in_use() == 2
    child = subprocess.Popen(HOLD, stdin=subprocess.PIPE, pass_fds=(a.fd,))
    a.release()                                          # the child holds slot a now
    b.release()
    assert slots.in_use() == 1
    c = other.try_acquire()
    assert c is not None and slots.try_acquire() is None
    child.stdin.close()
    child.wait(30)                                       # however it ends, the kernel closes its copy
    assert slots.try_acquire() is not None
    c.release()
    with pytest.raises(ConfigError, match="in use with a cap of 2 ClientApps.*--max-clientapps 3"):
        LaunchSlots(tmp_path / "slots", 3)
    slots.close()
    other.close()
    LaunchSlots(tmp_path / "slots", 3).close()           # no SuperExec uses the folder: the cap may change


def test_the_executor_claims_only_with_a_free_slot_and_the_process_keeps_it(tmp_path, monkeypatch):
    import vcmc.flower.superexec as se

    monkeypatch.setattr(se, "SLOT_CHECK_SECONDS", 0.01)
    executor = HoldingExecutor(slots=LaunchSlots(tmp_path / "slots", 1), poll_interval=0.01,
                               log=lambda *a: None)
    types = {"clientapp"}
    assert executor.get_eligible_capacity(types) == (types, set())       # a slot is held for the claim
    assert executor.slots.in_use() == 1
    executor.reconcile()                                                 # no task was claimed: given back
    assert executor.slots.in_use() == 0
    executor.get_eligible_capacity(types)
    assert executor.launch(_spec(1)).status == "accepted"
    child = executor._children[0]
    assert executor.slots.in_use() == 1 and executor._reserved is None
    assert executor._wait_for_slot(0.2) is None                          # the ClientApp holds the only slot
    child.stdin.close()
    child.wait(30)
    executor.reconcile()
    slot = executor._wait_for_slot(5)
    assert slot is not None
    slot.release()
    executor.close()


def test_a_bundle_the_site_does_not_trust_is_never_started(tmp_path):
    executor = HoldingExecutor(slots=LaunchSlots(tmp_path / "slots", 1), trusted_bundles=["cd" * 32],
                               log=lambda *a: None)
    executor.get_eligible_capacity({"clientapp"})
    result = executor.launch(_spec(7, fab_hash="ab" * 32))
    assert result.status == "failed" and "is not one this site trusts" in result.message
    assert executor._children == [] and executor.slots.in_use() == 0
    executor.get_eligible_capacity({"clientapp"})
    assert executor.launch(_spec(8, fab_hash="CD" * 32)).status == "accepted"
    executor._children[0].stdin.close()
    executor._children[0].wait(30)
    executor.close()


def test_a_warm_clientapp_runs_flowers_clientapp_process_and_holds_its_slot_until_it_exits(tmp_path):
    """A ClientApp forked from the warm process (vcmc.flower.warm) runs Flower's ClientApp process with the
    command line it was given (it reaches the Runtime API named there) and holds the launch slot it was given
    until it ends, however it ends."""
    import os
    import signal
    import socket
    import time

    from vcmc.flower.warm import WarmLauncher

    with socket.socket() as api:                  # a Runtime API that accepts and never answers
        api.bind(("127.0.0.1", 0))
        api.listen(8)
        api.settimeout(120)
        slots = LaunchSlots(tmp_path / "slots", 1)
        slot = slots.try_acquire()
        child = WarmLauncher().launch(["--runtime-api-address", f"127.0.0.1:{api.getsockname()[1]}", "--token",
                                       "t" * 8, "--insecure"], os.environ, quiet=True, slot_fd=slot.fd)
        slot.release()
        assert slots.try_acquire() is None and slots.in_use() == 1          # the ClientApp holds the only slot
        conn, _ = api.accept()
        conn.settimeout(120)
        with conn:
            assert conn.recv(4096).startswith(b"POST ")                     # Flower's first request to the API
            assert child.poll() is None
            os.kill(child.process.pid, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        assert child.poll() == -signal.SIGKILL
        again = slots.try_acquire()
        assert again is not None
        again.release()
        slots.close()


def test_the_clientapp_command_is_flowers_with_vcmcs_launcher():
    from flwr.supercore.superexec.executor import SubprocessExecutor

    spec = _spec()
    captured = {}
    real = subprocess.Popen
    subprocess.Popen = lambda args, **kw: captured.setdefault("args", args)
    try:
        SubprocessExecutor().launch(spec)
    finally:
        subprocess.Popen = real
    flower = captured["args"]
    ours = CappedExecutor(slots=None, light_clientapp=True).command(spec)
    assert ours[:3] == [sys.executable, "-m", "vcmc.flower.clientapp_main"] and ours[3:] == flower[1:]
    assert CappedExecutor(slots=None, light_clientapp=False).command(spec) == flower


def test_the_launcher_parses_flwr_clientapps_command_line():
    from flwr.supernode.cli.flwr_clientapp import _parse_args_run_flwr_clientapp

    from vcmc.flower.clientapp_main import parser

    argv = ["--runtime-api-address", "127.0.0.1:9094", "--token", "abc", "--insecure", "--parent-pid", "7"]
    assert vars(parser().parse_args(argv)) == vars(_parse_args_run_flwr_clientapp().parse_args(argv))
    done = subprocess.run([sys.executable, "-c", "import sys, vcmc.flower.clientapp_main; "
                           "print('flwr.supernode.cli' in sys.modules)"], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False"


def test_node_config_text_is_read_as_flower_reads_it():
    from flwr.common.config import parse_config_args

    from vcmc.flower.node_config import parse_node_config

    text = ('data-path="/a b/c.csv" min-cluster-size=10 allow-strategies="contingency,rounds" round-to=5 '
            'dp-epsilon="none"')
    assert parse_node_config(text) == parse_config_args([text])
    with pytest.raises(ConfigError, match="TOML values, strings double-quoted"):
        parse_node_config("silo-name=unquoted")


def _vcmc(*args, timeout=120):
    return subprocess.run([str(Path(sys.executable).parent / "vcmc"), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_vcmc_supernode_help_and_its_commands(tmp_path):
    helped = _vcmc("supernode", "--help")
    assert helped.returncode == 0 and "--max-clientapps" in helped.stdout and "--trusted-bundle" in helped.stdout
    data, ca, key = tmp_path / "a.csv", tmp_path / "ca.crt", tmp_path / "site_a"
    for f in (data, ca, key):
        f.write_text("x\n")
    node = f'data-path="{data}" silo-name="site_a" min-cluster-size=10'
    done = _vcmc("supernode", "--superlink", "coordinator.example.org:9092", "--root-certificates", str(ca),
                 "--auth-key", str(key), "--node-config", node, "--port", "9101", "--max-clientapps", "2",
                 "--slots-dir", str(tmp_path / "slots"), "--trusted-bundle", "ab" * 32, "--dry-run")
    assert done.returncode == 0, done.stderr
    supernode, superexec = done.stdout.strip().splitlines()
    for part in ("--root-certificates", "--auth-supernode-private-key", "--isolation process", "--port 9101",
                 "--superexec-auth-secret-file SECRET_FILE", "--superlink coordinator.example.org:9092"):
        assert part in supernode
    for part in ("-m vcmc superexec", "--runtime-api-address 127.0.0.1:9101", "--max-clientapps 2",
                 f"--slots-dir {tmp_path / 'slots'}", f"--trusted-bundle {'ab' * 32}", "--parent-pid SUPERNODE_PID"):
        assert part in superexec
    # vcmc's SuperNode launcher and warm ClientApps unless the operator asks for Flower's own and a new interpreter
    assert " -m vcmc.flower.supernode_main " in supernode and "--cold" not in superexec
    done = _vcmc("supernode", "--superlink", "h:1", "--insecure", "--node-config", node, "--flower-supernode",
                 "--cold-clientapps", "--dry-run")
    supernode, superexec = done.stdout.strip().splitlines()
    assert supernode.split()[0].endswith("flower-supernode") and superexec.endswith("--cold-clientapps "
                                                                                    "--parent-pid SUPERNODE_PID")
    # mistakes are named before anything starts
    for bad, said in ((node + " min-clustre-size=5", "unknown key(s) ['min-clustre-size']"),
                      ('data-path="a.csv"', "'data-path' must be an absolute path"),
                      (f'data-path="{tmp_path / "none.csv"}"', "does not exist on this host")):
        done = _vcmc("supernode", "--superlink", "h:1", "--insecure", "--node-config", bad, "--dry-run")
        assert done.returncode == 1 and said in done.stderr, done.stderr
    done = _vcmc("supernode", "--superlink", "h:1", "--insecure", "--auth-key", str(key), "--node-config", node)
    assert done.returncode == 1 and "--auth-key needs TLS" in done.stderr
    assert _vcmc("superexec", "--check").returncode == 0


def test_the_node_config_check_knows_the_rounds_keys(tmp_path):
    from vcmc.flower.node_config import check_node_config, parse_node_config

    data, key, peers = tmp_path / "a.csv", tmp_path / "rounds.key", tmp_path / "peers.txt"
    for f in (data, key, peers):
        f.write_text("x\n")
    node = f'data-path="{data}" silo-name="site_a" rounds-key="{key}"'
    check_node_config(parse_node_config(f'{node} rounds-peers="{peers}"'))
    check_node_config(parse_node_config(f'{node} rounds-peers="site_b={"ab" * 32}"'))     # the lines inline
    for bad, said in ((f'{node} rounds-peers="peers.txt"', "'rounds-peers' must be an absolute path"),
                      (f'{node} rounds-peers="{tmp_path / "none.txt"}"', "does not exist on this host"),
                      (f'data-path="{data}" rounds-key="{tmp_path / "none.key"}"', "'rounds-key'")):
        with pytest.raises(ConfigError, match=re.escape(said)):
            check_node_config(parse_node_config(bad))


def test_the_supernode_launcher_asks_sooner_only_while_messages_come(monkeypatch):
    """vcmc.flower.supernode_main: Flower's SuperNode loop with its two pauses changed through the loop's ``time``:
    0.2 s between empty asks for 30 s after a message (then back to Flower's 3 s over 30 s), 0.1 s between looks
    for the reply; every other pause and name is the real module's. A changed loop is refused by name."""
    from types import SimpleNamespace

    import vcmc.flower.supernode_main as sm

    now = [1000.0]
    clock = sm.PollClock(SimpleNamespace(monotonic=lambda: now[0], sleep=lambda s: None, time=lambda: 5.0))
    assert clock.pause(3.0) == 3.0                              # no message yet: Flower's pause
    clock.received()
    assert clock.pause(3.0) == sm.ACTIVE_PAUSE_SECONDS and clock.pause(0.5) == sm.REPLY_PAUSE_SECONDS
    now[0] += sm.ACTIVE_SECONDS + sm.RAMP_SECONDS / 2
    assert clock.pause(3.0) == pytest.approx((sm.ACTIVE_PAUSE_SECONDS + 3.0) / 2)
    now[0] += sm.RAMP_SECONDS
    assert clock.pause(3.0) == 3.0 and clock.pause(7.0) == 7.0 and clock.time() == 5.0
    loop = SimpleNamespace(time=None, _pull_and_store_message=lambda run: run)
    installed = sm.install(loop)
    assert loop.time is installed and loop._pull_and_store_message(None) is None
    assert installed.pause(3.0) == 3.0
    assert loop._pull_and_store_message(7) == 7 and installed.pause(3.0) == sm.ACTIVE_PAUSE_SECONDS

    sm.check_supernode_internals()
    monkeypatch.setitem(sm._READ, "_push_messages", "0" * 16)
    with pytest.raises(FlowerInternalsChanged, match=r"flwr 1\.42\.\d+ .*_push_messages: its code changed.*"
                                                     "--flower-supernode"):
        sm.check_supernode_internals()


def test_the_superexec_claims_sooner_while_a_run_is_under_way(tmp_path, monkeypatch):
    """The SuperExec's pause between claims is the operator's poll interval when idle, ACTIVE_POLL_SECONDS for
    ACTIVE_SECONDS after its last launch, then back to the interval over RAMP_SECONDS (ramped_pause)."""
    import vcmc.flower.superexec as se

    assert se.ramped_pause(0.0, 5.0) == se.ACTIVE_POLL_SECONDS == se.ramped_pause(se.ACTIVE_SECONDS, 5.0)
    assert se.ramped_pause(se.ACTIVE_SECONDS + se.RAMP_SECONDS / 2, 5.0) == pytest.approx((5.0 + 0.2) / 2)
    assert se.ramped_pause(float("inf"), 5.0) == 5.0 and se.ramped_pause(0.0, 0.05) == 0.05
    from types import SimpleNamespace

    clock, slept = [100.0], []
    monkeypatch.setattr(se, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=slept.append))
    executor = HoldingExecutor(slots=None, poll_interval=5.0, log=lambda *a: None)
    types = {"clientapp"}
    executor.get_eligible_capacity(types)                  # the first poll: no pause
    clock[0] += 1.0
    executor.get_eligible_capacity(types)                  # idle: the rest of the interval
    assert slept == [pytest.approx(4.0)]
    assert executor.launch(_spec(1)).status == "accepted"
    executor.get_eligible_capacity(types)                  # a ClientApp just started: the active pace
    assert slept[-1] == pytest.approx(se.ACTIVE_POLL_SECONDS)
    clock[0] += se.ACTIVE_SECONDS + se.RAMP_SECONDS + 1.0
    executor.get_eligible_capacity(types)                  # long after it: the interval again (already waited)
    assert len(slept) == 2
    executor._children[0].stdin.close()
    executor._children[0].wait(30)
    executor.close()
