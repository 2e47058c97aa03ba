"""A SuperExec with a launch cap, for hosts that carry several sites (docs/federation.md §3.6).

Flower 1.42 runs every message a SuperNode receives in a new ClientApp process, started by the SuperNode's
SuperExec. The SuperExec's loop (``flwr.supercore.superexec.run_superexec``) asks its *executor* which task
types it has capacity for, then claims a pending task of those types from its SuperNode, then has the
executor launch the process. From the claim the new process has 30 s to fetch its input (Flower's
``HEARTBEAT_DEFAULT_INTERVAL``, not configurable), or its token expires, the task goes back to pending and
another process is started for it. Flower's subprocess executor always reports full capacity, so on a host
with many SuperNodes every round starts one process per site at the same moment; on a busy host they do not
all get through interpreter start-up and ``import flwr`` in 30 s, and the restarts add to the load. A task
that is never claimed stays pending with no clock running.

This module is Flower's own SuperExec loop with another executor (Flower's ``Executor`` interface, the
extension point its Kubernetes executor uses for its ``active-pod-budget``):

- **the cap**: at most ``capacity`` ClientApp processes alive at once on the host, counted across every
  SuperExec that shares the slots folder (``LaunchSlots``: one lock file per slot). The capacity check
  takes a free slot before the SuperExec claims a task (and waits while none is free, so no task is claimed
  that could not start at once); the launched process inherits the slot's lock and holds it until it exits,
  however it ends; a slot taken for a claim that found no task is given back before the next poll;
- the pause between polls is the executor's (Flower's own pause is set to its minimum), so that a slot is
  held only for the one request that claims a task, never through the pause;
- **a lighter ClientApp process** (``vcmc.flower.clientapp_main``: Flower's ``flwr-clientapp`` without the
  import of the SuperNode's command line), unless ``light_clientapp=False``;
- **the pinned bundle**: with ``trusted_bundles``, a task whose app bundle (FAB) hash is not one of them is
  never launched (the SuperExec logs the refusal; the server sees no reply and its round times out).

The executor is given to Flower's ``run_superexec`` in place of the one its factory would build (the one
name this module substitutes, in its own process). ``check_flower_internals`` verifies, before anything
starts, that the Flower installed still has every internal this relies on, and fails naming the Flower
version and the internal otherwise; the upper pin of Flower in pyproject.toml keeps a new minor version out.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import fcntl
import hashlib
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from vcmc.exceptions import ConfigError, FlowerInternalsChanged

__all__ = ["ACTIVE_POLL_SECONDS", "FLOWER_SERIES", "CappedExecutor", "LaunchSlots", "Slot", "check_flower_internals",
           "clientapp_command", "default_slots_dir", "function_digest", "internals_changed", "ramped_pause",
           "run_superexec"]

FLOWER_SERIES = "1.42."
"""The Flower versions whose SuperExec internals were read for this module (``flwr>=1.42,<1.43``)."""

SLOT_CHECK_SECONDS = 0.25
"""While every slot is taken, how often a SuperExec looks for a free one (a few ``flock`` calls)."""

UNRESERVED_LAUNCH_GRACE_SECONDS = 10.0
"""A claimed task with no slot reserved (never expected: the capacity check reserves one) waits at most this
long for a slot, then starts over the cap: a claimed task that is not started within 30 s is started again
later, which costs more than one process over the cap."""

WAITING_LOG_EVERY_SECONDS = 60.0

ACTIVE_POLL_SECONDS = 0.2
"""The pause between two polls (the SuperExec's claims, the SuperNode's asks for a message) while a run is under
way: ``ACTIVE_SECONDS`` after this site's last message, growing back to the idle pause over ``RAMP_SECONDS``
(``ramped_pause``). A round of the global-informed rounds is one message per site a few seconds apart, so the
next one comes while the pause is short; an idle site polls as often as it would otherwise."""

ACTIVE_SECONDS = 30.0
RAMP_SECONDS = 30.0


def ramped_pause(quiet: float, idle: float, active: float = ACTIVE_POLL_SECONDS) -> float:
    """The pause before the next poll, ``quiet`` seconds after the site's last message: ``active`` for
    ``ACTIVE_SECONDS``, then growing linearly to ``idle`` over ``RAMP_SECONDS`` (``idle`` if that is shorter)."""
    if active >= idle:
        return idle
    if quiet <= ACTIVE_SECONDS:
        return active
    return active + min((quiet - ACTIVE_SECONDS) / RAMP_SECONDS, 1.0) * (idle - active)

# AST digests of the Flower functions whose behaviour vcmc repeats (flwr 1.42.0), without their docstrings:
# the subprocess executor's launch (the command line of a task process, which CappedExecutor builds) and the
# flwr-clientapp command (which vcmc.flower.clientapp_main repeats without importing its package).
_REPEATED = {
    ("supercore/superexec/executor/subprocess_executor.py", "launch"): "757b6b002b095ff9",
    ("supernode/cli/flwr_clientapp.py", "flwr_clientapp"): "8f2dcd0eb5d16e40",
    ("supernode/cli/flwr_clientapp.py", "_parse_args_run_flwr_clientapp"): "e65153f854cffa6c",
}

# The order of the steps of Flower's SuperExec loop this executor relies on (flwr 1.42:
# flwr/supercore/superexec/run_superexec.py, run_superexec): capacity, then claim, then launch, then pause.
_LOOP_ORDER = ("task_poll_interval = _get_task_poll_interval()", "executor = get_executor(", "executor.reconcile()",
               "executor.get_eligible_capacity(", "client.AcquireTask(", "plugin.launch_task(",
               "time.sleep(task_poll_interval)")


def _flower_version() -> str:
    try:
        from importlib.metadata import version

        return version("flwr")
    except Exception:  # noqa: BLE001 - not installed, or no metadata
        return "not installed"


def internals_changed(internal: str, what: str, *, part: str = "vcmc's launch cap",
                      instead: str = "start the SuperNode without vcmc's SuperExec (flower-supernode --isolation "
                                     "subprocess, docs/federation.md §3.3), which has no launch cap"
                      ) -> FlowerInternalsChanged:
    """The error of a Flower internal that ``part`` of vcmc relies on and the installed Flower lacks."""
    return FlowerInternalsChanged(
        f"{part} relies on Flower {FLOWER_SERIES}x internals that the installed flwr {_flower_version()} does not "
        f"have as expected: {internal}: {what}. Install flwr>=1.42,<1.43 (vcmc's pin), or {instead}")


def function_digest(source: str, name: str) -> str | None:
    """sha256 (16 hex digits) of the AST of the function ``name`` in ``source``, without its docstring; None
    when there is no such function. Layout and comments do not change it; any change of code does."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
            return hashlib.sha256(ast.dump(node).encode()).hexdigest()[:16]
    return None


