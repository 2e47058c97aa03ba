"""Transports: how the server reaches its silos. The algorithm never knows which one it uses.

``Transport.call`` sends one request per named silo and returns, per silo, either its reply or a
``SiloFailure`` with a sanitised reason; it never raises because one silo failed (what to do about a
failure is ``vcmc.federation.faults.gather``'s job, under the user's ``FaultPolicy``).

- ``InProcessTransport``: ``LocalSilo`` objects in this process, called one after the other. Every
  request and reply is encoded with ``to_arrays()`` and decoded again (``roundtrip=True``), so an
  in-process run exercises exactly the encoding the other transports use.
- ``ProcessPoolTransport``: long-lived worker processes (one per silo, or at most ``max_workers`` each
  hosting several silos), holding the silos' ``LocalSilo`` objects (state such as the local partition
  persists between calls); workers run in parallel; the encoded messages travel through pipes. Same seed,
  same replies as in-process: the silo's random stream comes in the request.
- ``FlowerTransport`` (``vcmc.federation.flower``): silos are Flower SuperNodes.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import wait as wait_connections
from typing import Protocol, runtime_checkable

from vcmc.config import PrivacyConfig
from vcmc.exceptions import ConfigError, NotFittedError, SiloFailure
from vcmc.protocol import ErrorReply, HelloReply, HelloRequest, Message, decode_message
from vcmc.silo.errors import sanitise_exception

log = logging.getLogger("vcmc.federation")

def reply_to_result(silo: str, reply: Message) -> Message | SiloFailure:
    """Map an ``ErrorReply`` to a ``SiloFailure`` naming the silo; pass any other reply through."""
    if isinstance(reply, ErrorReply):
        return SiloFailure(silo, f"{reply.error_type}: {reply.reason}")
    return reply


@runtime_checkable
class Transport(Protocol):
    """How the server reaches the silos (docs/design.md §12.1).

    Attributes
    ----------
    silos : tuple of str
        Names of the silos, in the order the server uses for seeds and results.
    own_session : bool
        Whether every silo is in the analyst's own session (``SiloPolicy.own_data``); it decides the
        auto rounds (``aggregation.rounds = 0``, ``vcmc.rounds.plan``). A transport without it counts as a
        deployment's.
    """

    silos: tuple[str, ...]

    def call(self, requests: Mapping[str, Message], *,
             timeout: float | None = None) -> dict[str, Message | SiloFailure]:
        """Send ``requests[name]`` to each named silo (in parallel where possible).

        Returns one entry per requested silo: its reply, or a ``SiloFailure`` (sanitised reason) if it
        failed, timed out or sent something that does not decode. Never raises for a silo's failure.
        """
        ...

    def close(self) -> None:
        """Release the silos' resources (processes, connections). Idempotent."""
        ...


class TransportBase:
    silos: tuple[str, ...] = ()
    # Whether every silo is in the analyst's own session (SiloPolicy.own_data: every row is the analyst's),
    # and whether every silo can take part in the rounds (in a deployment: its keys are set, which its hello
    # says), which decide the auto rounds (vcmc.rounds.plan). A deployment's transport says no to the first.
    own_session: bool = False
    rounds_ready: bool | None = None

    @property
    def releases(self):
        """The noised releases this transport received from each silo (``vcmc.federation.accounting``)."""
        from vcmc.federation.accounting import ReleaseLedger

        if "_releases" not in self.__dict__:
            self._releases = ReleaseLedger()
        return self._releases

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        pass

    def _check_names(self, requests: Mapping[str, Message]) -> None:
        unknown = [n for n in requests if n not in self.silos]
        if unknown:
            raise ValueError(f"requests name unknown silos {unknown}; this transport has {list(self.silos)}")


def _min_peers(silo) -> int:
    """The fewest participants a deployment's silo takes part in rounds with (its operator's ``min-peers``)."""
    policy = getattr(getattr(silo, "gate", None), "policy", None)
    return int(getattr(policy, "min_peers", 1))


