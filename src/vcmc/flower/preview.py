"""A deployment's silos in this process: the preview of what the operators' settings cost (``vcmc fit
--silo-policy FILE``, ``vcmc.fit(..., silo_policy=...)``).

Each silo is built exactly as a SuperNode's node config builds it (``vcmc.flower.client``): its disclosure
limits from the privacy keys (``NODE_PRIVACY_KEYS``: ``min-cluster-size``, ``suppress-cells-below``, ``round-to``,
...), its boundary from the policy keys (``NODE_POLICY_KEYS``: ``allow-strategies``, ``request-budget``,
``min-peers``, ...), a run key, and the rounds' keys, which are generated here, in memory, for this run alone:
every silo gets a fresh static key pair and pins every other silo's public key, as the operators would pin
each other's (docs/federation.md, "The rounds"). So the run is the deployment's run on the analyst's own files:
the same requests, gates, releases, secure rounds and refusals; only the transport is a function call instead
of a Flower message.

The file (TOML, or JSON with the same structure) holds node-config keys for every silo at its top level, and
per-silo keys under ``[silos.<name>]`` (a silo's name is its file's stem, or its value of ``--silo-column``)::

    min-cluster-size = 10
    allow-strategies = "contingency,rounds"

    [silos.hospital_b]
    suppress-cells-below = 8

An empty file is the operators' defaults (``SiloPolicy()``, ``PrivacyConfig()``). The keys that name files on a
silo's host (``data-path``, ``rounds-key``, ``rounds-peers``, ``budget-dir``, ...) have no place in a preview
and are refused, naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping

from vcmc.exceptions import ConfigError

PREVIEW_RUN_KEY = "deployment-preview"
NOT_IN_A_PREVIEW = ("data-path", "schema-path", "silo-name", "id-column", "out-dir", "rounds-key", "rounds-peers",
                    "budget-dir", "max-runs-per-day", "na-values", "strip-whitespace", "case-insensitive",
                    "covariates", "distal")


def allowed_keys() -> tuple[str, ...]:
    """The node-config keys a preview file may set: the privacy and policy keys of a SuperNode."""
    from vcmc.flower.client import NODE_POLICY_KEYS, NODE_PRIVACY_KEYS

    return tuple(k for k in (*NODE_PRIVACY_KEYS, *NODE_POLICY_KEYS) if k not in NOT_IN_A_PREVIEW)


def _check_keys(mapping: Mapping, where: str) -> dict:
    allowed = allowed_keys()
    out = {}
    for key, value in mapping.items():
        if key not in allowed:
            why = ("names a file or folder on a silo's host, or is read by the SuperNode's data loader, which a "
                   "preview does not have (its rounds' keys are generated for the run)" if key in NOT_IN_A_PREVIEW
                   else "is not a node-config key of a silo's privacy or policy")
            raise ConfigError(f"{where}: the key {key!r} {why}; allowed: {', '.join(allowed)}")
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        out[key] = value
    return out


def read_silo_policy(path) -> dict:
    """``{"all": {...}, "silos": {name: {...}}}`` from a TOML or JSON file (errors name the file and the key)."""
    from vcmc.config.mapping import read_table_file

    raw = read_table_file(path, f"--silo-policy {str(path)!r}")
    return parse_silo_policy(raw, where=f"--silo-policy {str(path)!r}")


def parse_silo_policy(raw: Mapping, where: str = "silo_policy") -> dict:
    """The checked node configs of a preview: ``raw`` as read from the file (or given to ``vcmc.fit``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a table of node-config keys")
    per_silo = raw.get("silos", {})
    if not isinstance(per_silo, Mapping) or any(not isinstance(v, Mapping) for v in per_silo.values()):
        raise ConfigError(f"{where}: 'silos' must hold one table per silo name ([silos.NAME])")
    common = _check_keys({k: v for k, v in raw.items() if k != "silos"}, where)
    silos = {str(name): _check_keys(table, f"{where}, silo {name!r}") for name, table in per_silo.items()}
    return {"all": common, "silos": silos}


def node_configs(policy: Mapping, names) -> dict[str, dict]:
    """Each silo's node config: the keys for every silo, then its own (a silo named in the file but not among
    the run's silos is an error: a misspelt name would otherwise be ignored)."""
    names = list(names)
    unknown = sorted(set(policy.get("silos", {})) - set(names))
    if unknown:
        raise ConfigError(f"silo policy: {unknown} name no silo of this run; the silos are {names}")
    return {n: {**policy.get("all", {}), **policy.get("silos", {}).get(n, {})} for n in names}


def deployment_silos(data, policy: Mapping, *, run_key: str = PREVIEW_RUN_KEY, progress=None):
    """One ``LocalSilo`` per silo of ``data``, built as a SuperNode builds it from its node config, with rounds'
    keys generated for this run (every silo pinning every other)."""
    from vcmc.flower.client import policy_from_node_config, privacy_from_node_config
    from vcmc.silo.local import LocalSilo

    configs = node_configs(policy, [d.name for d in data])
    keys = _keys([d.name for d in data])
    publics = {n: k[1] for n, k in keys.items()}
    return [LocalSilo(d, privacy=privacy_from_node_config(configs[d.name]),
                      policy=policy_from_node_config(configs[d.name]), run_key=run_key, progress=progress,
                      rounds_key=keys[d.name][0], rounds_peers={n: p for n, p in publics.items() if n != d.name})
            for d in data]


def _keys(names) -> dict[str, tuple[str, str]]:
    try:
        from vcmc.silo.secure_sum import new_key

        return {n: new_key() for n in names}
    except ImportError as err:       # the rounds' secure sums need the cryptography package
        raise ConfigError(f"a deployment preview needs the rounds' keys, which need the 'cryptography' package "
                          f"({err})") from None


def describe(policy: Mapping, names) -> dict:
    """What ``result.json`` records of a preview (``diagnostics.deployment_preview``)."""
    return {"what": "a deployment preview: every silo built as a SuperNode's node config builds it, in this "
                    "process, with rounds' keys generated for the run (docs/federation.md)",
            "node_config": node_configs(policy, names)}