def check_flower_internals() -> None:
    """Raise ``FlowerInternalsChanged`` (naming the Flower version and the internal) unless the installed
    Flower has every internal the capped SuperExec and the lighter ClientApp launcher rely on."""
    version = _flower_version()
    if not version.startswith(FLOWER_SERIES):
        raise internals_changed("the version", f"expected {FLOWER_SERIES}x, whose SuperExec was read for vcmc")
    try:
        import flwr
        import flwr.supercore.superexec.run_superexec as loop
        from flwr.supercore.constant import (
            TASK_TYPE_TO_APPIO_API_ADDRESS_ARG,
            TASK_TYPE_TO_COMMAND,
            ExecutorType,
            TaskType,
        )
        from flwr.supercore.servicer.runtime import runtime_handlers
        from flwr.supercore.superexec.executor.types import ExecutionSpec, LaunchResult
        from flwr.supercore.superexec.plugin.base_exec_plugin import BaseExecPlugin
        from flwr.supernode import start_client_internal
    except ImportError as err:
        raise internals_changed("a module", f"{err}") from None
    name = "flwr.supercore.superexec.run_superexec"
    for attr in ("get_executor", "run_superexec", "_get_task_poll_interval"):
        if not callable(getattr(loop, attr, None)):
            raise internals_changed(name, f"no function {attr!r}")
    if getattr(loop, "_TASK_POLL_INTERVAL_ENV", None) != "FLWR_SUPEREXEC_TASK_POLL_INTERVAL":
        raise internals_changed(name, "the poll interval is no longer read from FLWR_SUPEREXEC_TASK_POLL_INTERVAL")
    if not float(getattr(loop, "_MIN_TASK_POLL_INTERVAL_SECONDS", 1.0)) <= 0.05:
        raise internals_changed(name, "the least poll interval is no longer at most 0.05 s")
    params = set(inspect.signature(loop.run_superexec).parameters)
    wanted = {"runtime_api_address", "insecure", "root_certificates_path", "superexec_auth_secret", "parent_pid",
              "runtime_dependency_install", "executor_type"}
    if not wanted <= params:
        raise internals_changed(f"{name}.run_superexec", f"no parameters {sorted(wanted - params)}")
    source = inspect.getsource(loop.run_superexec)
    at = [source.find(step) for step in _LOOP_ORDER]
    if min(at) < 0 or at != sorted(at):
        raise internals_changed(f"{name}.run_superexec", "the loop no longer reads its pause, builds its executor "
                                "with get_executor, then checks capacity, claims a task, launches it and pauses, in "
                                "that order")
    handler = inspect.getsource(runtime_handlers.acquire_task)
    if "if not supported_types and not agentapp_fab_hashes:" not in handler:
        raise internals_changed("flwr.supercore.servicer.runtime.runtime_handlers.acquire_task",
                                "a claim with no capacity (no task types) no longer returns without a task")
    if "self.executor.launch(" not in inspect.getsource(BaseExecPlugin.launch_task):
        raise internals_changed("BaseExecPlugin.launch_task", "the task is no longer launched by its executor")
    spec_fields = {f.name for f in dataclasses.fields(ExecutionSpec)}
    wanted = {"task_type", "runtime_api_address", "token", "insecure", "root_certificates_path",
              "runtime_dependency_install", "parent_pid", "suppress_output", "task_id", "fab_hash"}
    if not wanted <= spec_fields:
        raise internals_changed("ExecutionSpec", f"no fields {sorted(wanted - spec_fields)}")
    if not (callable(getattr(LaunchResult, "accepted", None)) and callable(getattr(LaunchResult, "failed", None))):
        raise internals_changed("LaunchResult", "no accepted() or failed()")
    if getattr(ExecutorType, "SUBPROCESS", None) is None or TaskType.CLIENT_APP not in TASK_TYPE_TO_COMMAND \
            or TaskType.CLIENT_APP not in TASK_TYPE_TO_APPIO_API_ADDRESS_ARG:
        raise internals_changed("flwr.supercore.constant", "no command for the ClientApp task type")
    supernode = inspect.getsource(start_client_internal.start_client_internal)
    guard = supernode.find("if isolation == ISOLATION_MODE_SUBPROCESS:\n        runtime_address")
    if guard < 0 or supernode.find('command = ["flower-superexec"]') < guard:
        raise internals_changed("flwr.supernode.start_client_internal", "a SuperNode started with --isolation "
                                "process no longer leaves the SuperExec to its operator")
    root = Path(flwr.__file__).parent
    for (path, function), digest in _REPEATED.items():
        try:
            text = (root / path).read_text(encoding="utf-8")
        except OSError:
            raise internals_changed(f"flwr/{path}", "the file is gone") from None
        if function_digest(text, function) != digest:
            raise internals_changed(f"flwr/{path}: {function}", "its code changed, and vcmc repeats what it does "
                                    "(vcmc.flower.superexec, vcmc.flower.clientapp_main)")