class InProcessTransport(TransportBase):
    """Silos that are objects in this process (``LocalSilo`` or anything with ``name`` and ``handle``).

    Parameters
    ----------
    silos : sequence of LocalSilo
        The silos, in the server's order. Names must be unique.
    roundtrip : bool
        Encode every request and reply with ``to_arrays()`` and decode it again (default True), so that a
        malformed or wrong-version message is caught here exactly as with the other transports.

    Notes
    -----
    Calls run one after the other; ``timeout`` cannot interrupt a call in the same process and is
    ignored. A failing silo's original exception is chained as the ``SiloFailure``'s ``__cause__`` (the
    traceback stays in this process; the reason text is sanitised like any other transport's).
    """

    def __init__(self, silos: Sequence, *, roundtrip: bool = True):
        names = [s.name for s in silos]
        if len(set(names)) != len(names):
            raise ConfigError(f"silo names must be unique; got {names}")
        self._silos = {s.name: s for s in silos}
        self.silos = tuple(names)
        self.roundtrip = roundtrip
        self.own_session = all(bool(getattr(s, "own_session", False)) for s in silos)
        # a deployment's silo takes part in the rounds with its keys and at least its operator's min-peers
        # participants (it refuses the start otherwise, which would fail the run: docs/federation.md)
        self.rounds_ready = all(bool(getattr(s, "own_session", False))
                                or (getattr(s, "rounds_key", None) is not None and len(silos) >= _min_peers(s))
                                for s in silos)

    def silo(self, name: str):
        """The in-process silo object (tests and the in-process API read ``assignments`` from it)."""
        return self._silos[name]

    def call(self, requests: Mapping[str, Message], *,
             timeout: float | None = None) -> dict[str, Message | SiloFailure]:
        self._check_names(requests)
        out: dict[str, Message | SiloFailure] = {}
        for name, request in requests.items():
            silo = self._silos[name]
            try:
                req = decode_message(request.to_arrays()) if self.roundtrip else request
                reply = silo.handle(req)
            except Exception as exc:  # noqa: BLE001 - any silo error becomes a SiloFailure
                failure = reply_to_result(name, sanitise_exception(exc, request.KIND))
                failure.__cause__ = exc
                out[name] = failure
                continue
            if self.roundtrip:
                try:
                    reply = decode_message(reply.to_arrays())
                except Exception as exc:  # noqa: BLE001
                    out[name] = SiloFailure(name, f"malformed reply to {request.KIND}: "
                                                  f"{sanitise_exception(exc).reason}")
                    continue
            out[name] = reply_to_result(name, reply)
        return out

    def local_assignments(self) -> dict[str, object]:
        """Global label of every row, per silo (after an assign request); only for silos in this process."""
        return {n: s.assignments for n, s in self._silos.items()
                if getattr(s, "assignments", None) is not None}

    def local_memberships(self) -> dict[str, object]:
        """Membership of every row in every global cluster, per silo (after an assign request); like
        ``local_assignments``, only for silos in this process and never through a boundary message."""
        return {n: s.memberships for n, s in self._silos.items()
                if getattr(s, "memberships", None) is not None}

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------------------
# Process pool


_ASSIGNMENTS = "__local_assignments__"
_MEMBERSHIPS = "__local_memberships__"
_PRELOAD = ["vcmc.federation._forkserver", "vcmc.silo.local", "vcmc.mcmc.apply", "vcmc.silo.build_summary",
            "vcmc.mcmc.diagnostics", "vcmc.rows.divergence", "vcmc.rows.counts", "vcmc.rows.memberships",
            "vcmc.rows.ppc", "arviz"]
_PROGRESS = "__progress__"
# A call's requests to one worker travel as one pickle: arrays the requests share (a round's weights and profiles,
# the same draw for every silo) are then pickled, written and read once per worker instead of once per silo.
_BATCH = "__batch__"


class _PipeProgress:
    """Forwards a silo's Gibbs progress (iterations done) to the server's bar over the worker's pipe.

    Only a count crosses, and only inside one machine's process pool (never a boundary message)."""

    def __init__(self, conn, name: str):
        self.conn = conn
        self.name = name

    def __call__(self, n: int) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.conn.send((_PROGRESS, self.name, int(n)))


