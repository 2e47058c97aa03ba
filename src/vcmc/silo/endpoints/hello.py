"""Hello: the silo's name, schema fingerprint (keyed per run in a deployment) and vcmc version."""

from __future__ import annotations

import dataclasses
from importlib.metadata import PackageNotFoundError, version

from vcmc.protocol import HelloReply, HelloRequest
from vcmc.silo.endpoints import endpoint


def vcmc_version() -> str:
    try:
        return version("vcmc")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def admit(gate, request: HelloRequest) -> HelloRequest:
    return request


def answer(silo, request: HelloRequest) -> HelloReply:
    from vcmc.silo.secure_sum import fingerprint, public_of

    key = "" if silo.rounds_key is None else fingerprint(public_of(silo.rounds_key))
    return HelloReply(silo=silo.name, schema_fingerprint=silo.data.schema.fingerprint(),
                      n_modalities=silo.n_modalities, vcmc_version=vcmc_version(), rounds_key=key,
                      min_peers=1 if silo.own_session else int(silo.gate.policy.min_peers),
                      n_gaussian=0 if silo.values is None else int(silo.values.shape[1]))


def release(gate, request, reply: HelloReply) -> HelloReply:
    return dataclasses.replace(reply, schema_fingerprint=gate.fingerprint(reply.schema_fingerprint))


endpoint(HelloRequest, admit=admit, answer=answer, release=release)