def default_slots_dir() -> Path:
    """Where the SuperExecs of one user on one host share their slots unless told otherwise."""
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(base) / f"vcmc-launch-slots-{os.getuid()}"


@dataclasses.dataclass
class Slot:
    """One held slot: an open file description of the slot's lock file holding its ``flock``. A process
    started with ``fd`` among its ``pass_fds`` shares the description, so the lock is held until every
    process holding it has closed it, and the kernel closes it when a process ends however it ends."""

    fd: int
    index: int

    def release(self) -> None:
        """Close this process's copy (the slot is free once no launched process holds it either)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class LaunchSlots:
    """``capacity`` slots shared by every process that opens the same ``directory`` (one user, one host).

    The folder holds ``slot-<i>.lock`` (one per slot, locked with ``flock`` while taken), ``slots.json``
    (the capacity, so that SuperExecs given different caps are told) and ``members.lock`` (held shared by
    every live ``LaunchSlots``: the capacity may change only when no SuperExec uses the folder).
    """

    def __init__(self, directory, capacity: int):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ConfigError(f"the launch cap (--max-clientapps) must be a whole number >= 1; got {capacity!r}")
        self.directory = Path(directory)
        self.capacity = capacity
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._member = os.open(self.directory / "members.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise ConfigError(f"the launch slots folder (--slots-dir) {str(self.directory)!r} cannot be used: "
                              f"{err.strerror or err}") from None
        self._agree_on_capacity()

    def _agree_on_capacity(self) -> None:
        from vcmc.atomic import atomic_write_json

        record = self.directory / "slots.json"
        try:
            fcntl.flock(self._member, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except BlockingIOError:
            alone = False
        if alone:        # no live SuperExec uses the folder: this one sets the capacity
            atomic_write_json(record, {"capacity": self.capacity})
            fcntl.flock(self._member, fcntl.LOCK_SH)
            return
        fcntl.flock(self._member, fcntl.LOCK_SH)
        try:
            held = int(json.loads(record.read_text(encoding="utf-8"))["capacity"])
        except (OSError, ValueError, KeyError, TypeError):
            held = None
        if held is None:          # the folder's first member is writing it: wait for it
            time.sleep(0.5)
            try:
                held = int(json.loads(record.read_text(encoding="utf-8"))["capacity"])
            except (OSError, ValueError, KeyError, TypeError):
                raise ConfigError(f"the launch slots folder {str(self.directory)!r} has no readable slots.json "
                                  "while other SuperExecs use it; remove the folder when none runs") from None
        if held != self.capacity:
            os.close(self._member)
            raise ConfigError(f"the launch slots folder {str(self.directory)!r} is in use with a cap of {held} "
                              f"ClientApps, and this SuperExec was given --max-clientapps {self.capacity}: give "
                              "every SuperNode of the host the same cap, or another --slots-dir")

    def _path(self, index: int) -> Path:
        return self.directory / f"slot-{index}.lock"

    def try_acquire(self) -> Slot | None:
        """A free slot, held by this process (``Slot.release``), or None when all are taken."""
        for i in range(self.capacity):
            fd = os.open(self._path(i), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return Slot(fd, i)
        return None

    def in_use(self) -> int:
        """Slots taken at this instant (by ClientApps or by a SuperExec claiming a task)."""
        taken = 0
        for i in range(self.capacity):
            fd = os.open(self._path(i), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                taken += 1
            finally:
                os.close(fd)
        return taken

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._member)
        self._member = -1


def clientapp_command(light: bool = True) -> list[str]:
    """The program a ClientApp task runs: vcmc's lighter launcher, or Flower's own ``flwr-clientapp``."""
    return [sys.executable, "-m", "vcmc.flower.clientapp_main"] if light else ["flwr-clientapp"]


class CappedExecutor:
    """Flower's subprocess executor with a launch cap (Flower's ``Executor`` interface, flwr 1.42).

    Parameters
    ----------
    slots : LaunchSlots or None
        The host's slots; None: no cap (the lighter launcher and the bundle check only).
    poll_interval : float
        Seconds between two claims of this SuperExec when idle (Flower's ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``,
        whose own pause ``run_superexec`` sets to its minimum); ``ACTIVE_POLL_SECONDS`` while a run is under way
        (``ramped_pause``).
    light_clientapp : bool
        Start ClientApps with ``vcmc.flower.clientapp_main`` (default) or Flower's ``flwr-clientapp``.
    trusted_bundles : iterable of str
        sha256 hashes of the app bundles (FABs) this site runs; empty: any.
    child_env : dict, optional
        Environment of the launched processes (default: this process's).
    warm : bool
        Fork the lighter launcher's ClientApps from a warm process that has Flower and vcmc imported
        (``vcmc.flower.warm``; default) instead of starting a new interpreter for each message. Only with
        ``light_clientapp`` and where the platform has the forkserver start method.
    """

    def __init__(self, *, slots: LaunchSlots | None, poll_interval: float = 1.0, light_clientapp: bool = True,
                 trusted_bundles: Iterable[str] = (), child_env: dict | None = None, log=None, warm: bool = True):
        from vcmc.flower.warm import WarmLauncher, warm_available

        self.slots = slots
        self.poll_interval = float(poll_interval)
        self.light_clientapp = bool(light_clientapp)
        self.warm = WarmLauncher() if warm and light_clientapp and warm_available() else None
        self.trusted_bundles = frozenset(h.strip().lower() for h in trusted_bundles if h.strip())
        self.child_env = child_env
        self._log = log or _flower_log
        self._reserved: Slot | None = None
        self._last_poll = float("-inf")
        self._last_launch = float("-inf")
        self._children: list[subprocess.Popen] = []
        self.launched = 0
        self.over_cap = 0
        self.refused = 0
        self.after_first_poll = None        # called once, when the first claim request was answered
        self._polls = 0
        self._bundles_seen: set[str] = set()

    # -- Flower's Executor interface ------------------------------------------------------------------

    def reconcile(self) -> None:
        """Between polls: give back a slot taken for a claim that found no task; reap ended processes."""
        self._release_reserved()
        self._children = [p for p in self._children if p.poll() is None]

    def get_eligible_capacity(self, supported_task_types, *, insecure: bool = False,
                              root_certificates_path: str | None = None):
        """After this SuperExec's pause, hold a free slot (waiting while none is free) and report capacity
        for every task type; Flower then claims at most one task."""
        del insecure, root_certificates_path
        self._release_reserved()
        self._polls += 1
        if self._polls == 2 and self.after_first_poll is not None:
            self.after_first_poll()
        now = time.monotonic()
        pause = self._last_poll + ramped_pause(now - self._last_launch, self.poll_interval) - now
        if pause > 0:
            time.sleep(pause)
        if self.slots is not None:
            self._reserved = self._wait_for_slot(None)
        self._last_poll = time.monotonic()
        return set(supported_task_types), set()

    def wait_for_capacity(self, task_type=None, *, fab_hash: str | None = None, insecure: bool = False,
                          root_certificates_path: str | None = None) -> None:
        """Return once a slot is free (without holding it)."""
        del task_type, fab_hash, insecure, root_certificates_path
        if self.slots is not None:
            self._wait_for_slot(None).release()

    def launch(self, spec):
        """Start the task's process with the reserved slot, which the process then holds until it exits."""
        from flwr.supercore.superexec.executor.types import LaunchResult

        if spec.fab_hash and spec.fab_hash not in self._bundles_seen:     # the value --trusted-bundle pins
            self._bundles_seen.add(spec.fab_hash)
            self._log("INFO", "vcmc SuperExec: a task of the app bundle (FAB) sha256 %s", spec.fab_hash)
        refusal = self._refusal(spec)
        if refusal is not None:
            self._release_reserved()
            self.refused += 1
            self._log("ERROR", "vcmc SuperExec: task %d not launched: %s", spec.task_id, refusal)
            return LaunchResult.failed(refusal)
        slot, self._reserved = self._reserved, None
        if slot is None and self.slots is not None:
            slot = self._wait_for_slot(UNRESERVED_LAUNCH_GRACE_SECONDS)
            if slot is None:
                self.over_cap += 1
                self._log("WARNING", "vcmc SuperExec: task %d started over the cap of %d ClientApps (no slot freed "
                          "within %g s of its claim)", spec.task_id, self.slots.capacity,
                          UNRESERVED_LAUNCH_GRACE_SECONDS)
        args = self.command(spec)
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} if spec.suppress_output else {}
        try:
            if self.warm is not None and self._is_clientapp(spec):
                head = len(clientapp_command(True))
                self._children.append(self.warm.launch(args[head:], os.environ if self.child_env is None
                                                       else self.child_env, quiet=spec.suppress_output,
                                                       slot_fd=None if slot is None else slot.fd))
            else:
                self._children.append(subprocess.Popen(args, pass_fds=() if slot is None else (slot.fd,),  # noqa: S603
                                                       env=self.child_env, **quiet))
        except OSError as err:
            return LaunchResult.failed(f"could not start {args[0]!r}: {err.strerror or err}")
        finally:
            if slot is not None:
                slot.release()
        self.launched += 1
        self._last_launch = time.monotonic()
        return LaunchResult.accepted()

    def close(self) -> None:
        self._release_reserved()
        if self.slots is not None:
            self.slots.close()

    # -- helpers --------------------------------------------------------------------------------------

    def command(self, spec) -> list[str]:
        """The task process's command line: Flower's subprocess executor's (flwr 1.42
        ``SubprocessExecutor.launch``), with vcmc's lighter launcher for a ClientApp."""
        from flwr.supercore.constant import TASK_TYPE_TO_APPIO_API_ADDRESS_ARG, TASK_TYPE_TO_COMMAND, TaskType

        head = (clientapp_command(self.light_clientapp) if spec.task_type == TaskType.CLIENT_APP
                else [TASK_TYPE_TO_COMMAND[spec.task_type]])
        args = [*head, TASK_TYPE_TO_APPIO_API_ADDRESS_ARG[spec.task_type], spec.runtime_api_address,
                "--token", spec.token]
        if spec.insecure:
            args.append("--insecure")
        elif spec.root_certificates_path is not None:
            args.extend(["--root-certificates", spec.root_certificates_path])
        if spec.parent_pid is not None:
            args.extend(["--parent-pid", str(spec.parent_pid)])
        if spec.runtime_dependency_install:
            args.append("--allow-runtime-dependency-installation")
        return args

    @staticmethod
    def _is_clientapp(spec) -> bool:
        from flwr.supercore.constant import TaskType

        return spec.task_type == TaskType.CLIENT_APP

    def _refusal(self, spec) -> str | None:
        """Why a task must not run on this site: the pinned-bundle check (docs/federation.md §3.7)."""
        if not self.trusted_bundles:
            return None
        got = (spec.fab_hash or "").lower()
        if got not in self.trusted_bundles:
            return (f"its app bundle (FAB sha256 {got or 'unknown'}) is not one this site trusts "
                    f"(--trusted-bundle {', '.join(sorted(self.trusted_bundles))})")
        return None

    def _release_reserved(self) -> None:
        if self._reserved is not None:
            self._reserved.release()
            self._reserved = None

    def _wait_for_slot(self, timeout: float | None) -> Slot | None:
        t0 = said = time.monotonic()
        while (slot := self.slots.try_acquire()) is None:
            now = time.monotonic()
            if timeout is not None and now - t0 >= timeout:
                return None
            if now - said >= WAITING_LOG_EVERY_SECONDS:
                said = now
                self._log("INFO", "vcmc SuperExec: waiting %.0f s for one of the host's %d ClientApp slots",
                          now - t0, self.slots.capacity)
            time.sleep(SLOT_CHECK_SECONDS)
        return slot


