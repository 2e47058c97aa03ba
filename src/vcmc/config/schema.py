"""The one table of options, read from the config dataclasses (``vcmc.config.options``).

Each option is defined once, as a dataclass field: ``Option`` collects what every consumer needs from it —
the run-config key (``sampler.n-iter``, as ``--set``, ``--config`` and the Flower run config spell it),
the type and allowed values (the type hint), the default (the field's), the help (the first sentence of
the class docstring's ``Attributes`` entry) and the ``vcmc fit`` flag (the field's metadata). From this
table come

- the flags of ``vcmc fit`` and their help (``vcmc.cli.fit.add_arguments``);
- the keys accepted by ``config_from_mapping`` (``vcmc.config.mapping``);
- the scikit-learn parameter constraints of ``FederatedLatentClassModel`` (``param_constraint``);
- ``[tool.flwr.app.config]`` of ``flower_app/pyproject.toml`` (``app_config_lines``; a test checks the
  file key by key against it);
- the typed configuration a silo receives (``vcmc.protocol.silo_config``: one key per option);
- the option tables of the README and docs/design.md (``vcmc.config.tables``; a test checks them).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from dataclasses import dataclass
from typing import Literal

from vcmc.config.options import (
    AggregationConfig,
    AssessmentConfig,
    MatchingConfig,
    PostprocessConfig,
    PriorConfig,
    PrivacyConfig,
    SamplerConfig,
)

SECTIONS: dict[str, type] = {
    "prior": PriorConfig,
    "sampler": SamplerConfig,
    "postprocess": PostprocessConfig,
    "privacy": PrivacyConfig,
    "matching": MatchingConfig,
    "aggregation": AggregationConfig,
    "assessment": AssessmentConfig,
}
"""Section name of ``FitConfig`` -> its dataclass."""


@dataclass(frozen=True)
class Option:
    """One option of ``FitConfig``."""

    section: str
    name: str               # the dataclass field (and the estimator's / API's keyword)
    hint: object            # the type hint
    default: object         # the declared default (None for a derived one, e.g. sampler.burn_in)
    help: str
    flag: str | None        # the ``vcmc fit`` flag, if there is one
    negate: bool            # the flag is a switch that sets the option to False

    @property
    def key(self) -> str:
        """The run-config key: ``sampler.n-iter``."""
        return f"{self.section}.{self.name.replace('_', '-')}"

    @property
    def owner(self) -> str:
        return SECTIONS[self.section].__name__

    @property
    def alternatives(self) -> tuple:
        hint = self.hint
        return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The allowed values when the option is a ``Literal`` (with no other type beside it)."""
        alts = [a for a in self.alternatives if a is not type(None)]
        if all(typing.get_origin(a) is Literal for a in alts):
            return tuple(v for a in alts for v in typing.get_args(a))
        return None

    @property
    def scalar_type(self) -> type:
        """The Python type a flag's text is read as (the first of int, float, bool, str in the hint)."""
        for alt in self.alternatives:
            if alt in (int, float, bool, str):
                return alt
            if typing.get_origin(alt) is Literal:
                return str
        raise TypeError(f"{self.key}: no scalar type in {self.hint!r}")

    @property
    def optional(self) -> bool:
        return type(None) in self.alternatives

    def toml_default(self) -> object:
        """The default as the Flower run config writes it (TOML has no null: ``"none"``)."""
        if self.default is None:
            return "none"
        return list(self.default) if isinstance(self.default, tuple) else self.default


def _attribute_help(cls: type) -> dict[str, str]:
    """``name -> first sentence`` of the numpydoc ``Attributes`` section of ``cls``'s docstring."""
    doc = typing.cast(str, cls.__doc__ or "")
    lines = doc.split("Attributes\n    ----------\n", 1)[-1].splitlines()
    out: dict[str, list[str]] = {}
    current = None
    for line in lines:
        head = re.match(r"^    (\w+) : ", line)
        if head:
            current = head.group(1)
            out[current] = []
        elif current is not None and line.startswith("        "):
            out[current].append(line.strip())
        elif line.strip() and not line.startswith("        "):
            current = None
    helps = {}
    for name, words in out.items():
        text = " ".join(words)
        # the first sentence: up to a full stop followed by a capital letter (not "e.g. the", "(2021)")
        m = re.match(r"^(.+?[.)])\s+(?=[A-Z\"'])", text)
        helps[name] = (m.group(1) if m else text).rstrip(".")
    return helps


@functools.cache
def options() -> tuple[Option, ...]:
    """Every option of ``FitConfig``, section by section in field order."""
    out = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        helps = _attribute_help(cls)
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            out.append(Option(section=section, name=f.name, hint=hints[f.name], default=f.default,
                              help=helps.get(f.name, ""), flag=f.metadata.get("flag"),
                              negate=bool(f.metadata.get("negate", False))))
    return tuple(out)


def option(key: str) -> Option:
    """The option of a run-config key (hyphens and underscores alike): ``option("sampler.n-iter")``."""
    norm = key.strip().replace("_", "-")
    for opt in options():
        if opt.key == norm:
            return opt
    raise KeyError(key)


def flags() -> dict[str, str]:
    """Run-config key (with underscores, as ``ConfigError.option`` names it) -> ``vcmc fit`` flag."""
    return {f"{o.section}.{o.name}": o.flag for o in options() if o.flag}


def describe_default(opt: Option) -> str:
    """The default as help text shows it."""
    if opt.section == "sampler" and opt.name == "burn_in":
        return "half of the iterations"
    return "none" if opt.default is None else str(opt.toml_default()).lower() \
        if isinstance(opt.default, bool) else str(opt.default)


def param_constraint(opt: Option) -> list:
    """scikit-learn parameter constraints of an option: its allowed values, or its type (the ranges are
    checked by the config dataclass itself when ``fit`` builds it, with the library's message)."""
    import numbers

    from sklearn.utils._param_validation import StrOptions

    if opt.choices is not None:
        out: list = [StrOptions(set(opt.choices))]
    else:
        kinds = {int: numbers.Integral, float: numbers.Real, bool: "boolean", str: str}
        out = [kinds[a] for a in opt.alternatives if a in kinds]
        if any(typing.get_origin(a) is Literal for a in opt.alternatives):
            out.append(StrOptions({v for a in opt.alternatives if typing.get_origin(a) is Literal
                                   for v in typing.get_args(a)}))
    if opt.optional:
        out.append(None)
    return out


def app_config_lines() -> list[str]:
    """The ``FitConfig`` part of ``[tool.flwr.app.config]``: one ``key = default`` line per option."""
    import json

    lines = []
    for opt in options():
        value = opt.toml_default()
        text = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
        if isinstance(value, float):
            text = repr(value)
        lines.append(f"{opt.key} = {text}")
    return lines

