"""Files a run leaves behind: ``result.json``, ``assignments.csv``, ``memberships.csv``, ``profiles.csv``,
``posterior.nc`` and ``schema.json``.

Clusters are numbered from 1 in every file (as in the paper's Table 1); rows are 0-based indices into
each silo's input file, so assignments join back to the input without any identifier leaving a silo.
``memberships.csv`` and ``assignments.csv`` are written by ``vcmc.rows.memberships.write_membership_files``,
the writer a Flower silo uses on its own host, so the formats are one.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np

from vcmc._version import __version__
from vcmc.atomic import atomic_path
from vcmc.results import GlobalResult
from vcmc.rows.memberships import write_membership_files

RESULT_FORMAT_VERSION = 1


def _json_default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not math.isfinite(float(obj)) else float(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean(obj):
    """Replace non-finite floats (invalid JSON) by None, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def column_labels(n_modalities, schema=None) -> list[tuple[str, str]]:
    """(variable, modality) label of every flat profile column."""
    if schema is not None:
        return [(v.name, m) for v in schema.variables for m in v.modalities]
    return [(f"V{q + 1}", str(k + 1)) for q, kq in enumerate(n_modalities) for k in range(kq)]


def label_columns(diagnostics: dict, labels: list[tuple[str, str]]) -> dict:
    """The predictive-check tables with the schema's variable and modality names (they carry the flat
    column index of each entry; the pipeline knows only modality counts)."""
    ppc = diagnostics.get("ppc") if isinstance(diagnostics, dict) else None
    if not ppc:
        return diagnostics
    out = dict(diagnostics)
    ppc = dict(ppc)
    for check, cols in (("prevalence", (("column", ""),)), ("pairs", (("column_a", "_a"), ("column_b", "_b")))):
        if check not in ppc:
            continue
        table = []
        for row in ppc[check].get("table", []):
            row = dict(row)
            for key, suffix in cols:
                variable, modality = labels[int(row[key])]
                row[f"variable{suffix}"], row[f"modality{suffix}"] = variable, modality
            table.append(row)
        ppc[check] = {**ppc[check], "table": table}
    out["ppc"] = ppc
    return out


def result_summary(result: GlobalResult, schema=None, data: dict | None = None) -> dict:
    """The JSON summary of a result (the ``result.json`` contract); ``schema`` names the variables and
    ``data`` (what ``vcmc fit`` read: the schema used, missing-value texts, normalisation) becomes its
    ``"data"`` section."""
    sizes = result.cluster_sizes
    clusters = []
    for c in range(result.weights.shape[0]):
        item = {"cluster": c + 1, "weight": float(result.weights[c]),
                "weight_ci95": (None if result.weights_ci is None else
                                [float(result.weights_ci[c, 0]), float(result.weights_ci[c, 1])]),
                "size": int(sizes[c]),
                "size_per_silo": {s: int(result.partition_counts[i, c]) for i, s in enumerate(result.silos)}}
        clusters.append(item)
    timings = {k: float(v) for k, v in result.timings.items()}
    for key in ("apply", "matching", "aggregation", "total"):
        timings.setdefault(key, 0.0)
    return _clean({
        "format_version": RESULT_FORMAT_VERSION,
        "vcmc_version": __version__,
        "method": result.method,
        "n_clusters": result.n_clusters,
        "n_global_clusters": int(result.weights.shape[0]),
        "clusters": clusters,
        "silos": list(result.silos),
        "n_rows": int(result.partition_counts.sum()),
        "timings_s": timings,
        "seed": result.seed,
        "config": result.config,
        "n_chains": int(result.n_chains),
        "diagnostics": json.loads(json.dumps(label_columns(result.diagnostics,
                                                           column_labels(result.n_modalities, schema)),
                                             default=_json_default)),
        "interval": "equal-tailed 95% posterior interval" if result.weights_ci is not None else None,
        "point_estimate": "posterior mean",
        **({"data": data} if data is not None else {}),
    })


