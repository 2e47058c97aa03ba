"""Silo side of a Flower deployment: the ClientApp's handler on each SuperNode.

``client_handle(message, context)`` (every ClientApp query handler) loads the silo's data from its node
config (``data-path``, optional ``schema-path``, ``silo-name``, disclosure limits), restores the run's state
from ``context.state``, answers the request with ``LocalSilo.handle`` and stores the state back. Any
exception becomes a Flower ``Error`` whose text is sanitised (no data values).

Why ``context.state`` for the silo's state: in deployment a fresh ClientApp process handles every message,
so the local partition and membership probabilities of the summarize round must be stored somewhere for the
later rounds (divergence, counts, assign). ``context.state`` is kept by the SuperNode, on the silo's own
host, persists across the messages of one run and is discarded with the run; the alternative, files under a
silo-owned directory, would outlive the run and need cleaning up. The state is row-level (n_rows x local
clusters) and never leaves the SuperNode.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vcmc.config import PrivacyConfig, config_from_mapping
from vcmc.config.schema import options
from vcmc.exceptions import ConfigError
from vcmc.flower.records import decode_record, encode_record
from vcmc.protocol import AssignRequest
from vcmc.silo.errors import sanitise_exception

__all__ = ["NODE_PRIVACY_KEYS", "client_handle", "privacy_from_node_config", "silo_from_node_config",
           "write_local_results"]

NODE_PRIVACY_KEYS = {o.key.partition(".")[2]: o.name for o in options() if o.section == "privacy"}
"""Node-config keys through which a silo's operator sets its disclosure limits: the privacy options of the
run config without their section (``min-cluster-size``, ...), from the one table of options."""

_STATE_KEY = "vcmc-silo-state"


def privacy_from_node_config(node_config: Mapping) -> PrivacyConfig:
    """The silo operator's disclosure limits from the SuperNode's node config (defaults otherwise)."""
    kwargs = {}
    for key, field in NODE_PRIVACY_KEYS.items():
        if key in node_config:
            kwargs[f"privacy.{field}"] = node_config[key]
    return config_from_mapping(kwargs, base=None).privacy if kwargs else PrivacyConfig()


def silo_from_node_config(node_config: Mapping, node_id: int | None = None):
    """Build the ``LocalSilo`` of this SuperNode from its node config.

    Keys: ``data-path`` (CSV or Parquet, required), ``schema-path`` (the shared schema JSON; strongly
    recommended, otherwise inferred from this file alone, refusing what inference would have to guess and
    any modality seen in fewer rows than the silo's ``min-cluster-size``), ``silo-name`` (default
    ``"node-<id>"``), ``id-column`` (row identifiers, kept in the silo), ``out-dir`` (where the silo's
    memberships and labels are written on its host, ``write_local_results``), ``na-values``
    (comma-separated texts read as missing besides the empty cell), ``strip-whitespace`` and
    ``case-insensitive`` (true/false; docs/reliability.md) and the disclosure limits of ``NODE_PRIVACY_KEYS``.
    """
    from vcmc.data import read_csv, read_parquet
    from vcmc.data.normalise import Normalisation
    from vcmc.silo.local import LocalSilo

    out = node_config.get("out-dir")
    if out and not Path(str(out)).is_absolute():
        raise ConfigError("the SuperNode's node config 'out-dir' must be an absolute path on the silo's host "
                          "(the ClientApp does not run in the operator's working directory)")
    path = node_config.get("data-path")
    if not path:
        raise ConfigError("the SuperNode's node config has no 'data-path' (set it with --node-config "
                          "'data-path=\"/abs/path/data.csv\"')")
    name = str(node_config.get("silo-name") or f"node-{node_id}")
    schema = node_config.get("schema-path") or None
    id_column = node_config.get("id-column") or None
    reader = read_parquet if str(path).lower().endswith((".parquet", ".pq")) else read_csv
    privacy = privacy_from_node_config(node_config)
    normalisation = Normalisation(strip_whitespace=_flag(node_config, "strip-whitespace"),
                                  case_insensitive=_flag(node_config, "case-insensitive"))
    na_values = ("", *(t for t in str(node_config.get("na-values") or "").split(",") if t))
    data = reader(str(path), schema=schema, name=name, id_column=id_column, na_values=na_values,
                  normalisation=normalisation, min_count=privacy.min_cluster_size)
    return LocalSilo(data, privacy=privacy)


def _flag(node_config: Mapping, key: str) -> bool:
    value = node_config.get(key, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no", ""):
        raise ConfigError(f"node config {key!r} must be true or false; got {value!r}")
    return text in ("true", "1", "yes")


def write_local_results(silo, node_config: Mapping) -> None:
    """Write the silo's memberships and labels into the node config's ``out-dir`` (if set), atomically."""
    from vcmc.silo.memberships import write_membership_files

    out = node_config.get("out-dir")
    if not out or silo.assignments is None:
        return
    write_membership_files(Path(str(out)), [(silo.name, silo.memberships, silo.assignments)])


def client_handle(message, context):
    """Answer one query message on a SuperNode; never lets an unsanitised exception text out."""
    from flwr.app import Array, ArrayRecord, Error
    from flwr.app import Message as FlowerMessage
    from flwr.common.constant import ErrorCode

    stage = str(getattr(message.metadata, "message_type", "?"))
    try:
        silo = silo_from_node_config(context.node_config, getattr(context, "node_id", None))
        if _STATE_KEY in context.state:
            silo.restore_state({k: a.numpy() for k, a in context.state[_STATE_KEY].items()})
        request = decode_record(message.content)
        reply = silo.handle(request)
        if isinstance(request, AssignRequest):
            write_local_results(silo, context.node_config)
        context.state[_STATE_KEY] = ArrayRecord({k: Array(np.ascontiguousarray(v))
                                                 for k, v in silo.export_state().items()})
        return FlowerMessage(encode_record(reply), reply_to=message)
    except Exception as exc:  # noqa: BLE001 - every failure leaves the silo sanitised
        err = sanitise_exception(exc, stage)
        return FlowerMessage(Error(code=int(ErrorCode.CLIENT_APP_RAISED_EXCEPTION),
                                   reason=f"{err.error_type}: {err.reason}"), reply_to=message)
