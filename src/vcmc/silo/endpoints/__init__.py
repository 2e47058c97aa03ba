"""The silo's endpoints: one module per request family, each holding the family's admission rule, answer and
release rule side by side (docs/federation.md, "Disclosure table").

An endpoint is declared once, with ``endpoint(RequestType, admit=..., answer=..., release=...)``, in its
family's module; every module of this package is imported here, so importing the package declares them all.
``LocalSilo.handle`` runs ``Gate.admit`` (the rules every request shares, then the endpoint's ``admit``), the
endpoint's ``answer``, ``Gate.release`` (the endpoint's ``release``) and, for the few that change what the silo
keeps on its host, ``after``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from vcmc.exceptions import ConfigError


@dataclass(frozen=True)
class Endpoint:
    """What the silo does with one request type.

    admit(gate, request) -> request
        The request's own admission rule, after the rules every request shares (``Gate.admit``): its checks
        against the protocol and the operator's limits; returns the request to answer (server-chosen
        probabilities floored). Raises ``DisclosureError`` or ``ConfigError`` (names, shapes, limits only).
    answer(silo, request) -> reply
        The computation on the silo's rows (``vcmc.mcmc``, ``vcmc.rows``) and the reply built from it, of the
        request's ``REPLY[0]`` type.
    release(gate, request, reply) -> reply
        The reply as it may leave the silo: the disclosure rules of each of its fields.
    after(silo, request) -> None, optional
        What the silo does on its own host once the reply is released (its label files).
    """

    request: type
    admit: Callable
    answer: Callable
    release: Callable
    after: Callable | None = None


ENDPOINTS: dict[type, Endpoint] = {}
"""The endpoint of every request type the silo answers."""


def endpoint(request: type, *, admit: Callable, answer: Callable, release: Callable,
             after: Callable | None = None) -> Endpoint:
    """Declare the endpoint of ``request`` (once per request type)."""
    if request in ENDPOINTS:
        raise TypeError(f"two endpoints for {request.__name__}")
    ENDPOINTS[request] = out = Endpoint(request, admit, answer, release, after)
    return out


def endpoint_of(request) -> Endpoint:
    """The endpoint of a request; ``ConfigError`` for a message the silo does not answer."""
    found = ENDPOINTS.get(type(request))
    if found is None:
        raise ConfigError(f"no endpoint answers a {getattr(request, 'KIND', type(request).__name__)!r} message")
    return found


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