def write_outputs(result: GlobalResult, out_dir, *, schema=None, netcdf: bool = True, rows=None,
                  data: dict | None = None) -> dict[str, Path]:
    """Write the result files into ``out_dir`` (created if needed); return their paths by kind.

    ``rows`` maps a silo's name to the row number, in its input file, of each of its rows (``--silo-column``:
    rows of the whole file); a silo not in it, or mapped to None, numbers its rows 0, 1, ... ``data`` is
    recorded as the ``"data"`` section of ``result.json``. Every file is written to a temporary file and
    renamed (``vcmc.atomic``): a failure (a full disk) leaves the old file or none, never a truncated one.
    """
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    paths["result"] = out / "result.json"
    summary = json.dumps(result_summary(result, schema, data), indent=2, default=_json_default)
    rows = rows or {}

    # All or nothing: every file goes to its temporary path first; the renames happen only once all of them
    # are written (the exit stack unwinds them in reverse, result.json, entered first, is renamed last), and
    # a failure anywhere (a full disk) removes every temporary file and leaves the earlier files as they were.
    with contextlib.ExitStack() as stack:
        result_tmp = stack.enter_context(atomic_path(paths["result"]))
        if result.assignments is not None:
            memberships = result.memberships or (None,) * len(result.silos)
            paths.update(write_membership_files(
                out, list(zip(result.silos, memberships, result.assignments, strict=True)),
                n_clusters=int(result.weights.shape[0]), rows=rows, stack=stack))

        labels = column_labels(result.n_modalities, schema)
        c, p = result.profiles.shape
        cl = np.repeat(np.arange(1, c + 1), p)
        var = np.tile([v for v, _ in labels], c)
        mod = np.tile([m for _, m in labels], c)
        frame = pd.DataFrame({"cluster": cl, "variable": var, "modality": mod,
                              "estimate": result.profiles.ravel()})
        if result.profiles_ci is not None:
            frame["ci95_low"] = result.profiles_ci[..., 0].ravel()
            frame["ci95_high"] = result.profiles_ci[..., 1].ravel()
        paths["profiles"] = out / "profiles.csv"
        tmp = stack.enter_context(atomic_path(paths["profiles"]))
        frame.to_csv(tmp, index=False)
        if result.gaussian_draws is not None and schema is not None and schema.continuous:
            from vcmc.report.continuous import continuous_table

            paths["continuous"] = out / "continuous.csv"
            tmp = stack.enter_context(atomic_path(paths["continuous"]))
            pd.DataFrame(continuous_table(result.gaussian_draws, schema.continuous)).to_csv(tmp, index=False)

        if netcdf and result.pi_draws is not None:
            paths["posterior"] = out / "posterior.nc"
            tmp = stack.enter_context(atomic_path(paths["posterior"]))
            # built in memory, then written by Python: HDF5 writing straight to a file that cannot grow (a
            # full disk, a file-size limit) fails inside its C library, prints errors from object
            # finalisers and has been seen to crash the process; a plain write fails with a clean OSError.
            # The file is a summary of the draws (posterior.nc, a few MB at most), so memory is no concern.
            encoded = to_datatree(result, schema=schema).to_netcdf(None, engine="h5netcdf")
            tmp.write_bytes(bytes(encoded))
        if schema is not None:
            # `vcmc predict` encodes new people with exactly the fit's coding (docs/design.md §8.2)
            paths["schema"] = out / "schema.json"
            if not _holds_schema(paths["schema"], schema):   # the user's own schema.json (--out = the input
                stack.enter_context(atomic_path(paths["schema"])).write_text(schema.to_json(), encoding="utf-8")
        result_tmp.write_text(summary, encoding="utf-8")
    return paths


def _holds_schema(path: Path, schema) -> bool:
    """``path`` already holds this schema (the input's own schema.json when --out is the input folder):
    it is kept byte for byte, never replaced by a reformatted copy."""
    from vcmc.data import Schema

    try:
        return path.is_file() and Schema.from_json(path).fingerprint() == schema.fingerprint()
    except Exception:  # noqa: BLE001 - any unreadable file there is replaced
        return False


def to_datatree(result: GlobalResult, schema=None):
    """ArviZ ``DataTree`` of the global draws with dimensions (chain, draw, ...).

    With ``n_chains`` chains the draws are chain-major (``GlobalResult``), and output chain j of VCMC
    combines chain j of every silo in order (docs/design.md §8.1), so ArviZ's R-hat and ESS are those of
    the global draws. With one chain VCMC pairs the silos' draws at random, which hides their
    autocorrelation from ESS: run 2 or more chains to read convergence from ``posterior.nc``.
    """
    import arviz as az

    labels = [f"{v}={m}" for v, m in column_labels(result.n_modalities, schema)]
    clusters = np.arange(1, result.weights.shape[0] + 1)
    n_chains = int(result.n_chains)
    t = result.pi_draws.shape[0]
    if t % n_chains:
        raise ValueError(f"{t} global draws cannot be {n_chains} chains of equal length")
    pi = result.pi_draws.reshape(n_chains, t // n_chains, -1)
    profiles = result.profile_draws.reshape(n_chains, t // n_chains, *result.profile_draws.shape[1:])
    posterior = {"pi": pi, "profiles": profiles}
    dims = {"pi": ["cluster"], "profiles": ["cluster", "column"]}
    coords = {"cluster": clusters, "column": labels}
    if result.gaussian_draws is not None:
        # the continuous items' means and variances on the model's standardised scale (docs/design.md §17.9)
        g = result.gaussian_draws.shape[2] // 2
        names = [v.name for v in schema.continuous] if schema is not None and schema.continuous else \
            [f"X{j + 1}" for j in range(g)]
        draws = result.gaussian_draws.reshape(n_chains, t // n_chains, *result.gaussian_draws.shape[1:])
        posterior.update(mean=draws[..., :g], variance=draws[..., g:])
        dims.update(mean=["cluster", "continuous"], variance=["cluster", "continuous"])
        coords["continuous"] = names
    return az.from_dict({"posterior": posterior}, dims=dims, coords=coords)
