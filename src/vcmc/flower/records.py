"""vcmc messages as Flower ``RecordDict`` objects and back (both sides of a Flower deployment use this).

A request travels as the Flower message type ``query.<ACTION>`` (its declared action,
``vcmc.protocol.message.Request``), handled on that name by the ClientApp."""

from __future__ import annotations

import numpy as np

from vcmc.protocol import Message, decode_message

__all__ = ["decode_record", "encode_record", "record_nbytes"]

_INT64 = (-(2**63), 2**63 - 1)


def encode_record(message: Message):
    """A vcmc message as a Flower ``RecordDict``: arrays in an ``ArrayRecord``, scalars in a ``ConfigRecord``.

    Integers outside int64 (e.g. a 128-bit seed entropy) travel as decimal strings in ``"bigints"``.
    """
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

    arrays, scalars, bigints = {}, {}, {}
    for key, value in message.to_arrays().items():
        if isinstance(value, np.ndarray):
            arrays[key] = Array(np.ascontiguousarray(value))
        elif isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
            bigints[key] = str(value)
        else:
            scalars[key] = value
    return RecordDict({"arrays": ArrayRecord(arrays), "scalars": ConfigRecord(scalars),
                       "bigints": ConfigRecord(bigints)})


def decode_record(record) -> Message:
    """Rebuild a vcmc message from ``encode_record``'s ``RecordDict`` (checks kind and version)."""
    flat: dict[str, object] = {}
    if "arrays" in record:
        for key, arr in record["arrays"].items():
            flat[key] = arr.numpy()
    if "scalars" in record:
        flat.update(dict(record["scalars"]))
    if "bigints" in record:
        flat.update({k: int(v) for k, v in dict(record["bigints"]).items()})
    return decode_message(flat)


def record_nbytes(record) -> int:
    """Payload bytes of a ``RecordDict``: the arrays' data plus the scalars' text (Flower's framing, HTTP and
    TLS excluded). What the operators' logs report as "sent" per silo and per round."""
    total = 0
    for item in record.values():
        if hasattr(item, "numpy") or not hasattr(item, "items"):
            continue
        for value in item.values():
            data = getattr(value, "data", None)
            if isinstance(data, bytes | bytearray | memoryview):
                total += len(data)
            else:
                total += len(str(value).encode())
    return total