def _worker_main(conn, hosted, jobs: int, report_progress: bool = False, state_dir=None) -> None:
    """Body of one worker process: build its silos' ``LocalSilo`` objects, say hello for each, then answer
    requests ``(silo name, encoded request)`` one at a time until told to stop.

    ``hosted`` lists ``(name, spec, privacy)``. The server may send several requests before the first
    reply (``ProcessPoolTransport.call`` queues all of this worker's silos at once); they are answered in
    the order they came. The loop ends on ``None`` or when the server's end of the pipe closes (EOF), so a
    worker never outlives its server for longer than the request it is computing.
    """
    from vcmc.silo.local import LocalSilo

    with contextlib.suppress(ValueError):  # not in the main thread under some launchers
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server handles Ctrl-C and closes the pool
    silos = {}
    try:
        # Import the apply step now (scipy, numba, arviz: seconds) so the handshake, not the first
        # request, pays for it and stage timings measure the work.
        import vcmc.mcmc.apply  # noqa: F401
        import vcmc.silo.build_summary  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        for name, _, _ in hosted:
            conn.send((name, sanitise_exception(exc, "startup").to_arrays()))
        conn.close()
        return
    for name, spec, privacy in hosted:
        try:
            data = spec() if callable(spec) else spec
            silo = LocalSilo(data, privacy=privacy, jobs=jobs,
                             progress=_PipeProgress(conn, name) if report_progress else None,
                             state_dir=state_dir)
            conn.send((name, silo.handle(HelloRequest()).to_arrays()))
            silos[name] = silo
        except Exception as exc:  # noqa: BLE001
            conn.send((name, sanitise_exception(exc, "startup").to_arrays()))
    inbox = _drain_requests(conn)
    while True:
        message = inbox.get()
        if message is None:
            break
        name, arrays = message
        if isinstance(arrays, str) and arrays in (_ASSIGNMENTS, _MEMBERSHIPS):
            # Private control commands of the process pool (one machine, one user): not boundary messages.
            field = "assignments" if arrays == _ASSIGNMENTS else "memberships"
            conn.send((name, getattr(silos.get(name), field, None)))
            continue
        try:
            if name not in silos:
                raise NotFittedError(f"silo {name!r} failed to start in this worker")
            request = decode_message(arrays)
            reply = silos[name].handle(request)
            encoded = reply.to_arrays()
        except Exception as exc:  # noqa: BLE001
            encoded = sanitise_exception(exc, str(arrays.get("__kind__", "?"))).to_arrays()
        try:
            conn.send((name, encoded))
        except (BrokenPipeError, OSError):
            break
    conn.close()


def _drain_requests(conn) -> queue.SimpleQueue:
    """Read the server's messages into a queue from a thread, as they arrive; ``None`` at the end (EOF).

    The server writes all of this worker's requests of a call at once; if nothing read them while the
    worker computed, a full pipe in each direction (its requests one way, a reply the other) would block
    both processes for good. Reading here keeps the server's writes from ever waiting on the computation.
    """
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            if (isinstance(message, tuple) and len(message) == 2 and message[0] == _BATCH
                    and isinstance(message[1], list)):
                for item in message[1]:          # a call's requests to this worker, in order
                    inbox.put(item)
                continue
            inbox.put(message)
            if message is None:
                return

    threading.Thread(target=read, name="vcmc-silo-requests", daemon=True).start()
    return inbox


class _Worker:
    """One worker process and the silos it hosts (their requests are answered one after the other)."""

    def __init__(self, index: int, names: list[str], process, conn):
        self.index = index
        self.names = names
        self.process = process
        self.conn = conn
        self.dead_reason: str | None = None


def _end_process(process) -> None:
    """Terminate a worker process that is still alive, and kill it if it does not end within 2 s."""
    if process.is_alive():
        process.terminate()
        process.join(2.0)
    if process.is_alive():
        process.kill()
        process.join(2.0)


def _shutdown(workers: list[_Worker], grace: float) -> None:
    """Stop every worker: ask politely, then SIGTERM, then SIGKILL. Used by close() and the finaliser."""
    for w in workers:
        if w.process.is_alive():
            with contextlib.suppress(Exception):
                w.conn.send(None)
    deadline = time.monotonic() + grace
    for w in workers:
        w.process.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        _end_process(w.process)
        with contextlib.suppress(Exception):
            w.conn.close()


