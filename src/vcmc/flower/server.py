"""Server side of a Flower deployment: silos as Flower SuperNodes reached through a ``Grid``.

``server_main(grid, context)`` is the ServerApp's ``@app.main()``: it reads the run config (the same
``config_from_mapping`` as the CLI), waits for ``min-nodes`` SuperNodes, asks each for its name
(``HelloRequest``), and calls ``vcmc.pipeline.run_vcmc`` with a ``FlowerTransport``: the algorithm is the one
that runs in-process, so the same seed gives the same result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path

from vcmc.config import config_from_mapping
from vcmc.exceptions import ConfigError, SiloFailure
from vcmc.federation.faults import FaultPolicy
from vcmc.federation.order import silo_sort_key
from vcmc.federation.transport import TransportBase, reply_to_result
from vcmc.flower.lca import LCA_KEYS
from vcmc.flower.oplog import format_bytes
from vcmc.flower.records import decode_record, encode_record, record_nbytes
from vcmc.protocol import HelloReply, HelloRequest, Message
from vcmc.silo.errors import sanitise_exception

log = logging.getLogger("vcmc.flower")

__all__ = ["SERVER_KEYS", "FlowerTransport", "discover_silos", "server_main", "wait_for_nodes"]

SERVER_KEYS = ("min-nodes", "seed", "out-dir", "schema-path", "min-silos", "round-timeout", "wait-nodes",
               "method", *LCA_KEYS)
"""Run-config keys read by ``server_main`` itself; every other key must be a ``FitConfig`` option."""

_POLL_SECONDS = 1.0
"""Most seconds between two pulls of the pending replies. Flower's ``send_and_receive`` sleeps 3 s; one pull
is one small request to the SuperLink naming the pending message ids, so pulling every second costs the
SuperLink little and takes up to 2 s off every round."""

_FIRST_POLL_SECONDS = 0.2
"""Seconds between the first pulls of a round; the pause grows to ``_POLL_SECONDS`` over its first
``_POLL_RAMP_SECONDS``. A round of the global-informed rounds in a deployment lasts a few seconds (a new
ClientApp process per site, docs/federation.md §3.6), so its replies are seen a fraction of a second after they
arrive instead of half a second on average; a long round (a summarize) pulls once a second after its first
20 s."""

_POLL_RAMP_SECONDS = 20.0


def _pull_pause(elapsed: float) -> float:
    """The pause before the next pull, ``elapsed`` seconds into a round."""
    return _FIRST_POLL_SECONDS + (_POLL_SECONDS - _FIRST_POLL_SECONDS) * min(1.0, elapsed / _POLL_RAMP_SECONDS)

_REPEATED_ROUND_EVERY = 25
"""A stage asked again of silos that already answered it (the federated-gradient ``counts`` rounds) logs
one line for its rounds 1-3 and then every 25th, not one per silo and round."""


def _error_code_name(code: int) -> str:
    from flwr.common.constant import ErrorCode

    names = {v: k for k, v in vars(ErrorCode).items() if k.isupper() and isinstance(v, int)}
    return names.get(int(code), "UNKNOWN")


def describe_error_reply(kind: str, node: int, code: int, reason: str, seconds: float) -> str:
    """The text of a silo's failure from Flower's error reply: what the SuperLink or the ClientApp said, the
    Flower error code by name, and when it came (seconds since the request was sent)."""
    from flwr.common.constant import ErrorCode

    if int(code) == ErrorCode.CLIENT_APP_RAISED_EXCEPTION:
        # vcmc's own sanitised error from inside the silo (``client_handle``), as it came: nothing is added
        # to the silo's text (the log line gives the seconds), so what the silo said stays checkable as is
        return f"error code {int(code)}: {reason}"
    if int(code) == ErrorCode.NODE_UNAVAILABLE:
        return (f"SuperNode {node} became unavailable during {kind}: the SuperLink reported it {seconds:.1f} s "
                f"after the request was sent ({reason.strip()} Flower error code {int(code)}, NODE_UNAVAILABLE)")
    return (f"Flower error reply to {kind} after {seconds:.1f} s from node {node}: {reason.strip()} (error code "
            f"{int(code)}, {_error_code_name(code)})")


class FlowerTransport(TransportBase):
    """Silos reached through a Flower ``Grid`` (used inside the ServerApp).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    node_ids : mapping of silo name to Flower node id
        From ``discover_silos``. Silos are put in the canonical order of ``vcmc.federation.order`` (by
        name, numbers compared as numbers), the order ``vcmc fit`` uses, so that the order (and hence each
        silo's random stream) depends neither on Flower's random node ids nor on the order SuperNodes
        connected.
    default_timeout : float or None
        Used when ``call`` gets no timeout (default None: Flower's message TTL).

    Notes
    -----
    Each request is pushed with ``grid.push_messages`` and its reply matched by message id
    (``reply_to_message_id``) as it arrives, so that the error reply the SuperLink itself sends for a node
    that stopped sending heartbeats (``NODE_UNAVAILABLE``, sent from the SuperLink's own node id) is
    matched to its silo as soon as it comes, instead of the round waiting out its timeout. Every reply is
    logged (logger ``vcmc.flower``: silo, seconds, payload bytes). A grid that offers only
    ``send_and_receive`` (a test double) is used through it, its replies matched in the same way.
    """

    def __init__(self, grid, node_ids: Mapping[str, int], *, default_timeout: float | None = None):
        self.grid = grid
        self.node_ids = {name: int(node_ids[name]) for name in sorted(node_ids, key=silo_sort_key)}
        self.silos = tuple(self.node_ids)
        self.default_timeout = default_timeout
        self._round = 0
        self._reported: set[tuple[str, str]] = set()     # (request kind, silo) already logged per silo
        self._rounds_of: dict[str, int] = {}

    def call(self, requests: Mapping[str, Message], *,
             timeout: float | None = None) -> dict[str, Message | SiloFailure]:
        from flwr.app import Message as FlowerMessage

        self._check_names(requests)
        self._round += 1
        timeout = self.default_timeout if timeout is None else timeout
        messages, sent = {}, 0
        for name, request in requests.items():
            action = getattr(request, "ACTION", "")
            if not action:
                raise ValueError(f"{request.KIND!r} is not a request a silo answers")
            content = encode_record(request)
            sent += record_nbytes(content)
            messages[name] = FlowerMessage(content, dst_node_id=self.node_ids[name],
                                           message_type=f"query.{action}", group_id=str(self._round))
        kinds = sorted({r.KIND for r in requests.values()})
        kind = kinds[0] if len(kinds) == 1 else "/".join(kinds)
        self._rounds_of[kind] = self._rounds_of.get(kind, 0) + 1
        per_silo = any((kind, n) not in self._reported for n in requests)
        stage = kind.removesuffix("_request")
        if per_silo and len(requests) > 1:
            log.info("%s: asking %d silos (%s sent)", stage, len(requests), format_bytes(sent))

        out: dict[str, Message | SiloFailure] = {}
        received = {"bytes": 0}
        t0 = time.monotonic()

        def arrived(name: str, reply) -> None:
            seconds = time.monotonic() - t0
            node = self.node_ids[name]
            if reply.has_error():
                out[name] = SiloFailure(name, describe_error_reply(requests[name].KIND, node, reply.error.code,
                                                                   reply.error.reason, seconds))
                log.warning("%s: silo %r failed after %.1f s: %s", stage, name, seconds, out[name].reason)
                return
            nbytes = record_nbytes(reply.content)
            received["bytes"] += nbytes
            try:
                out[name] = reply_to_result(name, decode_record(reply.content))
            except Exception as exc:  # noqa: BLE001 - a malformed reply is that silo's failure
                out[name] = SiloFailure(name, f"malformed reply to {requests[name].KIND}: "
                                              f"{sanitise_exception(exc).reason}")
            if isinstance(out[name], SiloFailure):
                log.warning("%s: silo %r failed after %.1f s: %s", stage, name, seconds, out[name].reason)
            elif (kind, name) not in self._reported and kind != "hello_request":   # discover_silos logs those
                log.info("%s: silo %r replied in %.1f s, sent %s", stage, name, seconds, format_bytes(nbytes))
            self._reported.add((kind, name))

        self._exchange(messages, timeout, arrived)
        elapsed = time.monotonic() - t0
        for name, request in requests.items():
            if name not in out:
                waited = "no round timeout" if timeout is None else f"the round timeout of {timeout:g} s"
                out[name] = SiloFailure(name, (
                    f"no reply to {request.KIND} within {waited} (node "
                    f"{self.node_ids[name]}); the SuperLink did not report the node as unavailable, so it is "
                    "connected but its ClientApp has not answered: a slow or stuck silo (run config "
                    "'round-timeout')"))
                log.warning("%s: silo %r: %s", stage, name, out[name].reason)
        n_ok = sum(not isinstance(r, SiloFailure) for r in out.values())
        rounds = self._rounds_of[kind]
        if per_silo or rounds <= 3 or rounds % _REPEATED_ROUND_EVERY == 0:
            label = stage if per_silo else f"{stage} round {rounds}"
            log.info("%s: %d of %d silos replied in %.1f s (%s received)", label, n_ok, len(requests), elapsed,
                     format_bytes(received["bytes"]))
        return {name: out[name] for name in requests}

    def _exchange(self, messages: Mapping[str, object], timeout: float | None, arrived) -> None:
        """Send one message per silo and call ``arrived(name, reply)`` for each reply as it comes, until all
        came or ``timeout`` seconds passed. Replies are matched by the id of the message they answer."""
        names = list(messages)
        if not (hasattr(self.grid, "push_messages") and hasattr(self.grid, "pull_messages")):
            replies = self.grid.send_and_receive(list(messages.values()), timeout=timeout)
            by_id = {str(m.metadata.message_id): n for n, m in messages.items()}
            for reply in replies:
                name = by_id.get(str(reply.metadata.reply_to_message_id))
                if name is not None:
                    arrived(name, reply)
            return
        ids = list(self.grid.push_messages(list(messages.values())))
        pending = {str(mid): name for mid, name in zip(ids, names, strict=True) if mid}
        for mid, name in zip(ids, names, strict=True):
            if not mid:
                log.warning("silo %r: the SuperLink did not accept the request (a malformed message)", name)
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        while pending:
            for reply in self.grid.pull_messages(list(pending)):
                name = pending.pop(str(reply.metadata.reply_to_message_id), None)
                if name is not None:
                    arrived(name, reply)
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            pause = _pull_pause(time.monotonic() - start)
            time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))

    def close(self) -> None:
        pass


def wait_for_nodes(grid, min_nodes: int, timeout: float = 300.0, poll: float = 1.0) -> list[int]:
    """Node ids once at least ``min_nodes`` SuperNodes are connected; ``SiloFailure`` after ``timeout``."""
    t0 = time.monotonic()
    while True:
        nodes = sorted(int(n) for n in grid.get_node_ids())
        if len(nodes) >= min_nodes:
            return nodes
        if time.monotonic() - t0 > timeout:
            raise SiloFailure("(federation)", f"only {len(nodes)} of the {min_nodes} required SuperNodes "
                                              f"connected within {timeout:g} s (run config 'min-nodes')")
        time.sleep(poll)


def discover_silos(grid, node_ids, timeout: float | None = 120.0, *,
                   hellos: dict[str, HelloReply] | None = None) -> tuple[dict[str, int], list[SiloFailure]]:
    """Ask every node for its silo name (``HelloRequest``); returns name -> node id and failures.

    ``hellos``, when given, is filled with each silo's ``HelloReply`` (schema fingerprint, vcmc version).
    """
    provisional = {f"node-{n}": n for n in node_ids}
    tr = FlowerTransport(grid, provisional)
    replies = tr.call({name: HelloRequest() for name in tr.silos}, timeout=timeout)
    names: dict[str, int] = {}
    failures: list[SiloFailure] = []
    for provisional_name, reply in replies.items():
        node = provisional[provisional_name]
        if isinstance(reply, HelloReply):
            if reply.silo in names:
                raise ConfigError(f"two SuperNodes (nodes {names[reply.silo]} and {node}) call themselves "
                                  f"silo {reply.silo!r}; give each a distinct 'silo-name' in its node config")
            names[reply.silo] = node
            if hellos is not None:
                hellos[reply.silo] = reply
            log.info("hello: node %d is silo %r (vcmc %s, schema %s)", node, reply.silo, reply.vcmc_version,
                     reply.schema_fingerprint[:12])
        else:
            failures.append(reply if isinstance(reply, SiloFailure)
                            else SiloFailure(provisional_name, "did not answer the hello request"))
    return names, failures


def _get(rc: Mapping, key: str, default=None):
    value = rc.get(key, default)
    if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
        return None
    return value


def _absolute(rc: Mapping, key: str, what: str) -> Path | None:
    value = _get(rc, key)
    if value is None:
        return None
    if not Path(str(value)).is_absolute():
        raise ConfigError(f"run config {key!r} must be an absolute path {what} (the ServerApp runs in the "
                          f"SuperLink's working directory); got {value!r}")
    return Path(str(value))


def load_run_schema(rc: Mapping):
    """The shared schema named by the run config's ``schema-path`` (the coordinator's copy), or None.

    Why the server reads its own copy rather than the silos sending theirs: the schema is the coding the
    silos agreed on (docs/federation.md section 3.1), so the coordinator already holds it, and the silos'
    hello carries only its fingerprint. Variable and modality names are not data values, but a schema a
    silo inferred from its own file would reveal which categories occur there (a rare diagnosis code at a
    small site); leaving the names on the coordinator's side means no silo ever publishes them, and the
    fingerprint check (``check_schema``) proves the coordinator's copy is the coding every silo used.
    """
    path = _absolute(rc, "schema-path", "to the shared schema JSON on the SuperLink host")
    if path is None:
        return None
    from vcmc.data import Schema

    if not path.is_file():
        raise ConfigError(f"run config 'schema-path': {str(path)!r} does not exist on the SuperLink host")
    return Schema.from_json(path)


def rounds_ready(hellos: Mapping[str, HelloReply]) -> bool:
    """Whether the auto plan may run the rounds (``vcmc.rounds.plan``): every silo's operator set its keys and the
    run has at least each operator's ``min-peers`` participants (a silo refuses the start otherwise, which would
    fail the run rather than fall back to the one-shot pass)."""
    return bool(hellos) and all(bool(h.rounds_key) and len(hellos) >= int(h.min_peers) for h in hellos.values())


def check_schema(schema, hellos: Mapping[str, HelloReply], path) -> None:
    """Refuse, before any sampling, a run-config schema whose fingerprint differs from a silo's coding."""
    fingerprint = schema.fingerprint()
    if any(h.schema_fingerprint.startswith("hmac-") for h in hellos.values()):
        # the silos' gate sends the fingerprint keyed with the operators' shared secret (vcmc.silo.gate), which
        # the server does not hold: check what it can, that the silos agree and the modality counts match
        keyed = {h.schema_fingerprint for h in hellos.values()}
        counts = {n: tuple(h.n_modalities) for n, h in hellos.items()
                  if tuple(h.n_modalities) != tuple(schema.n_modalities)}
        if len(keyed) > 1 or counts:
            raise ConfigError(f"run config 'schema-path' {str(path)!r}: the silos do not all use its coding "
                              f"(keyed fingerprints {sorted(keyed)}; modality counts differing from the file's "
                              f"{list(schema.n_modalities)}: {counts}); give the coordinator the same schema "
                              "file as every silo's node config 'schema-path'")
        log.info("schema %s: the silos' fingerprints are keyed (the operators' secret); checked their agreement "
                 "and the modality counts", path)
        return
    differ = {n: h.schema_fingerprint for n, h in hellos.items() if h.schema_fingerprint != fingerprint}
    if differ:
        listed = ", ".join(f"{n!r} ({fp[:12]})" for n, fp in differ.items())
        raise ConfigError(f"run config 'schema-path' {str(path)!r} (fingerprint {fingerprint[:12]}) is not the "
                          f"schema silos {listed} encoded their data with; give the coordinator the same schema "
                          "file as every silo's node config 'schema-path'")


def server_main(grid, context) -> Path:
    """Body of the ServerApp: run VCMC over the connected silos and write the results to ``out-dir``.

    Run-config keys: ``min-nodes`` (int, default 2), ``seed`` (int), ``out-dir`` (absolute path: the
    ServerApp runs in the SuperLink's working directory), ``schema-path`` (absolute path on the SuperLink
    host to the silos' shared schema: results then name variables and modalities and include
    ``schema.json``, as ``vcmc fit``'s do), ``min-silos`` (0 or "none": every silo required),
    ``round-timeout`` (seconds per round, default 3600), ``wait-nodes`` (seconds to wait for min-nodes,
    default 300), ``method`` ("vcmc" or "consensus"), and any ``FitConfig`` option as a dotted key
    (``sampler.n-iter = 2000`` or a ``[tool.flwr.app.config.sampler]`` table).

    Progress (each stage, each silo's reply with its seconds and bytes), the warnings ``vcmc fit`` prints
    and where the results went are logged to ``flwr log`` and to ``out-dir/server.log``
    (``vcmc.flower.oplog``).
    """
    from vcmc.flower.oplog import RunLog

    rc = dict(context.run_config)
    out_dir = _absolute(rc, "out-dir", "for the result files on the SuperLink host")
    if out_dir is None:
        raise ConfigError("run config 'out-dir' must be an absolute path (the ServerApp runs in the "
                          f"SuperLink's working directory); got {rc.get('out-dir')!r}")
    config = config_from_mapping(rc, ignore=SERVER_KEYS)
    from vcmc.flower.lca import check_lca_settings

    check_lca_settings(rc)     # a malformed latent class request is refused before any silo is asked
    schema = load_run_schema(rc)
    out_dir.mkdir(parents=True, exist_ok=True)
    with RunLog(out_dir):
        try:
            return _run(grid, rc, config, schema, out_dir)
        except Exception as exc:
            log.error("run failed: %s: %s", type(exc).__name__, exc)
            raise


def _run(grid, rc: Mapping, config, schema, out_dir: Path) -> Path:
    from vcmc.pipeline import run_vcmc

    t_run = time.monotonic()
    min_silos = _get(rc, "min-silos")
    policy = FaultPolicy(min_silos=int(min_silos) if min_silos not in (None, 0) else None,
                         timeout=float(_get(rc, "round-timeout", 3600.0) or 3600.0))
    seed = _get(rc, "seed")
    seed = int(seed) if seed is not None else None
    min_nodes = int(_get(rc, "min-nodes", 2))
    log.info("waiting for %d SuperNodes (run config 'min-nodes', at most %s s)", min_nodes,
             _get(rc, "wait-nodes", 300))
    nodes = wait_for_nodes(grid, min_nodes, timeout=float(_get(rc, "wait-nodes", 300)))
    hellos: dict[str, HelloReply] = {}
    names, failures = discover_silos(grid, nodes, timeout=policy.timeout, hellos=hellos)
    for f in failures:
        log.warning("%s", f)
    if schema is not None:
        check_schema(schema, hellos, _get(rc, "schema-path"))
    else:
        log.warning("no 'schema-path' in the run config: the results name variables V1, V2, ... and modalities "
                    "1, 2, ..., and no schema.json is written (vcmc predict needs it); give the ServerApp the "
                    "silos' shared schema file to name them")
    transport = FlowerTransport(grid, names, default_timeout=policy.timeout)
    transport.rounds_ready = rounds_ready(hellos)
    log.info("%d silos, in this order (seeds follow it): %s", len(transport.silos), ", ".join(transport.silos))
    log.info("fault policy: %s, round timeout %g s",
             "every silo required" if policy.min_silos is None else f"at least {policy.min_silos} silos",
             policy.timeout)
    from vcmc.flower.lca import lca_requested

    if lca_requested(rc):     # the maximum-likelihood latent class analysis (docs/design.md §15) instead
        return _run_lca(transport, rc, schema, hellos, out_dir, seed, t_run)
    from vcmc.pipeline import plan_rounds

    _, plan = plan_rounds(config, transport, str(_get(rc, "method", "vcmc")))
    log.info("rounds: %d (%s)", plan["rounds"], plan.get("reason") or "aggregation.rounds in the run config")
    if plan["other_mode"]["differs"]:     # also in result.json, diagnostics.rounds_plan.other_mode
        log.warning("note: %s", plan["other_mode"]["note"])
    result = run_vcmc(transport, config, rng=seed, method=str(_get(rc, "method", "vcmc")), policy=policy,
                      save_dir=out_dir / "summaries")
    from vcmc.report import write_outputs

    data = {"schema": {"source": (f"{_get(rc, 'schema-path')} (run config schema-path)" if schema is not None
                                  else "not given to the ServerApp"),
                       "fingerprint": next(iter(hellos.values())).schema_fingerprint if hellos else None}}
    try:
        paths = write_outputs(result, out_dir, schema=schema, data=data)
    except ImportError as exc:  # the NetCDF backend is optional: keep the JSON/CSV results
        log.warning("posterior.nc not written (%s); result.json and CSV files are", exc)
        paths = write_outputs(result, out_dir, schema=schema, data=data, netcdf=False)
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items())
    log.info("%s: %d clusters from %d silos (%d rows); server-side timings: %s; whole run %.1f s",
             result.method, result.n_clusters, len(result.silos), int(result.partition_counts.sum()), timings,
             time.monotonic() - t_run)
    for w in result.diagnostics.get("warnings", []) if isinstance(result.diagnostics, dict) else []:
        log.warning("warning: %s", w)
    for kind, path in paths.items():
        log.info("wrote %-10s %s", kind, path)
    log.info("results written to %s (this log: %s)", out_dir, out_dir / "server.log")
    return out_dir


