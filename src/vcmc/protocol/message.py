"""Base of every object that crosses the silo boundary: frozen, typed, versioned, plain-array encoded.

A message is a frozen dataclass whose fields are numpy arrays, Python scalars (int, float, bool, str),
tuples of them, ``dict[str, float]``, another message (``SummarizeRequest.config``: its keys are prefixed
with the field's name and a '.') or ``None``. ``to_arrays`` gives a flat ``dict[str, ndarray | scalar]``
that travels unchanged in-process, through a process pool or in Flower ``ArrayRecord``/``ConfigRecord``;
``from_arrays`` rebuilds and re-validates it. ``VERSION`` is checked on decoding; a message class with
``CLOSED = True`` also refuses a key it has no field for (the server cannot slip in an option the silo
would silently ignore).

A ``Request`` declares itself: its action (the operator's name of it, its Flower message type), the reply
it expects, its default budget per run, the strategies the operator must allow for it and whether it may
come before the silo's summary of the run. A ``Reply`` carries the server's consistency check of itself.
Defining either class registers it (``vcmc.protocol.registry``); every table of the boundary (the message
kinds, the actions, the budgets, the strategies that cannot be made safe) is derived from them.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import ClassVar

import numpy as np

from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.protocol import registry

_DICT_SEP = "."


@dataclasses.dataclass(frozen=True)
class Message:
    """Mixin of message dataclasses. Subclasses set ``KIND`` and ``VERSION``."""

    KIND: ClassVar[str] = "message"
    VERSION: ClassVar[int] = 1
    CLOSED: ClassVar[bool] = False

    def to_arrays(self) -> dict[str, object]:
        """Flat encoding: arrays stay arrays, scalars stay scalars, dicts are flattened with a '.'."""
        out: dict[str, object] = {"__kind__": self.KIND, "__version__": int(self.VERSION)}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, dict):
                for k, v in value.items():
                    out[f"{f.name}{_DICT_SEP}{k}"] = float(v)
            elif isinstance(value, Message):
                for k, v in value.to_arrays().items():
                    out[f"{f.name}{_DICT_SEP}{k}"] = v
            elif isinstance(value, tuple):
                out[f.name] = np.asarray(value)
            elif isinstance(value, np.ndarray):
                out[f.name] = value
            elif isinstance(value, (bool, int, float, str, np.integer, np.floating)):
                out[f.name] = value.item() if isinstance(value, np.generic) else value
            else:  # pragma: no cover - guarded by the message-type test
                raise TypeError(f"field {f.name!r} of {type(self).__name__} has unsupported type "
                                f"{type(value).__name__}")
        return out

    @classmethod
    def from_arrays(cls, arrays: typing.Mapping[str, object]):
        """Rebuild from ``to_arrays`` output; raises if the kind or version differs."""
        kind = arrays.get("__kind__")
        version = arrays.get("__version__")
        if kind != cls.KIND:
            raise InconsistentSiloSummaries(f"expected a {cls.KIND!r} message, got kind {kind!r}")
        if version is None or int(version) != cls.VERSION:
            raise InconsistentSiloSummaries(
                f"{cls.KIND!r} message has version {version!r}; this vcmc understands version "
                f"{cls.VERSION}. Upgrade the silo and the server to the same vcmc release.")
        if cls.CLOSED:
            _refuse_unknown_keys(cls, arrays, _type_hints(cls))
        kwargs: dict[str, object] = {}
        for name, kind, hint in _field_kinds(cls):
            if kind == "message":
                prefix = f"{name}{_DICT_SEP}"
                nested = {k[len(prefix):]: v for k, v in arrays.items() if isinstance(k, str) and k.startswith(prefix)}
                if nested:
                    kwargs[name] = hint.from_arrays(nested)
            elif kind == "dict":
                prefix = f"{name}{_DICT_SEP}"
                kwargs[name] = {k[len(prefix):]: float(v) for k, v in arrays.items()
                                if isinstance(k, str) and k.startswith(prefix)}
            elif name in arrays:
                value = arrays[name]
                if kind == "tuple":
                    value = tuple(np.asarray(value).tolist())
                elif kind != "array" and isinstance(value, np.ndarray) and value.ndim == 0:
                    value = value.item()
                kwargs[name] = value
        return cls(**kwargs)


@dataclasses.dataclass(frozen=True)
class Reply(Message):
    """A silo's answer to a request. ``check_reply`` is the server's check of it (``vcmc.federation.faults``)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        registry.register_reply(cls)

    def check_reply(self, request: Request, silo: str) -> None:
        """Raise ``InconsistentSiloSummaries`` when this reply to ``request`` from ``silo`` is malformed (NaN,
        negative counts, shapes other than the request asked for). Its type was checked already."""

    @staticmethod
    def refuse(request: Request, silo: str, problem: str):
        """The error of a malformed reply, in the words every reply check uses."""
        raise InconsistentSiloSummaries(f"reply of silo {silo!r} to {request.KIND}: {problem}")


