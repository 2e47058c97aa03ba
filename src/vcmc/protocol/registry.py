"""The registry of the silo boundary's messages: every table of it derived from the message classes.

A ``Request`` or ``Reply`` class registers itself when it is defined (``vcmc.protocol.message``), and the
request families (one module per family: ``hello``, ``summarize``, ``divergence``, ``counts``,
``announce``, ``assign``, ``assess``, ``lca``, ``rounds``) are imported by ``vcmc.protocol``, so importing
the package registers the whole protocol. What used to be kept by hand in tables elsewhere is read here:
the kind of every message (decoding), the action of every request (the operator's names, the Flower
message types, the ClientApp's handlers), the reply each expects, the default budgets, and the strategies
that cannot be made safe (those some request belongs to).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import typing
from collections.abc import Iterator, Mapping

import numpy as np

from vcmc.exceptions import ConfigError, InconsistentSiloSummaries

_REQUESTS: dict[str, type] = {}       # by kind, in the order they were defined
_REPLIES: dict[str, type] = {}
_ORDER: list[type] = []                # every message class, in the order it was defined


UNDECLARED = object()
"""The default of a declaration a request must make (its budget: None is a declaration, of no limit)."""


def _fail(cls, what: str):
    raise TypeError(f"request {cls.__name__} must declare {what} (vcmc.protocol.message.Request; CONTRIBUTING.md, "
                    "'Adding a request')")


def _variant(cls) -> bool:
    """A subclass of a registered message that declares no kind of its own (another version of it, in a test):
    not a message type of its own."""
    return "KIND" not in vars(cls) and any(base in _ORDER for base in cls.__mro__[1:])


def register_request(cls, *, action, reply, budget, strategies, without_summary) -> None:
    """Check a request class's declarations, set them as its class attributes and record it. Raises
    ``TypeError`` naming what is missing or malformed."""
    if action is None and _variant(cls):
        return
    if not isinstance(action, str) or not action.isidentifier():
        _fail(cls, "its action, a Python identifier (class keyword 'action')")
    replies = reply if isinstance(reply, tuple) else (reply,)
    if not replies or not all(r in _REPLIES.values() for r in replies):
        _fail(cls, "its reply, a Reply class defined before it or a tuple of them, the endpoint's answer first "
                   "(class keyword 'reply')")
    if budget is UNDECLARED or not (budget is None or (isinstance(budget, int) and budget >= 0)):
        _fail(cls, "its budget, requests per run by default: an int >= 0, or None for no limit (class keyword "
                   "'budget')")
    if not (isinstance(strategies, tuple) and all(isinstance(s, str) for s in strategies)):
        _fail(cls, "its strategies as a tuple of strategy names (class keyword 'strategies')")
    if not (isinstance(without_summary, bool) or (isinstance(without_summary, tuple) and all(
            isinstance(s, str) for s in without_summary))):
        _fail(cls, "without_summary as a bool or a tuple of strategy names")
    if "KIND" in vars(cls):
        _fail(cls, "no KIND of its own: it is '<action>_request'")
    cls.KIND, cls.ACTION, cls.REPLY, cls.BUDGET = f"{action}_request", action, replies, budget
    cls.STRATEGIES, cls.WITHOUT_SUMMARY = strategies, without_summary
    if cls.KIND in _REQUESTS or cls.KIND in _REPLIES:
        raise TypeError(f"two messages of kind {cls.KIND!r}: {_REQUESTS.get(cls.KIND) or _REPLIES[cls.KIND]} and {cls}")
    _REQUESTS[cls.KIND] = cls
    _ORDER.append(cls)


def register_reply(cls) -> None:
    """Record a reply class (any message a silo may send)."""
    if _variant(cls):
        return
    if "KIND" not in vars(cls) or not isinstance(cls.KIND, str):
        raise TypeError(f"reply {cls.__name__} must declare its KIND")
    if cls.KIND in _REQUESTS or cls.KIND in _REPLIES:
        raise TypeError(f"two messages of kind {cls.KIND!r}: {_REQUESTS.get(cls.KIND) or _REPLIES[cls.KIND]} and {cls}")
    _REPLIES[cls.KIND] = cls
    _ORDER.append(cls)


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """Messages defined inside the block are registered only until it ends (a test's own request types)."""
    saved = dict(_REQUESTS), dict(_REPLIES), list(_ORDER)
    try:
        yield
    finally:
        _REQUESTS.clear(), _REPLIES.clear(), _ORDER.clear()
        _REQUESTS.update(saved[0]), _REPLIES.update(saved[1]), _ORDER.extend(saved[2])


# -- the derived tables ----------------------------------------------------------------------------------------

def request_types() -> tuple[type, ...]:
    """Every request class, in the order defined."""
    return tuple(_REQUESTS.values())


def reply_types() -> tuple[type, ...]:
    """Every reply class (every message a silo may send), in the order defined."""
    return tuple(_REPLIES.values())


def message_types() -> tuple[type, ...]:
    """Every message that may cross the silo boundary (the row-level test walks them)."""
    return tuple(_ORDER)


def by_kind(kind: str) -> type | None:
    return _REQUESTS.get(kind) or _REPLIES.get(kind)


def actions() -> tuple[str, ...]:
    """The action of every request: the operator's names of the request types and their Flower handlers."""
    return tuple(r.ACTION for r in _REQUESTS.values())


def request_of_action(action: str) -> type | None:
    return next((r for r in _REQUESTS.values() if action == r.ACTION), None)


def default_budgets() -> dict[str, int | None]:
    """Requests of each action a run may make unless the operator says otherwise."""
    return {r.ACTION: r.BUDGET for r in _REQUESTS.values()}


def unsafe_strategies() -> tuple[str, ...]:
    """The strategies some request belongs to: their round trips let the server choose the parameters at which
    a silo sums its rows, so the operator must allow them (docs/federation.md)."""
    return tuple(dict.fromkeys(s for r in _REQUESTS.values() for s in r.STRATEGIES))


def check_known_actions(names, what: str) -> None:
    """Raise ``ConfigError`` when a name in ``names`` is not a request's action."""
    known = set(actions())
    bad = [n for n in names if n not in known]
    if bad:
        raise ConfigError(f"{what} must be among {sorted(known)}; got {bad}")


# -- decoding --------------------------------------------------------------------------------------------------

def decode_message(arrays: Mapping[str, object]):
    """Rebuild any message from its ``to_arrays()`` encoding, dispatching on ``__kind__``.

    Raises
    ------
    InconsistentSiloSummaries
        If the kind is unknown, the version differs from this vcmc's, or the fields are malformed.
    """
    kind = arrays.get("__kind__")
    if isinstance(kind, np.ndarray) and kind.ndim == 0:
        kind = kind.item()
    cls = by_kind(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InconsistentSiloSummaries(
            f"unknown message kind {kind!r}; this vcmc understands {sorted({*_REQUESTS, *_REPLIES})}")
    scalars = _scalar_keys(cls)
    plain = {k: (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "USbifu"
                 and k in scalars else v) for k, v in arrays.items()}
    try:
        return cls.from_arrays(plain)
    except (InconsistentSiloSummaries, ConfigError):
        # a kind, version or field refused, or an option out of its range (the config dataclasses' own
        # message, naming the option): said as it is
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise InconsistentSiloSummaries(
            f"malformed {kind!r} message: {type(exc).__name__} while decoding its fields") from None


@functools.cache
def _scalar_keys(cls) -> tuple[str, ...]:
    """Field names (and the header) whose values are scalars, so 0-d arrays read from disk become scalars."""
    hints = typing.get_type_hints(cls)
    keys = ["__kind__", "__version__"]
    for f in dataclasses.fields(cls):
        alts = typing.get_args(hints[f.name]) or (hints[f.name],)
        if not any(a is np.ndarray for a in alts) and typing.get_origin(hints[f.name]) is not tuple:
            keys.append(f.name)
    return tuple(keys)