def _balanced_groups(specs, n_workers: int) -> list[list[int]]:
    """Silo indices per worker: largest silos first to the least-loaded worker (rows when known, else 1).

    Deterministic; results never depend on it (each silo's stream comes in its requests)."""
    loads = [0] * n_workers
    groups: list[list[int]] = [[] for _ in range(n_workers)]
    weight = [int(getattr(spec, "n_rows", 1)) if not callable(spec) else 1 for _, spec in specs]
    for i in sorted(range(len(specs)), key=lambda j: (-weight[j], j)):
        w = min(range(n_workers), key=lambda k: (loads[k], k))
        groups[w].append(i)
        loads[w] += weight[i]
    return [sorted(g) for g in groups if g]


class ProcessPoolTransport(TransportBase):
    """Silos in long-lived worker processes, running in parallel (the default of ``vcmc fit --jobs J``).

    Parameters
    ----------
    silos : sequence of SiloData, or mapping of silo name to a zero-argument loader returning SiloData
        The silos' data, in the server's order. A loader (a picklable callable, e.g. a
        ``functools.partial`` of a reader) runs inside the worker, so the parent never holds the data.
    privacy : PrivacyConfig or mapping of silo name to PrivacyConfig, optional
        Each silo's disclosure limits, as its operator would set them (default ``PrivacyConfig()``).
    jobs_per_silo : int
        Processes each silo may use for its chains (passed to ``LocalSilo``).
    max_workers : int, optional
        Worker processes (default: one per silo). With fewer workers than silos, each worker hosts several
        silos (largest first to the least-loaded worker) and answers their requests one after the other,
        so ``--jobs 2`` with 40 silos runs 2 processes, not 40 competing for 2 cores.
    start_method : {"forkserver", "spawn", "fork"}
        How workers start (default "forkserver": a fresh server process imports the library once and
        forks each worker from it; "spawn" re-imports everything in every worker).
    startup_timeout : float
        Seconds to wait for every worker to load its data and answer the hello (default 300).
    progress : callable, optional
        ``progress(silo_name, iterations_done)`` while silos run their Gibbs chains (progress bars).
    state_dir : path, optional
        Passed to each ``LocalSilo``: finished apply steps are saved there and reused by an identical
        later request (resuming an interrupted run).

    Notes
    -----
    A worker that times out is terminated (its late reply could otherwise be read as the answer to a
    later request); a worker that died stays dead. Both are reported as ``SiloFailure`` for every silo it
    hosts, by every later call. ``close()`` (also called by ``with``, by garbage collection and at
    interpreter exit) stops every worker, so no process is left behind.
    """

    def __init__(self, silos: Sequence | Mapping[str, Callable], *,
                 privacy: PrivacyConfig | Mapping[str, PrivacyConfig] | None = None,
                 jobs_per_silo: int = 1, max_workers: int | None = None, start_method: str = "forkserver",
                 startup_timeout: float = 300.0, progress: Callable[[str, int], None] | None = None,
                 state_dir=None):
        specs = list(silos.items()) if isinstance(silos, Mapping) else [(s.name, s) for s in silos]
        names = [n for n, _ in specs]
        if len(set(names)) != len(names):
            raise ConfigError(f"silo names must be unique; got {names}")
        if jobs_per_silo < 1:
            raise ConfigError(f"The 'jobs_per_silo' parameter of ProcessPoolTransport must be an int >= 1. "
                              f"Got {jobs_per_silo!r} instead.")
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                        or max_workers < 1):
            raise ConfigError(f"The 'max_workers' parameter of ProcessPoolTransport must be an int >= 1 or "
                              f"None. Got {max_workers!r} instead.")
        privacy = PrivacyConfig() if privacy is None else privacy
        ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            # The fork server imports the heavy modules once (numpy, scipy, numba and its cached kernels,
            # ArviZ: several seconds of CPU); every worker is then a fork of it, instead of each worker
            # paying the imports again on a machine with fewer cores than silos. The server is a fresh
            # process (not a fork of this one), so no lock or thread state is inherited from here.
            ctx.set_forkserver_preload(_PRELOAD)
        self.silos = tuple(names)
        self.own_session = True          # the workers build every silo with the analyst's own policy
        self.rounds_ready = True
        self.progress = progress
        self.hello: dict[str, HelloReply] = {}
        self._workers: list[_Worker] = []
        self._of: dict[str, _Worker] = {}
        self._dead: dict[str, str] = {}
        n_workers = len(specs) if max_workers is None else min(max_workers, len(specs))
        for k, group in enumerate(_balanced_groups(specs, max(n_workers, 1))):
            hosted = []
            for i in group:
                name, spec = specs[i]
                silo_privacy = privacy.get(name, PrivacyConfig()) if isinstance(privacy, Mapping) else privacy
                hosted.append((name, spec, silo_privacy))
            parent, child = ctx.Pipe(duplex=True)
            # daemon=False: a silo may start its own chain processes (jobs_per_silo > 1); daemons cannot.
            label = names[group[0]] if len(group) == 1 else f"worker-{k}"
            proc = ctx.Process(target=_worker_main, args=(child, hosted, jobs_per_silo, progress is not None,
                                                          state_dir),
                               name=f"vcmc-silo-{label}", daemon=False)
            proc.start()
            child.close()
            w = _Worker(k, [names[i] for i in group], proc, parent)
            self._workers.append(w)
            for i in group:
                self._of[names[i]] = w
        self._finalizer = weakref.finalize(self, _shutdown, list(self._workers), 5.0)
        try:
            self._handshake(startup_timeout)
        except BaseException:
            self.close()
            raise

    # -- failures --------------------------------------------------------------------------------------

    def _reason(self, name: str) -> str | None:
        w = self._of[name]
        if w.dead_reason is None and not w.process.is_alive():
            self._retire(w, f"worker process died (exit code {w.process.exitcode})")
        return self._dead.get(name) or w.dead_reason

    def _retire(self, w: _Worker, reason: str) -> None:
        if w.dead_reason is None:
            w.dead_reason = reason
            log.warning("silos %s: %s", w.names, reason)
        _end_process(w.process)

    def _handshake(self, timeout: float) -> None:
        waiting = {w.conn: set(w.names) for w in self._workers}
        by_conn = {w.conn: w for w in self._workers}
        deadline = time.monotonic() + timeout
        while waiting:
            remaining = deadline - time.monotonic()
            ready = wait_connections(list(waiting), timeout=max(0.0, remaining)) if remaining > 0 else []
            if not ready:
                for conn in waiting:
                    self._retire(by_conn[conn], f"did not start within {timeout:g} s")
                return
            for conn in ready:
                w = by_conn[conn]
                try:
                    name, arrays = conn.recv()
                    reply = reply_to_result(name, decode_message(arrays))
                except (EOFError, OSError):
                    w.process.join(2.0)
                    self._retire(w, f"worker process exited during startup (exit code {w.process.exitcode})")
                    del waiting[conn]
                    continue
                if isinstance(reply, SiloFailure):
                    self._dead[name] = f"failed to start: {reply.reason}"
                    log.warning("silo %r: %s", name, self._dead[name])
                elif isinstance(reply, HelloReply) and reply.silo != name:
                    self._dead[name] = f"the worker's data are named {reply.silo!r}, expected {name!r}"
                    log.warning("silo %r: %s", name, self._dead[name])
                else:
                    self.hello[name] = reply
                waiting[conn].discard(name)
                if not waiting[conn]:
                    del waiting[conn]

    # -- requests ----------------------------------------------------------------------------------------

    def call(self, requests: Mapping[str, Message], *,
             timeout: float | None = None) -> dict[str, Message | SiloFailure]:
        self._check_names(requests)
        out: dict[str, Message | SiloFailure] = {}
        batches: dict[int, list[tuple[str, Message]]] = {}   # worker index -> its requests, in order
        for name, request in requests.items():
            reason = self._reason(name)
            if reason is not None:
                out[name] = SiloFailure(name, reason)
            else:
                batches.setdefault(self._of[name].index, []).append((name, request))
        # Every request of a worker is written at once, in one pickle (its reader thread queues them) and the
        # replies come back in the same order: a worker goes from one silo's request to the next without
        # waiting for the server to read a reply and write the next request (a global-informed round is
        # 15 short requests per worker, and that round trip was a third of its time).
        in_flight: dict = {}   # conn -> (worker, [(name, request) sent and not answered, in order])

        def fail(w: _Worker, items) -> None:
            for n, _ in items:
                out[n] = SiloFailure(n, w.dead_reason)

        for index, batch in batches.items():
            w = self._workers[index]
            try:
                w.conn.send((_BATCH, [(name, request.to_arrays()) for name, request in batch]))
            except (BrokenPipeError, OSError):
                self._retire(w, f"worker process died (exit code {w.process.exitcode})")
                fail(w, batch)
                continue
            in_flight[w.conn] = (w, list(batch))
        deadline = None if timeout is None else time.monotonic() + timeout
        while in_flight:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait_connections(list(in_flight), timeout=remaining)
            if not ready:
                for w, sent in in_flight.values():
                    self._retire(w, f"no reply to {sent[0][1].KIND} within {timeout:g} s; worker stopped")
                    fail(w, sent)
                break
            for conn in ready:
                w, sent = in_flight[conn]
                name, request = sent[0]
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    w.process.join(1.0)
                    self._retire(w, f"worker process died during {request.KIND} (exit code "
                                    f"{w.process.exitcode})")
                    fail(w, sent)
                    del in_flight[conn]
                    continue
                if isinstance(message, tuple) and len(message) == 3 and message[0] == _PROGRESS:
                    if self.progress is not None:
                        self.progress(message[1], message[2])
                    continue                   # the reply itself is still to come
                sent.pop(0)
                if not sent:
                    del in_flight[conn]
                replied, arrays = message
                if replied != name:            # replies come in request order; anything else is a broken worker
                    self._retire(w, f"worker answered for {replied!r} while {name!r} was due; worker stopped")
                    fail(w, [(name, request), *sent])
                    in_flight.pop(conn, None)
                    continue
                try:
                    out[name] = reply_to_result(name, decode_message(arrays))
                except Exception as exc:  # noqa: BLE001
                    out[name] = SiloFailure(name, f"malformed reply to {request.KIND}: "
                                                  f"{sanitise_exception(exc).reason}")
        return {name: out[name] for name in requests}

    def local_assignments(self, timeout: float = 60.0) -> dict[str, object]:
        """Global label of every row, per live silo, fetched from the workers (after an assign request).

        The process pool runs every silo on the user's own machine, so this private command (not a
        boundary message; Flower silos never answer it) returns row-level labels to the caller.
        """
        return self._fetch_local(_ASSIGNMENTS, timeout)

    def local_memberships(self, timeout: float = 60.0) -> dict[str, object]:
        """Memberships of every row in every global cluster, per live silo (after an assign request), by
        the same private command as ``local_assignments``."""
        return self._fetch_local(_MEMBERSHIPS, timeout)

    def _fetch_local(self, command: str, timeout: float) -> dict[str, object]:
        out = {}
        for name in self.silos:
            w = self._of[name]
            if self._reason(name) is not None:
                continue
            try:
                w.conn.send((name, command))
                if w.conn.poll(timeout):
                    _, value = w.conn.recv()
                    if value is not None:
                        out[name] = value
            except (EOFError, OSError):
                continue
        return out

    def kill(self, silo: str, sig: int = signal.SIGKILL) -> None:
        """Kill the worker hosting one silo (to test fault handling); later calls report its silos failed."""
        w = self._of[silo]
        if w.process.is_alive():
            os.kill(w.process.pid, sig)
            w.process.join(5.0)

    def pids(self) -> dict[str, int | None]:
        """Process id of each silo's worker (None once stopped); silos sharing a worker share its pid."""
        return {n: (self._of[n].process.pid if self._of[n].process.is_alive() else None) for n in self.silos}

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        if self._finalizer.alive:
            self._finalizer()


def local_rows(transport, attribute: str, names) -> tuple | None:
    """Row-level labels or memberships of every silo in ``names`` order, where the transport can give them
    (the user's own machine: in-process and process-pool transports); None otherwise (Flower)."""
    fetch = getattr(transport, attribute, None)
    if not callable(fetch):
        return None
    got = fetch()
    if got is None or not all(n in got for n in names):
        return None
    return tuple(got[n] for n in names)
