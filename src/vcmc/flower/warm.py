"""ClientApp processes forked from a warm process (docs/federation.md §3.6, "Warm ClientApps").

Flower 1.42 answers every message in a new ClientApp process, so every round of the global-informed rounds pays
an interpreter start and the import of Flower, NumPy, SciPy, numba and vcmc at every site: 1-3 CPU seconds per
message before any vcmc code runs (docs/results/flower/), against a few milliseconds of work for a round of a
few hundred rows. ``WarmLauncher`` keeps one process per SuperExec that has imported all of it once (Python's
``multiprocessing`` forkserver, ``PRELOAD``) and forks each ClientApp from it: the child is the process Flower's
launcher would have started (vcmc's ``clientapp_main`` with the same command line, the SuperExec's environment,
its output silenced when Flower asks), but it starts with its libraries loaded.

Why the standard library's forkserver and not a fork of the SuperExec: the SuperExec runs gRPC's threads, and a
fork of a threaded process may copy a lock held by another thread; the forkserver is a fresh single-threaded
interpreter started once, whose only work is to import and to fork. The launch slot's lock (``LaunchSlots``) goes
to the child as an open file description sent over the forkserver's socket (``multiprocessing.reduction.DupFd``,
SCM_RIGHTS), so the child holds the slot until it exits, as a ``subprocess.Popen`` child given ``pass_fds`` does.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence

__all__ = ["PRELOAD", "PROCESS_NAME", "WarmLauncher", "warm_available"]

PRELOAD = (
    "vcmc.federation._forkserver",              # first: a Ctrl-C while the warm process imports prints no traceback
    "vcmc.cli",                                 # the SuperExec's __main__ (``python -m vcmc``), re-run in the child
    "flwr.supernode.runtime.run_clientapp",     # Flower's ClientApp process (vcmc's launcher is left out: its
                                                # name in the warm process's command line would mark it a ClientApp)
    "flwr.clientapp",
    "vcmc.flower.client",                       # the handler, the node config, the records
    "vcmc.protocol.registry",
    "vcmc.silo.local",                          # the silo, its gate and endpoints
    "vcmc.silo.endpoints.rounds",
    "vcmc.pooled.chain",
    "vcmc.rows.rounds",
    "vcmc.mcmc.sampler",
    "arviz_stats",                              # the summary's diagnostics and the rounds' checkpoints
)
"""The modules the warm process imports once, so that no ClientApp imports them again: every module a round's
message needs (the heavy libraries come with them)."""

PROCESS_NAME = "vcmc-clientapp"
"""The name (``/proc/PID/comm``) of a ClientApp forked from the warm process, whose command line is the warm
process's: how an operator's ``ps -o comm`` or ``top`` tells them apart."""


def warm_available() -> bool:
    """Whether this platform has the forkserver start method (POSIX systems)."""
    return "forkserver" in multiprocessing.get_all_start_methods()


class _PassedFd:
    """An open file descriptor handed to the child through the forkserver (a duplicate of the same open file
    description: an ``flock`` on it is the parent's)."""

    def __init__(self, fd: int):
        self.fd = int(fd)

    def __reduce__(self):
        from multiprocessing import reduction

        return _received_fd, (reduction.DupFd(self.fd),)


def _received_fd(dup) -> int:
    return dup.detach()


def _clientapp(argv: list[str], env: dict[str, str], quiet: bool, slot_fd: int | None) -> None:
    """The child: the SuperExec's environment, output silenced if asked, then vcmc's ClientApp launcher. The slot's
    descriptor (``slot_fd``) is kept open, holding the slot, until the process exits."""
    del slot_fd
    _set_process_name(PROCESS_NAME)
    os.environ.clear()
    os.environ.update(env)
    if quiet:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    from vcmc.flower.clientapp_main import main

    main(argv)


def _set_process_name(name: str) -> None:
    """``prctl(PR_SET_NAME)``: the process's name in ``/proc/PID/comm`` (Linux; nothing elsewhere)."""
    import contextlib
    import ctypes

    # the C library's symbols are the process's own (find_library would start ldconfig, a fork of this one)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)    # 15: PR_SET_NAME


class WarmChild:
    """A launched ClientApp, with ``subprocess.Popen``'s ``poll`` (its exit code, None while it runs)."""

    def __init__(self, process):
        self.process = process
        self._code: int | None = None

    def poll(self) -> int | None:
        if self._code is None:
            self._code = self.process.exitcode
            if self._code is not None:
                self.process.close()
        return self._code


class WarmLauncher:
    """Forks ClientApp processes from one warm process (module docstring). The warm process starts at the first
    launch (or at ``start``) and ends with this process."""

    def __init__(self, preload: Sequence[str] = PRELOAD):
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(preload))
        self.launched = 0

    def start(self) -> None:
        """Start the warm process now (it imports ``PRELOAD``) rather than at the first message."""
        from multiprocessing import forkserver

        forkserver.ensure_running()

    def launch(self, argv: Sequence[str], env: Mapping[str, str], *, quiet: bool = False,
               slot_fd: int | None = None) -> WarmChild:
        """Fork a ClientApp running ``vcmc.flower.clientapp_main.main(argv)``; ``slot_fd`` is duplicated into it
        (the caller may close its own copy once this returns)."""
        process = self._context.Process(target=_clientapp, name="vcmc-clientapp", daemon=False,
                                        args=(list(argv), dict(env), bool(quiet),
                                              None if slot_fd is None else _PassedFd(slot_fd)))
        process.start()
        # not among multiprocessing's children: its exit handler would wait for every running ClientApp before the
        # SuperExec ends, where a ClientApp Flower started outlives it and ends with its parent monitor
        multiprocessing.process._children.discard(process)
        self.launched += 1
        return WarmChild(process)