def _run_lca(transport, rc: Mapping, schema, hellos: Mapping[str, HelloReply], out_dir: Path, seed,
             t_run: float) -> Path:
    """The run config's latent class analysis (``vcmc.flower.lca``) over the discovered silos."""
    from vcmc.flower.lca import run_lca

    counts = {tuple(int(m) for m in h.n_modalities) for n, h in hellos.items() if n in transport.silos}
    if len(counts) != 1:
        raise ConfigError(f"the silos do not agree on the clustering variables' modality counts ({sorted(counts)}); "
                          "give every SuperNode the same 'schema-path'")
    gaussian = {int(h.n_gaussian) for n, h in hellos.items() if n in transport.silos}
    if len(gaussian) > 1:
        raise ConfigError(f"the silos do not agree on the number of continuous items ({sorted(gaussian)}); give "
                          "every SuperNode the same 'schema-path'")
    paths = run_lca(transport, rc, out_dir, n_modalities=next(iter(counts)), schema=schema, seed=seed,
                    n_gaussian=gaussian.pop() if gaussian else 0)
    if schema is not None:
        schema.to_json(out_dir / "schema.json")     # written atomically
        paths["schema"] = out_dir / "schema.json"
    for kind, path in paths.items():
        log.info("wrote %-18s %s", kind, path)
    log.info("latent class analysis of %d silos in %.1f s; results written to %s (this log: %s)",
             len(transport.silos), time.monotonic() - t_run, out_dir, out_dir / "server.log")
    return out_dir
