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
from vcmc.federation.transport import TransportBase, reply_to_result
from vcmc.flower.records import ACTION, decode_record, encode_record
from vcmc.protocol import HelloReply, HelloRequest, Message
from vcmc.silo.errors import sanitise_exception

log = logging.getLogger("vcmc.federation")

__all__ = ["SERVER_KEYS", "FlowerTransport", "discover_silos", "server_main", "wait_for_nodes"]

SERVER_KEYS = ("min-nodes", "seed", "out-dir", "min-silos", "round-timeout", "wait-nodes", "method")
"""Run-config keys read by ``server_main`` itself; every other key must be a ``FitConfig`` option."""


class FlowerTransport(TransportBase):
    """Silos reached through a Flower ``Grid`` (used inside the ServerApp).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    node_ids : mapping of silo name to Flower node id
        From ``discover_silos``. Silos are ordered by name, so that the order (and hence each silo's
        random stream) does not depend on Flower's random node ids.
    default_timeout : float or None
        Used when ``call`` gets no timeout (default None: Flower's message TTL).
    """

    def __init__(self, grid, node_ids: Mapping[str, int], *, default_timeout: float | None = None):
        self.grid = grid
        self.node_ids = {name: int(node_ids[name]) for name in sorted(node_ids)}
        self.silos = tuple(self.node_ids)
        self.default_timeout = default_timeout
        self._round = 0

    def call(self, requests: Mapping[str, Message], *,
             timeout: float | None = None) -> dict[str, Message | SiloFailure]:
        from flwr.app import Message as FlowerMessage

        self._check_names(requests)
        self._round += 1
        timeout = self.default_timeout if timeout is None else timeout
        out: dict[str, Message | SiloFailure] = {}
        messages = []
        for name, request in requests.items():
            action = ACTION.get(request.KIND)
            if action is None:
                raise ValueError(f"{request.KIND!r} is not a request a silo answers")
            messages.append(FlowerMessage(encode_record(request), dst_node_id=self.node_ids[name],
                                          message_type=f"query.{action}", group_id=str(self._round)))
        replies = self.grid.send_and_receive(messages, timeout=timeout)
        by_node = {int(r.metadata.src_node_id): r for r in replies}
        for name, request in requests.items():
            reply = by_node.get(self.node_ids[name])
            if reply is None:
                out[name] = SiloFailure(name, f"no reply to {request.KIND} within {timeout} s (node "
                                              f"{self.node_ids[name]})")
            elif reply.has_error():
                out[name] = SiloFailure(name, f"error code {reply.error.code}: {reply.error.reason}")
            else:
                try:
                    out[name] = reply_to_result(name, decode_record(reply.content))
                except Exception as exc:  # noqa: BLE001 - a malformed reply is that silo's failure
                    out[name] = SiloFailure(name, f"malformed reply to {request.KIND}: "
                                                  f"{sanitise_exception(exc).reason}")
        return out

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


def discover_silos(grid, node_ids, timeout: float | None = 120.0) -> tuple[dict[str, int], list[SiloFailure]]:
    """Ask every node for its silo name (``HelloRequest``); returns name -> node id and failures."""
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
        else:
            failures.append(reply if isinstance(reply, SiloFailure)
                            else SiloFailure(provisional_name, "did not answer the hello request"))
    return names, failures


def _get(rc: Mapping, key: str, default=None):
    value = rc.get(key, default)
    if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
        return None
    return value


def server_main(grid, context) -> Path:
    """Body of the ServerApp: run VCMC over the connected silos and write the results to ``out-dir``.

    Run-config keys: ``min-nodes`` (int, default 2), ``seed`` (int), ``out-dir`` (absolute path: the
    ServerApp runs in the SuperLink's working directory), ``min-silos`` (0 or "none": every silo required),
    ``round-timeout`` (seconds per round, default 3600), ``wait-nodes`` (seconds to wait for min-nodes,
    default 300), ``method`` ("vcmc" or "consensus"), and any ``FitConfig`` option as a dotted key
    (``sampler.n-iter = 2000`` or a ``[tool.flwr.app.config.sampler]`` table).
    """
    from vcmc.pipeline import run_vcmc

    rc = dict(context.run_config)
    out = _get(rc, "out-dir")
    if out is None or not Path(str(out)).is_absolute():
        raise ConfigError(f"run config 'out-dir' must be an absolute path (the ServerApp runs in the "
                          f"SuperLink's working directory); got {out!r}")
    out_dir = Path(str(out))
    config = config_from_mapping(rc, ignore=SERVER_KEYS)
    min_silos = _get(rc, "min-silos")
    policy = FaultPolicy(min_silos=int(min_silos) if min_silos not in (None, 0) else None,
                         timeout=float(_get(rc, "round-timeout", 3600.0) or 3600.0))
    seed = _get(rc, "seed")
    seed = int(seed) if seed is not None else None
    nodes = wait_for_nodes(grid, int(_get(rc, "min-nodes", 2)), timeout=float(_get(rc, "wait-nodes", 300)))
    names, failures = discover_silos(grid, nodes, timeout=policy.timeout)
    for f in failures:
        log.warning("%s", f)
    transport = FlowerTransport(grid, names, default_timeout=policy.timeout)
    log.info("vcmc: %d silos: %s", len(transport.silos), ", ".join(transport.silos))
    result = run_vcmc(transport, config, rng=seed, method=str(_get(rc, "method", "vcmc")), policy=policy,
                      save_dir=out_dir / "summaries")
    out_dir.mkdir(parents=True, exist_ok=True)
    from vcmc.report import write_outputs

    try:
        write_outputs(result, out_dir)
    except ImportError as exc:  # the NetCDF backend is optional: keep the JSON/CSV results
        log.warning("vcmc: posterior.nc not written (%s); result.json and CSV files are", exc)
        write_outputs(result, out_dir, netcdf=False)
    log.info("vcmc: results written to %s", out_dir)
    return out_dir
