"""Build ``FitConfig`` from plain mappings: a Flower run config, a TOML/JSON file or ``FitConfig.to_dict()``.

The CLI, the Python API and the Flower ServerApp must build the same config objects (docs/design.md §12.1,
"Configuration and randomness"), so there is one parser of option mappings, ``config_from_mapping`` (the
options themselves are listed once, in ``vcmc.config.schema``). It accepts

- nested sections: ``{"sampler": {"n_iter": 2000}, "privacy": {"min_cluster_size": 5}}`` (the output of
  ``FitConfig.to_dict()``, a JSON file or a TOML file with ``[sampler]`` tables);
- flat dotted keys: ``{"sampler.n-iter": 2000}``, which is what Flower makes of nested tables in
  ``[tool.flwr.app.config]`` and of ``--run-config 'sampler.n-iter=2000'``.

Hyphens and underscores are interchangeable in every key. Values are coerced to the field's type from
TOML-friendly spellings (TOML has no null: ``"none"`` or ``""`` stand for ``None``; lists become tuples).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection, Mapping
from typing import Literal

from vcmc.config.options import FitConfig
from vcmc.config.schema import SECTIONS
from vcmc.exceptions import ConfigError

_NONE_SPELLINGS = ("", "none", "null")


def _norm(key: str) -> str:
    return key.strip().replace("-", "_")


def config_from_mapping(mapping: Mapping[str, object], *, ignore: Collection[str] = (),
                        base: FitConfig | None = None) -> FitConfig:
    """Build a ``FitConfig`` from nested sections and/or flat dotted keys.

    Parameters
    ----------
    mapping : mapping of str to object
        Options; see the module docstring for the accepted shapes. Missing options keep their defaults.
    ignore : collection of str
        Top-level keys that belong to the caller (e.g. Flower's ``"min-nodes"``, ``"out-dir"``, ``"seed"``)
        and are skipped instead of rejected. Compared after replacing hyphens by underscores.
    base : FitConfig, optional
        Values not given in ``mapping`` come from here (default: ``FitConfig()``).

    Returns
    -------
    FitConfig

    Raises
    ------
    ConfigError
        For an unknown section or option (the message lists the valid names) or a value that cannot be
        converted to the option's type; range errors come from the config dataclasses themselves.
    """
    ignored = {_norm(k) for k in ignore}
    updates: dict[str, dict[str, object]] = {name: {} for name in SECTIONS}
    for raw_key, value in mapping.items():
        key = _norm(str(raw_key))
        if key in ignored:
            continue
        if key in SECTIONS and isinstance(value, Mapping):
            for sub_key, sub_value in value.items():
                _put(updates, key, _norm(str(sub_key)), sub_value, f"{raw_key}.{sub_key}")
            continue
        section, dot, option = key.partition(".")
        if not dot:
            raise ConfigError(
                f"Unknown configuration key {raw_key!r}. Expected a section ({', '.join(SECTIONS)}) or a "
                f"dotted key such as 'sampler.n-iter'.")
        if section not in SECTIONS:
            raise ConfigError(f"Unknown configuration section {section!r} in key {raw_key!r}. Expected one "
                              f"of {', '.join(SECTIONS)}.")
        _put(updates, section, option, value, str(raw_key))

    base = base if base is not None else FitConfig()
    kwargs = {}
    for name in SECTIONS:
        current = getattr(base, name)
        if name == "sampler" and current.derived_burn_in and "burn_in" not in updates[name] \
                and {"n_iter", "stop"} & set(updates[name]):
            updates[name]["burn_in"] = None      # a derived burn-in follows the new n_iter / stop
        # the section built here, from its current fields and the updates (what dataclasses.replace does,
        # one call shorter: the path from a flag to the code that uses it is counted, CONTRIBUTING.md)
        kwargs[name] = (SECTIONS[name](**{**{f.name: getattr(current, f.name) for f in dataclasses.fields(current)
                                             if f.init}, **updates[name]}) if updates[name] else current)
    return FitConfig(**kwargs)


def config_to_mapping(config: FitConfig, *, sep: str = "-") -> dict[str, object]:
    """Flat dotted mapping of every option (``{"sampler.n-iter": 50000, ...}``), the inverse of the parser.

    ``None`` becomes ``"none"`` and tuples become lists, so the result is valid TOML / Flower run config.
    """
    out: dict[str, object] = {}
    for name in SECTIONS:
        for f in dataclasses.fields(getattr(config, name)):
            value = getattr(getattr(config, name), f.name)
            if value is None:
                value = "none"
            elif isinstance(value, tuple):
                value = list(value)
            out[f"{name}.{f.name.replace('_', sep)}"] = value
    return out


def _put(updates, section: str, option: str, value, where: str) -> None:
    cls = SECTIONS[section]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if option not in fields:
        valid = ", ".join(n.replace("_", "-") for n in fields)
        raise ConfigError(f"Unknown option {where!r} of section {section!r} ({cls.__name__}). Valid options: "
                          f"{valid}.")
    hint = typing.get_type_hints(cls)[option]
    updates[section][option] = _coerce(value, hint, f"{cls.__name__}.{option}", where)


def _coerce(value, hint, owner: str, where: str):
    """Convert ``value`` to ``hint`` (int, float, bool, str, Literal, tuple[float, ...], unions of them)."""
    alternatives = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) \
        else (hint,)
    # None first: "none" must not be read as the string "none" for an optional str.
    if type(None) in alternatives and (value is None or (isinstance(value, str)
                                                          and value.strip().lower() in _NONE_SPELLINGS)):
        return None
    for alt in alternatives:
        if alt is type(None):
            continue
        try:
            return _coerce_one(value, alt)
        except (TypeError, ValueError):
            continue
    raise ConfigError(f"The {where!r} option ({owner}) must be {_describe(hint)}. Got {value!r} instead.",
                      option=owner, expected=_describe(hint), got=value)


def _coerce_one(value, alt):
    origin = typing.get_origin(alt)
    if origin is Literal:
        choices = typing.get_args(alt)
        if isinstance(value, str) and value in choices:
            return value
        raise ValueError("not a choice")
    if origin is tuple:
        if isinstance(value, str | bytes) or not isinstance(value, typing.Sequence):
            raise TypeError("not a sequence")
        (item,) = typing.get_args(alt)[:1]
        return tuple(_coerce_one(v, item) for v in value)
    if alt is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.strip().lower() in ("true", "yes", "1")
        raise ValueError("not a bool")
    if alt in (int, float):
        article = "an" if alt is int else "a"
        if isinstance(value, bool):
            raise TypeError(f"bool is not {article} {alt.__name__}")
        if isinstance(value, str):
            return alt(value.strip())
        if isinstance(value, int) or (isinstance(value, float) and (alt is float or value.is_integer())):
            return alt(value)
        raise TypeError(f"not {article} {alt.__name__}")
    if alt is str:
        if isinstance(value, str):
            return value
        raise TypeError("not a str")
    raise TypeError(f"unsupported type {alt!r}")


def _describe(hint) -> str:
    alternatives = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) \
        else (hint,)
    words = []
    for alt in alternatives:
        if alt is type(None):
            words.append('"none"')
        elif typing.get_origin(alt) is Literal:
            words.append("one of " + ", ".join(repr(c) for c in typing.get_args(alt)))
        elif typing.get_origin(alt) is tuple:
            words.append("a list of numbers")
        else:
            words.append(("an " if alt.__name__[0] in "aeiou" else "a ") + alt.__name__)
    return " or ".join(words)


def flatten_mapping(mapping: Mapping[str, object]) -> dict[str, object]:
    """Nested sections as flat dotted keys, spelled as given (``{"sampler": {"n-iter": 1}}`` ->
    ``{"sampler.n-iter": 1}``)."""
    out: dict[str, object] = {}
    for raw_key, value in mapping.items():
        if _norm(str(raw_key)) in SECTIONS and isinstance(value, Mapping):
            for sub_key, sub_value in value.items():
                out[f"{raw_key}.{sub_key}"] = sub_value
        else:
            out[str(raw_key)] = value
    return out


def merge_mappings(*mappings: Mapping[str, object]) -> dict[str, object]:
    """Flat options of several sources, later ones winning, compared with hyphens and underscores alike
    (``sampler.n-iter`` and ``sampler.n_iter`` are one key); each key keeps its last spelling."""
    merged: dict[str, tuple[str, object]] = {}
    for mapping in mappings:
        for key, value in flatten_mapping(mapping).items():
            merged[_norm(key)] = (key, value)
    return dict(merged.values())


def read_table_file(path, what: str):
    """The parsed content of a TOML file, or JSON by its suffix; errors begin with ``what`` (the file named as
    the caller's user knows it) and say whether it could not be read or not be parsed."""
    import json
    import tomllib
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{what} cannot be read: {err.strerror or err}") from None
    try:
        return json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        kind = "JSON" if p.suffix.lower() == ".json" else "TOML"
        raise ConfigError(f"{what} is not valid {kind}: {err}") from None


def read_config_file(path) -> dict[str, object]:
    """The options of a TOML or JSON file as flat dotted keys (see ``load_config_file``).

    Raises
    ------
    ConfigError
        Naming the file, when it cannot be read or parsed.
    """
    from pathlib import Path

    p = Path(path)
    data = read_table_file(p, f"the configuration file {str(p)!r}")
    if not isinstance(data, Mapping):
        raise ConfigError(f"the configuration file {str(p)!r} must hold a table of options; got "
                          f"{type(data).__name__}")
    flwr = data.get("tool", {}).get("flwr", {}).get("app", {}).get("config") if "tool" in data else None
    return flatten_mapping(flwr if isinstance(flwr, Mapping) else data)


def load_config_file(path, *, ignore: Collection[str] = (), base: FitConfig | None = None) -> FitConfig:
    """``FitConfig`` from a TOML or JSON file, through ``config_from_mapping``.

    TOML tables and dotted keys are those of the Flower run config: ``[sampler]`` then ``n-iter = 2000``,
    or ``sampler.n-iter = 2000`` at the top (TOML reads both as the same nested table). A file that is a
    whole ``pyproject.toml`` of a Flower app is read from its ``[tool.flwr.app.config]`` table.

    Raises
    ------
    ConfigError
        Naming the file, when it cannot be read or parsed, or when an option is unknown or invalid.
    """
    try:
        return config_from_mapping(read_config_file(path), ignore=ignore, base=base)
    except ConfigError as err:
        if str(path) in str(err):
            raise
        raise ConfigError(f"{str(path)!r}: {err}") from None
