"""The silo's encoded data, read once per run and kept in the SuperNode's node state (``Context.state``).

Flower 1.42 starts a fresh ClientApp process for every message of a run (hello, summarize, divergence or
counts, assign, assess), and hands it the run's ``Context``, whose ``state`` the SuperNode keeps between
the messages of that run, on the silo's own host, and discards with the run. The first message of a run
reads and encodes the silo's file (CSV or Parquet parsing, schema checks: the slow part for a large
file); it stores the encoded codes and the schema's JSON in ``state``, and every later message rebuilds
the ``SiloData`` from them without touching the file. So a run also uses one reading of the file even if
the file is replaced while the run is going on.

The cached entry is tied to the node config it was read with (a digest of its items) and to the data and
schema files' size and modification times (one ``stat`` each per message, no reading). A file replaced
while the run goes on is read again as long as the run has no silo state yet (only hellos so far), and
refused once it has: the local partition and memberships of the summarize round describe the rows of the
file as it was, and answering later requests from other rows would be silently wrong. The codes are
row-level, like the silo's other state (``vcmc.flower.client``), and never leave the SuperNode.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["AUXILIARY_KEY", "DATA_KEY", "INFO_KEY", "cached_auxiliary", "cached_silo_data", "files_signature",
           "node_config_digest"]

DATA_KEY = "vcmc-silo-data"
"""``ArrayRecord`` in ``Context.state``: the silo's codes (and numeric row ids)."""

INFO_KEY = "vcmc-silo-data-info"
"""``ConfigRecord`` in ``Context.state``: name, source, schema JSON and the node-config digest."""

AUXILIARY_KEY = "vcmc-silo-auxiliary"
"""``ArrayRecord`` in ``Context.state``: the auxiliary columns the operator named in the node config
(``covariates``, ``distal``: kept out of the clustering, for the latent class analysis' three-step models,
docs/design.md §15.4), each as its cells' text and a missing-cell mask. Row-level: it stays on the SuperNode."""


def node_config_digest(node_config: Mapping) -> str:
    """sha256 of the node config's items (keys sorted; values as text)."""
    text = json.dumps({str(k): str(v) for k, v in sorted(node_config.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def files_signature(node_config: Mapping) -> str:
    """Size and modification times of the node config's data and schema files (empty for a missing one)."""
    parts = []
    for key in ("data-path", "schema-path"):
        path = node_config.get(key)
        try:
            st = os.stat(str(path)) if path else None
        except OSError:
            st = None
        parts.append("" if st is None else f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
    return "|".join(parts)


def cached_silo_data(context, read: Callable[[], object], *, has_run_state: bool = False):
    """The silo's ``SiloData``: from ``context.state`` when this run already read the files as they are,
    else ``read()`` (and stored in ``context.state`` for the run's later messages).

    Raises ``DataError`` when a file changed after the run's silo state was made (``has_run_state``).
    """
    from flwr.app import Array, ArrayRecord, ConfigRecord

    digest = node_config_digest(context.node_config)
    signature = files_signature(context.node_config)
    state = context.state
    if DATA_KEY in state and INFO_KEY in state and state[INFO_KEY].get("node-config") == digest:
        if state[INFO_KEY].get("files") == signature:
            return _rebuild(state[DATA_KEY], state[INFO_KEY])
        if has_run_state:
            from vcmc.exceptions import DataError

            raise DataError("the silo's data or schema file (node config 'data-path', 'schema-path') changed "
                            "during the run, after the silo's summary was computed from it; restore the file "
                            "or start a new run")
    data = read()
    arrays = {"codes": Array(np.ascontiguousarray(data.codes))}
    if getattr(data, "values", None) is not None:       # continuous items (docs/design.md §17.2)
        arrays["values"] = Array(np.ascontiguousarray(data.values))
    info = {"name": data.name, "source": data.source or "", "schema": data.schema.to_json(),
            "node-config": digest, "files": signature, "row-ids": "none"}
    if data.row_ids is not None:
        ids = np.asarray(data.row_ids)
        if ids.dtype.kind in "iuf":
            arrays["row_ids"] = Array(np.ascontiguousarray(ids))
            info["row-ids"] = "array"
        else:    # text identifiers: a list of strings (a ConfigRecord holds lists of str)
            info["row-ids"] = "text"
            info["row-id-values"] = [str(v) for v in ids.tolist()]
    state[DATA_KEY] = ArrayRecord(arrays)
    state[INFO_KEY] = ConfigRecord(info)
    return data


def _rebuild(arrays, info):
    from vcmc.data import Schema, SiloData

    kind = info.get("row-ids", "none")
    row_ids = (arrays["row_ids"].numpy() if kind == "array"
               else np.asarray(list(info["row-id-values"]), dtype=object) if kind == "text" else None)
    return SiloData(str(info["name"]), arrays["codes"].numpy(), Schema.from_json(str(info["schema"])),
                    source=str(info["source"]) or None, row_ids=row_ids,
                    values=arrays["values"].numpy() if "values" in arrays else None)


def cached_auxiliary(context, read: Callable[[], object]):
    """The silo's auxiliary columns (a data frame of text cells, NaN where missing, or None): from
    ``context.state`` when this run already read them from the files as they are, else ``read()``.

    Cached beside the codes (``cached_silo_data``, which is called first and refuses a changed file once
    the run has silo state): the same node-config digest and file signature key the entry.
    """
    import pandas as pd
    from flwr.app import Array, ArrayRecord

    key = f"{node_config_digest(context.node_config)}|{files_signature(context.node_config)}"
    state = context.state
    if AUXILIARY_KEY in state and INFO_KEY in state and state[INFO_KEY].get("auxiliary") == key:
        arrays = state[AUXILIARY_KEY]
        names = list(state[INFO_KEY].get("auxiliary-columns") or [])
        # cells as Python strings in object columns (NaN where missing), as the file's reader gives them
        frame = pd.DataFrame({n: pd.Series([np.nan if m else v for v, m in zip(
            arrays[f"values.{i}"].numpy().tolist(), arrays[f"missing.{i}"].numpy().tolist(), strict=True)],
            dtype=object) for i, n in enumerate(names)})
        return frame if names else None
    frame = read()
    arrays = {}
    names = [] if frame is None else [str(c) for c in frame.columns]
    for i, n in enumerate(names):
        missing = frame[n].isna().to_numpy()
        arrays[f"values.{i}"] = Array(np.asarray(["" if m else str(v) for v, m in
                                                  zip(frame[n].tolist(), missing, strict=True)], dtype=np.str_))
        arrays[f"missing.{i}"] = Array(np.ascontiguousarray(missing))
    state[AUXILIARY_KEY] = ArrayRecord(arrays)
    if INFO_KEY in state:
        state[INFO_KEY]["auxiliary"] = key
        state[INFO_KEY]["auxiliary-columns"] = names
    return frame