@dataclasses.dataclass(frozen=True)
class Request(Message):
    """A request of the server to a silo. It declares itself in its class statement (checked there):
    ``class HelloRequest(Request, action="hello", reply=HelloReply, budget=None)``.

    Declarations (class keywords, kept as the class attributes of the same names in capitals)
    ----------------------------------------------------------------------------------------
    action : str
        The operator's name of the request (node config ``allow-requests`` and ``request-budget``, the silo's
        log) and its Flower message type ``query.<action>``; its ``KIND`` is ``<action>_request``.
    reply : Reply type, or tuple of them
        What the silo's endpoint answers (the first) and the other forms the gate's release may give that
        answer (a masked table under secure aggregation); any request may also be answered by an
        ``ErrorReply``.
    budget : int or None
        Requests of this type a run may make by default (None: no limit); the operator's
        ``request-budget`` overrides it.
    strategies : tuple of str, optional
        The strategies of which the operator must allow one for the silo to answer (the requests whose
        parameters the server chooses round after round; docs/federation.md). Default: none.
    without_summary : bool or tuple of str, optional
        False (default): only after the silo's summary of the run; True: at any time; a tuple: also before
        the summary where the operator allows one of these strategies.
    """

    ACTION: ClassVar[str] = ""
    REPLY: ClassVar[tuple[type[Reply], ...]] = ()
    BUDGET: ClassVar[int | None] = None
    STRATEGIES: ClassVar[tuple[str, ...]] = ()
    WITHOUT_SUMMARY: ClassVar[bool | tuple[str, ...]] = False

    def __init_subclass__(cls, *, action: str | None = None, reply=None, budget=registry.UNDECLARED,
                          strategies: tuple[str, ...] = (), without_summary: bool | tuple[str, ...] = False,
                          **kwargs):
        super().__init_subclass__(**kwargs)
        registry.register_request(cls, action=action, reply=reply, budget=budget, strategies=strategies,
                                  without_summary=without_summary)


@dataclasses.dataclass(frozen=True)
class ErrorReply(Reply):
    """A request failed inside the silo. ``reason`` is sanitised: it never carries data values.

    ``error_type`` is the exception class name (e.g. ``"DataError"``). The silo's operator finds the full
    traceback in the silo's own log (logger ``vcmc.silo``).
    """

    KIND = "error_reply"
    VERSION = 1

    error_type: str
    reason: str


def _refuse_unknown_keys(cls, arrays: typing.Mapping[str, object], hints: dict) -> None:
    """Every key is the header, a field, or (for a dict or nested message field) prefixed by one."""
    names = {f.name for f in dataclasses.fields(cls)}
    prefixed = tuple(f"{f.name}{_DICT_SEP}" for f in dataclasses.fields(cls)
                     if _is_dict(hints[f.name]) or _is_message(hints[f.name]))
    unknown = sorted(str(k) for k in arrays if k not in ("__kind__", "__version__") and k not in names
                     and not (isinstance(k, str) and k.startswith(prefixed)))
    if unknown:
        raise InconsistentSiloSummaries(
            f"{cls.KIND!r} message (version {cls.VERSION}) has fields this vcmc does not know: "
            f"{', '.join(map(repr, unknown))}. Upgrade the silo and the server to the same vcmc release.")


def _is_message(hint) -> bool:
    return isinstance(hint, type) and issubclass(hint, Message)


@functools.cache
def _type_hints(cls) -> dict:
    """``typing.get_type_hints`` of a message class, once per class (it dominated the decoding of the small
    messages of the latent class analysis' EM rounds)."""
    return typing.get_type_hints(cls)


@functools.cache
def _field_kinds(cls) -> tuple[tuple[str, str, object], ...]:
    """``(name, kind, hint)`` of every field of a message class, once per class: kind is "message", "dict",
    "tuple", "array" or "scalar" (decoding a round's small messages spent most of its time re-reading hints)."""
    hints = _type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        kind = ("message" if _is_message(hint) else "dict" if _is_dict(hint) else "tuple" if _is_tuple(hint)
                else "array" if _is_array(hint) else "scalar")
        out.append((f.name, kind, hint))
    return tuple(out)


def _args(hint) -> tuple:
    """The alternatives of a hint: ``X | None`` gives (X, None); any other hint gives (hint,)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _is_dict(hint) -> bool:
    return any(typing.get_origin(a) is dict or a is dict for a in _args(hint))


def _is_tuple(hint) -> bool:
    return any(typing.get_origin(a) is tuple or a is tuple for a in _args(hint))


def _is_array(hint) -> bool:
    return any(a is np.ndarray for a in _args(hint))
