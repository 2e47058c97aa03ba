"""Silo side of a Flower deployment: the ClientApp's handler on each SuperNode.

``client_handle(message, context)`` (every ClientApp query handler) loads the silo's data from its node
config (``data-path``, optional ``schema-path``, ``silo-name``, disclosure limits), once per run: the first
message reads the file and keeps the encoded data in ``context.state`` (``vcmc.flower.node_data``), restores
the run's state from ``context.state``, answers the request with ``LocalSilo.handle`` and stores the state back. Any
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
from vcmc.silo.errors import sanitise_exception

__all__ = ["NODE_AUXILIARY_KEYS", "NODE_POLICY_KEYS", "NODE_PRIVACY_KEYS", "auxiliary_from_node_config",
           "client_handle", "policy_from_node_config", "privacy_from_node_config", "read_node_auxiliary",
           "read_node_data", "silo_from_node_config"]

NODE_PRIVACY_KEYS = {o.key.partition(".")[2]: o.name for o in options() if o.section == "privacy"}
"""Node-config keys through which a silo's operator sets its disclosure limits: the privacy options of the
run config without their section (``min-cluster-size``, ...), from the one table of options."""

NODE_POLICY_KEYS = ("allow-requests", "allow-strategies", "request-budget", "max-iterations", "max-cpu-seconds",
                    "fingerprint-key", "max-runs-per-day", "budget-dir", "min-peers", "reproducible-rounds",
                    "exact-scalars")
"""Node-config keys of the operator-only limits of the boundary (``vcmc.silo.policy.SiloPolicy``)."""

NODE_AUXILIARY_KEYS = {"covariates": "covariate", "distal": "distal"}
"""Node-config keys naming, comma-separated, the columns of the silo's file its operator allows as covariates
of class membership and as distal outcomes of the latent class analysis (docs/design.md §15.4), with the
``model`` of the structural request each serves. The columns are kept out of the clustering; a structural
request naming any other column is refused (the silo's latent class endpoint). Like any identifying column, the
operator decides."""

_STATE_KEY = "vcmc-silo-state"


def _names(value) -> tuple[str, ...]:
    return tuple(t.strip() for t in str(value).split(",") if t.strip())


def policy_from_node_config(node_config: Mapping):
    """The operator's ``SiloPolicy`` from the node config (``SiloPolicy()`` defaults otherwise).

    ``allow-requests`` and ``allow-strategies``: comma-separated names; ``request-budget``: comma-separated
    ``type=count`` (e.g. ``"assign=1,assess=0"``); ``max-iterations``, ``max-cpu-seconds``: numbers;
    ``fingerprint-key``: a secret shared by the silos' operators; ``max-runs-per-day`` with ``budget-dir``
    (an absolute folder on the silo's host that outlives runs): the runs a server may start in 24 hours;
    ``exact-scalars`` (true/false): scalar sums over the rows sent as computed where nothing is protected.
    """
    from vcmc.silo.policy import SiloPolicy

    kwargs: dict = {}
    try:
        if "allow-requests" in node_config:
            kwargs["allowed_requests"] = _names(node_config["allow-requests"])
        if "allow-strategies" in node_config:
            kwargs["allowed_strategies"] = _names(node_config["allow-strategies"])
        if "request-budget" in node_config:
            pairs = [t.split("=", 1) for t in _names(node_config["request-budget"])]
            if any(len(p) != 2 for p in pairs):
                raise ValueError("request-budget")
            kwargs["budget"] = {k.strip(): int(v) for k, v in pairs}
        if node_config.get("max-iterations") not in (None, ""):
            kwargs["max_iterations"] = int(node_config["max-iterations"])
        if node_config.get("max-cpu-seconds") not in (None, ""):
            kwargs["max_cpu_seconds"] = float(node_config["max-cpu-seconds"])
        if node_config.get("max-runs-per-day") not in (None, ""):
            kwargs["max_runs_per_day"] = int(node_config["max-runs-per-day"])
        if node_config.get("min-peers") not in (None, ""):
            kwargs["min_peers"] = int(node_config["min-peers"])
    except ValueError:
        raise ConfigError("node config: request-budget must be 'type=count,...', max-iterations, "
                          "max-runs-per-day and min-peers integers and max-cpu-seconds a number") from None
    if "reproducible-rounds" in node_config:
        kwargs["reproducible_rounds"] = _flag(node_config, "reproducible-rounds")
    if node_config.get("budget-dir"):
        if not Path(str(node_config["budget-dir"])).is_absolute():
            raise ConfigError("the SuperNode's node config 'budget-dir' must be an absolute path on the silo's host")
        kwargs["budget_dir"] = str(node_config["budget-dir"])
    if node_config.get("fingerprint-key"):
        kwargs["fingerprint_key"] = str(node_config["fingerprint-key"])
    if "exact-scalars" in node_config:
        kwargs["exact_scalars"] = _flag(node_config, "exact-scalars")
    return SiloPolicy(**kwargs)


def auxiliary_from_node_config(node_config: Mapping) -> dict[str, tuple[str, ...]]:
    """The operator's allowed auxiliary columns per structural model: ``{"covariate": (...), "distal": (...)}``."""
    out = {model: _names(node_config.get(key) or "") for key, model in NODE_AUXILIARY_KEYS.items()}
    both = set(out["covariate"]) & set(out["distal"])
    if both:
        raise ConfigError(f"node config: columns {sorted(both)} are listed both under 'covariates' and 'distal'; "
                          "a column is one or the other")
    return out


def privacy_from_node_config(node_config: Mapping) -> PrivacyConfig:
    """The silo operator's disclosure limits from the SuperNode's node config (defaults otherwise)."""
    kwargs = {}
    for key, field in NODE_PRIVACY_KEYS.items():
        if key in node_config:
            kwargs[f"privacy.{field}"] = node_config[key]
    return config_from_mapping(kwargs, base=None).privacy if kwargs else PrivacyConfig()


def silo_from_node_config(node_config: Mapping, node_id: int | None = None, run_id=None):
    """Build the ``LocalSilo`` of this SuperNode from its node config.

    Keys: ``data-path`` (CSV or Parquet, required), ``schema-path`` (the shared schema JSON; strongly
    recommended, otherwise inferred from this file alone, refusing what inference would have to guess and
    any modality seen in fewer rows than the silo's ``min-cluster-size``), ``silo-name`` (default
    ``"node-<id>"``), ``id-column`` (row identifiers, kept in the silo), ``out-dir`` (where the silo's
    memberships and labels are written on its host, ``LocalSilo.write_labels``), ``na-values``
    (comma-separated texts read as missing besides the empty cell), ``strip-whitespace`` and
    ``case-insensitive`` (true/false; docs/reliability.md), the disclosure limits of ``NODE_PRIVACY_KEYS``, the
    boundary's limits of ``NODE_POLICY_KEYS``, and the rounds' keys: ``rounds-key`` (the file of this silo's
    private key) and ``rounds-peers`` (``name=public key`` of every other silo, comma-separated, or a file of
    them; ``vcmc.silo.secure_sum``). ``run_id`` (Flower's) keys the schema fingerprint sent.
    """
    return _local_silo(read_node_data(node_config, node_id), node_config, run_id)


def _local_silo(data, node_config: Mapping, run_id=None, auxiliary=None):
    """The ``LocalSilo`` over ``data`` with the operator's disclosure limits and boundary policy, its ``out-dir``
    and the auxiliary columns of the latent class analysis (``read_node_auxiliary``) with the uses allowed."""
    from vcmc.silo.local import LocalSilo
    from vcmc.silo.secure_sum import parse_peers, read_private_key

    key = node_config.get("rounds-key")
    return LocalSilo(data, privacy=privacy_from_node_config(node_config), policy=policy_from_node_config(node_config),
                     run_key=None if run_id is None else str(run_id), auxiliary=auxiliary,
                     out_dir=node_config.get("out-dir") or None,
                     allowed_auxiliary=auxiliary_from_node_config(node_config),
                     rounds_key=read_private_key(key) if key else None,
                     rounds_peers=parse_peers(node_config.get("rounds-peers")))


def _auxiliary_names(node_config: Mapping) -> list[str]:
    allowed = auxiliary_from_node_config(node_config)
    return [*allowed["covariate"], *allowed["distal"]]


def _na_values(node_config: Mapping) -> tuple[str, ...]:
    return ("", *(t for t in str(node_config.get("na-values") or "").split(",") if t))


def _read_frame(node_config: Mapping):
    from vcmc.data.readers import read_any

    path = node_config.get("data-path")
    if not path:
        raise ConfigError("the SuperNode's node config has no 'data-path' (set it with --node-config "
                          "'data-path=\"/abs/path/data.csv\"')")
    return read_any(Path(str(path)))


def read_node_auxiliary(node_config: Mapping):
    """The auxiliary columns named in the node config (``NODE_AUXILIARY_KEYS``), as the silo's file holds
    them: text cells, NaN for the empty cell and the node config's ``na-values`` (what ``vcmc fit --k
    --covariates`` reads in process); None when the node config names none."""
    names = _auxiliary_names(node_config)
    if not names:
        return None
    df = _read_frame(node_config)
    missing = [c for c in names if c not in df.columns]
    if missing:
        # names only (the operator's own configuration and the file's header), never a value
        raise ConfigError(f"node config 'covariates' / 'distal' name columns {missing} that the silo's file "
                          "(node config 'data-path') does not have")
    na = set(_na_values(node_config))
    aux = df[names].copy()
    for c in names:
        aux[c] = aux[c].map(lambda v: np.nan if (v is None or (isinstance(v, str) and v in na)
                                                 or (isinstance(v, float) and np.isnan(v))) else v)
    return aux.reset_index(drop=True)


def read_node_data(node_config: Mapping, node_id: int | None = None):
    """Read and encode the silo's file as its node config says (``silo_from_node_config`` lists the keys)."""
    from vcmc.data import read_csv, read_parquet
    from vcmc.data.normalise import Normalisation

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
    na_values = _na_values(node_config)
    auxiliary = _auxiliary_names(node_config)
    if auxiliary:    # the columns kept aside for the latent class analysis are not clustered
        from vcmc.data.readers import from_dataframe

        df = _read_frame(node_config)
        absent = [c for c in auxiliary if c not in df.columns]
        if absent:
            # names only, and not the file's path: this text crosses to the server
            raise ConfigError(f"node config 'covariates' / 'distal' name columns {absent} that the silo's file "
                              "(node config 'data-path') does not have")
        return from_dataframe(df.drop(columns=auxiliary), schema=schema, name=name, source=str(path),
                              id_column=id_column, na_values=na_values, normalisation=normalisation,
                              min_modality_rows=privacy.min_cluster_size)
    return reader(str(path), schema=schema, name=name, id_column=id_column, na_values=na_values,
                  normalisation=normalisation, min_modality_rows=privacy.min_cluster_size)


def _flag(node_config: Mapping, key: str) -> bool:
    value = node_config.get(key, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no", ""):
        raise ConfigError(f"node config {key!r} must be true or false; got {value!r}")
    return text in ("true", "1", "yes")


def _silo_for_message(context):
    """This run's ``LocalSilo``, its data read once per run and kept in the node state
    (``vcmc.flower.node_data``), not re-read for every message."""
    from vcmc.flower.node_data import cached_silo_data

    data = cached_silo_data(context, lambda: read_node_data(context.node_config, getattr(context, "node_id", None)),
                            has_run_state=any(k.startswith("local.") for k in context.state.get(_STATE_KEY, {})))
    auxiliary = None
    if _auxiliary_names(context.node_config):
        from vcmc.flower.node_data import cached_auxiliary

        auxiliary = cached_auxiliary(context, lambda: read_node_auxiliary(context.node_config))
    return _local_silo(data, context.node_config, getattr(context, "run_id", None), auxiliary=auxiliary)


def client_handle(message, context):
    """Answer one query message on a SuperNode; never lets an unsanitised exception text out."""
    from flwr.app import Array, ArrayRecord, Error
    from flwr.app import Message as FlowerMessage
    from flwr.common.constant import ErrorCode

    stage = str(getattr(message.metadata, "message_type", "?"))
    try:
        silo = _silo_for_message(context)
        if _STATE_KEY in context.state:
            silo.restore_state({k: a.numpy() for k, a in context.state[_STATE_KEY].items()})
        request = decode_record(message.content)
        if stage != f"query.{getattr(request, 'ACTION', '?')}":
            raise ConfigError(f"a {request.KIND!r} message arrived on the {stage!r} handler; each request type "
                              "has its own handler")
        try:
            reply = silo.handle(request)
        finally:
            # the run's request counts are kept even when a request is refused (budgets and the log hold)
            context.state[_STATE_KEY] = ArrayRecord({k: Array(np.ascontiguousarray(v))
                                                     for k, v in silo.export_state().items()})
        return FlowerMessage(encode_record(reply), reply_to=message)
    except Exception as exc:  # noqa: BLE001 - every failure leaves the silo sanitised
        err = sanitise_exception(exc, stage)
        return FlowerMessage(Error(code=int(ErrorCode.CLIENT_APP_RAISED_EXCEPTION),
                                   reason=f"{err.error_type}: {err.reason}"), reply_to=message)