def _flower_log(level: str, message: str, *args) -> None:
    """A line in the SuperExec's log, through Flower's logger (the format of the SuperExec's own lines)."""
    import logging

    from flwr.supercore import log

    log(getattr(logging, level), message, *args)


def run_superexec(runtime_api_address: str, *, insecure: bool = False, root_certificates: str | None = None,
                  auth_secret_file: str | None = None, parent_pid: int | None = None, max_clientapps: int = 0,
                  slots_dir=None, poll_interval: float | None = None, trusted_bundles: Iterable[str] = (),
                  light_clientapp: bool = True, warm: bool = True, remove_after_start=None) -> None:
    """Run Flower's SuperExec loop for the SuperNode at ``runtime_api_address`` with ``CappedExecutor``
    (``max_clientapps`` 0: no cap). Blocks until the SuperExec ends (a signal, or its ``parent_pid`` ends).

    ``remove_after_start``: a folder (``vcmc supernode``'s, holding the session's SuperExec secret) removed once
    the first claim request was answered: the SuperNode has read the secret by then, and so has this process."""
    check_flower_internals()
    import flwr.supercore.superexec.run_superexec as loop
    from flwr.supercore.auth import load_superexec_auth_secret
    from flwr.supercore.constant import ExecutorType
    from flwr.supercore.utils import disable_process_dumping

    if isinstance(max_clientapps, bool) or not isinstance(max_clientapps, int) or max_clientapps < 0:
        raise ConfigError(f"--max-clientapps must be a whole number >= 0 (0: no cap); got {max_clientapps!r}")
    env_name = loop._TASK_POLL_INTERVAL_ENV
    inherited = os.environ.get(env_name)
    if poll_interval is None:
        try:
            poll_interval = float(inherited) if inherited else 1.0
        except ValueError:
            raise ConfigError(f"{env_name} must be a number of seconds; got {inherited!r}") from None
    if not 0.01 <= float(poll_interval) <= 60:
        raise ConfigError(f"--poll-interval must be between 0.01 and 60 seconds (Flower's range); "
                          f"got {poll_interval!r}")
    disable_process_dumping(strict=False)
    import logging

    logging.getLogger("flwr").propagate = False      # Flower's logger has its own handler: each line once
    secret = None
    if auth_secret_file is not None:
        try:
            secret = load_superexec_auth_secret(secret_file=auth_secret_file)
        except ValueError as err:
            raise ConfigError(f"--superexec-auth-secret-file: {err}") from None
    slots = None
    if max_clientapps:
        slots = LaunchSlots(default_slots_dir() if slots_dir is None else slots_dir, max_clientapps)
    child_env = dict(os.environ)
    # the pause between polls is the executor's: Flower's own pause is set to its least value
    os.environ[env_name] = f"{loop._MIN_TASK_POLL_INTERVAL_SECONDS:g}"
    executor = CappedExecutor(slots=slots, poll_interval=float(poll_interval), light_clientapp=light_clientapp,
                              trusted_bundles=trusted_bundles, child_env=child_env, warm=warm)
    if executor.warm is not None:
        executor.warm.start()       # its imports now, not in the first message's time
    if remove_after_start is not None:
        import atexit
        import shutil

        def remove() -> None:
            shutil.rmtree(remove_after_start, ignore_errors=True)

        executor.after_first_poll = remove
        atexit.register(remove)
    loop.get_executor = lambda *args, **kwargs: executor      # Flower's loop, this executor (checked above)
    _flower_log("INFO", "vcmc SuperExec: %s; a poll every %g s; ClientApps started with %s%s%s",
                f"at most {max_clientapps} ClientApps at once on this host (slots in {slots.directory})" if slots
                else "no launch cap", float(poll_interval), " ".join(clientapp_command(light_clientapp)),
                ", forked from a warm process" if executor.warm is not None else "",
                f"; trusted bundles {', '.join(sorted(executor.trusted_bundles))}" if executor.trusted_bundles else "")
    loop.run_superexec(runtime_api_address=runtime_api_address, insecure=insecure,
                       root_certificates_path=root_certificates, superexec_auth_secret=secret, parent_pid=parent_pid,
                       runtime_dependency_install=False, executor_type=ExecutorType.SUBPROCESS)
