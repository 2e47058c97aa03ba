"""A SuperNode's node config as text (``--node-config``), read without Flower, and what vcmc does with it.

The text is the one a site's operator gives ``flower-supernode --node-config`` (docs/federation.md §3.3):
space-separated ``key=value`` pairs whose values are TOML (strings double-quoted), or the path of a
``.toml`` file; it is parsed the way Flower 1.42 parses it (``flwr.common.config.parse_config_args``), so
that ``vcmc supernode`` can refuse a mistake before the SuperNode starts. (A deployment's silos on the
analyst's own files are ``vcmc fit --silo-policy FILE``, ``vcmc.flower.preview``: the same node-config keys.)
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from vcmc.exceptions import ConfigError

__all__ = ["LIMIT_KEYS", "NODE_KEYS", "SITE_KEYS", "check_node_config", "parse_node_config"]

SITE_KEYS = ("data-path", "schema-path", "silo-name", "id-column", "out-dir", "na-values", "strip-whitespace",
             "case-insensitive", "covariates", "distal", "rounds-key", "rounds-peers")
"""Node-config keys that say which data the site has and how to read it, and the rounds' keys
(``vcmc.flower.client``)."""


def _limit_keys() -> tuple[str, ...]:
    from vcmc.flower.client import NODE_POLICY_KEYS, NODE_PRIVACY_KEYS

    return (*NODE_PRIVACY_KEYS, *NODE_POLICY_KEYS)


LIMIT_KEYS = _limit_keys()
"""Node-config keys of the operator's limits: the disclosure limits and the boundary's own limits."""

NODE_KEYS = (*SITE_KEYS, *LIMIT_KEYS)
"""Every node-config key the vcmc ClientApp reads."""

_PAIR = re.compile(r"(\S+?)=(\'[^\']*\'|\"[^\"]*\"|\S+)")    # flwr 1.42's pattern of one key=value pair


def _flatten(d: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_flatten(v, key) if isinstance(v, Mapping) else {key: v})
    return out


def parse_node_config(text: str, *, flag: str = "--node-config") -> dict:
    """``key=value ...`` (TOML values) or a ``.toml`` file path, as Flower reads a SuperNode's node config."""
    text = (text or "").strip()
    if not text:
        return {}
    if text.endswith(".toml") and "=" not in text:
        try:
            return _flatten(tomllib.loads(Path(text).expanduser().read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"{flag} {text!r}: cannot read it as a TOML file ({err})") from None
    pairs = _PAIR.findall(text)
    try:
        return _flatten(tomllib.loads("\n".join(f"{k} = {v}" for k, v in pairs)))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{flag} {text!r}: expected space-separated key=value pairs with TOML values, strings "
                          f"double-quoted (e.g. 'data-path=\"/secure/a.csv\" min-cluster-size=10'); {err}") from None


def check_node_config(node: Mapping, *, flag: str = "--node-config", allowed=NODE_KEYS) -> None:
    """Refuse keys the vcmc ClientApp does not read (a misspelt limit would silently not apply) and, for a
    site's node config, a missing or relative path."""
    unknown = sorted(k for k in node if k not in allowed)
    if unknown:
        raise ConfigError(f"{flag}: unknown key(s) {unknown}; the keys are {list(allowed)} "
                          "(docs/federation.md §3.3)")
    # rounds-peers is a file when it holds no name=key pair (vcmc.silo.secure_sum.parse_peers)
    peers_file = ("rounds-peers",) if node.get("rounds-peers") and "=" not in str(node["rounds-peers"]) else ()
    for key in ("data-path", "schema-path", "out-dir", "budget-dir", "rounds-key", *peers_file):
        if node.get(key) and not Path(str(node[key])).is_absolute():
            raise ConfigError(f"{flag}: {key!r} must be an absolute path on the site's host (the ClientApp does "
                              f"not run in this working directory); got {node[key]!r}")
    for key in ("data-path", "schema-path", "rounds-key", *peers_file):
        if node.get(key) and not Path(str(node[key])).is_file():
            raise ConfigError(f"{flag}: {key!r} {str(node[key])!r} does not exist on this host")
    if "data-path" in allowed and "data-path" not in node:
        raise ConfigError(f"{flag} has no 'data-path' (the site's CSV or Parquet file, an absolute path)")
