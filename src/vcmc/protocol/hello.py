"""The hello family: who a silo is (its operator-chosen name, schema and library version); no data involved."""

from __future__ import annotations

from dataclasses import dataclass

from vcmc.protocol.message import Reply, Request


@dataclass(frozen=True)
class HelloReply(Reply):
    """The silo's name, the fingerprint and modality counts of its schema, its vcmc version and the fingerprint of
    its public key of the rounds' secure sums (empty when its operator has not set one: it does not take part in
    a deployment's rounds) and the fewest participants it takes part in rounds with (its operator's
    ``min-peers``), so that a server plans the rounds only where every silo will take part. ``n_gaussian``: its
    continuous items (the schema's, G), which a server that holds no silo object needs to fit them (the latent
    class analysis over a transport: docs/design.md §17.5)."""

    KIND = "hello_reply"
    VERSION = 1

    silo: str
    schema_fingerprint: str
    n_modalities: tuple[int, ...]
    vcmc_version: str
    rounds_key: str = ""
    min_peers: int = 1
    n_gaussian: int = 0


@dataclass(frozen=True)
class HelloRequest(Request, action="hello", reply=HelloReply, budget=None, without_summary=True):
    """Ask a silo who it is.

    Used by transports that reach silos they did not create (worker processes, Flower SuperNodes) to map
    their own handles (a process, a Flower node id) to silo names.
    """

    VERSION = 1

    protocol_version: int = 1
