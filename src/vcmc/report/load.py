"""Read a fit's output folder (what ``vcmc fit`` wrote) for the report.

``result.json`` and ``profiles.csv`` are required; ``posterior.nc``, ``assignments.csv`` and
``memberships.csv`` are used when present. Every error names the file and what was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vcmc.exceptions import DataError

#: At most about this many global draws are read from ``posterior.nc`` (every k-th draw of every chain):
#: the paper's protocol keeps 5,000 per fit, all read; the 2.5% and 97.5% quantiles of the
#: characterisation are then within about a quarter of a percentile point of the full set's (binomial
#: standard error of a 2.5% quantile's rank: sqrt(0.025 x 0.975 / 5000) = 0.22%), and the paper's size
#: (27 clusters x 160 columns) takes 170 MB in memory whatever the number of chains.
MAX_DRAWS = 5000


@dataclass
class Columns:
    """The profile columns of a fit: every variable with its modalities, in the files' order."""

    variables: list[str]
    modalities: list[list[str]]

    @property
    def labels(self) -> list[tuple[str, str]]:
        return [(v, m) for v, mods in zip(self.variables, self.modalities, strict=True) for m in mods]

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([len(m) for m in self.modalities])])

    @property
    def n_columns(self) -> int:
        return int(sum(len(m) for m in self.modalities))


@dataclass
class FitOutputs:
    """Everything the report reads from one output folder."""

    folder: Path
    result: dict
    columns: Columns
    profiles: np.ndarray                  # (C, P) posterior means
    profiles_ci: np.ndarray | None        # (C, P, 2) or None
    pi_draws: np.ndarray | None = None    # (S, C) global draws, chains pooled
    profile_draws: np.ndarray | None = None  # (S, C, P)
    n_draws_total: int = 0
    n_chains: int = 0
    max_probability: np.ndarray | None = None   # (n,) each row's probability of its assigned cluster
    max_probability_silo: np.ndarray | None = None
    membership_source: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def clusters(self) -> list[dict]:
        return list(self.result.get("clusters", []))

    @property
    def cluster_ids(self) -> list[int]:
        return [int(c["cluster"]) for c in self.clusters]

    @property
    def weights(self) -> np.ndarray:
        return np.array([float(c.get("weight") or 0.0) for c in self.clusters])

    @property
    def sizes(self) -> np.ndarray:
        return np.array([int(c.get("size") or 0) for c in self.clusters])

    @property
    def diagnostics(self) -> dict:
        d = self.result.get("diagnostics")
        return d if isinstance(d, dict) else {}

    @property
    def silos(self) -> list[str]:
        return [str(s) for s in self.result.get("silos", [])]


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: not found; expected the result.json that `vcmc fit --out DIR` writes "
                        "(give the folder DIR to `vcmc report`)") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("clusters"), list):
        raise DataError(f"{path}: expected a JSON object with a 'clusters' list (the result.json of `vcmc fit`)")
    for i, c in enumerate(data["clusters"]):
        if not isinstance(c, dict) or "cluster" not in c:
            raise DataError(f"{path}: clusters[{i}] has no 'cluster' number")
    return data


def _read_profiles(path: Path, cluster_ids: list[int]):
    import pandas as pd

    if not path.is_file():
        raise DataError(f"{path}: not found; expected the profiles.csv that `vcmc fit` writes beside "
                        "result.json")
    frame = pd.read_csv(path, dtype={"variable": str, "modality": str}, keep_default_na=False)
    need = ["cluster", "variable", "modality", "estimate"]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; expected "
                        "cluster,variable,modality,estimate[,ci95_low,ci95_high]")
    ids = sorted(int(c) for c in frame["cluster"].unique())
    if ids != sorted(cluster_ids):
        raise DataError(f"{path}: clusters {ids} do not match result.json's {sorted(cluster_ids)}")
    first = frame[frame["cluster"] == cluster_ids[0]]
    variables: list[str] = []
    modalities: list[list[str]] = []
    for v, m in zip(first["variable"], first["modality"], strict=True):
        if not variables or variables[-1] != v:
            if v in variables:
                raise DataError(f"{path}: the rows of variable {v!r} are not contiguous; expected each "
                                "variable's modalities one after the other, as `vcmc fit` writes them")
            variables.append(v)
            modalities.append([])
        modalities[-1].append(m)
    columns = Columns(variables, modalities)
    p = columns.n_columns
    prof = np.empty((len(cluster_ids), p))
    has_ci = {"ci95_low", "ci95_high"} <= set(frame.columns)
    ci = np.empty((len(cluster_ids), p, 2)) if has_ci else None
    for k, c in enumerate(cluster_ids):
        rows = frame[frame["cluster"] == c]
        if len(rows) != p or list(zip(rows["variable"], rows["modality"], strict=True)) != columns.labels:
            raise DataError(f"{path}: cluster {c} does not list the same variables and modalities, in the same "
                            "order, as the first cluster")
        prof[k] = rows["estimate"].to_numpy(dtype=float)
        if ci is not None:
            ci[k, :, 0] = rows["ci95_low"].to_numpy(dtype=float)
            ci[k, :, 1] = rows["ci95_high"].to_numpy(dtype=float)
    return columns, prof, ci


def _read_draws(path: Path, out: FitOutputs) -> None:
    import xarray as xr

    try:
        tree = xr.open_datatree(path, engine="h5netcdf")
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: cannot be read as the NetCDF DataTree `vcmc fit` writes ({err})") from None
    try:
        post = tree["posterior"]
        pi, prof = post["pi"], post["profiles"]
    except KeyError:
        raise DataError(f"{path}: expected a 'posterior' group with variables 'pi' and 'profiles'") from None
    expected = [f"{v}={m}" for v, m in out.columns.labels]
    cols = [str(c) for c in prof["column"].values] if "column" in prof.coords else None
    if cols is not None and cols != expected:
        raise DataError(f"{path}: its {len(cols)} profile columns do not match the {len(expected)} of profiles.csv "
                        "(expected 'variable=modality' labels in the same order); was it written by the same fit?")
    clusters = [int(c) for c in prof["cluster"].values] if "cluster" in prof.coords else out.cluster_ids
    if clusters != out.cluster_ids:
        raise DataError(f"{path}: clusters {clusters} do not match result.json's {out.cluster_ids}")
    n_chain = int(pi.sizes.get("chain", 1)) if "chain" in pi.dims else 1
    n_draw = int(pi.sizes["draw"]) if "draw" in pi.dims else int(pi.shape[0])
    # every step-th draw of every chain (a strided read is cheap; pointwise indexing of NetCDF is not);
    # chains pooled: the aggregated draws are independent tuples, and several chains sample one posterior
    step = max(1, -(-n_chain * n_draw // MAX_DRAWS))
    take = {"draw": slice(None, None, step)} if "draw" in pi.dims else {}

    def values(arr, dims):
        arr = arr.isel(take)
        if "chain" in arr.dims:
            arr = arr.stack(s=("chain", "draw")).transpose("s", *dims)
        return np.asarray(arr.values, dtype=np.float64)

    out.pi_draws = values(pi, ("cluster",))
    out.profile_draws = values(prof, ("cluster", "column"))
    out.n_draws_total = n_chain * n_draw
    out.n_chains = n_chain
    tree.close()


def _read_memberships(folder: Path, out: FitOutputs) -> None:
    """Each row's probability of its assigned (most probable) cluster, from ``assignments.csv``'s
    ``probability`` column, else from ``memberships.csv``'s largest ``p_k``."""
    import pandas as pd

    assign = folder / "assignments.csv"
    if assign.is_file():
        head = pd.read_csv(assign, nrows=0)
        if "probability" in head.columns:
            frame = pd.read_csv(assign, usecols=["silo", "probability"], dtype={"silo": str})
            out.max_probability = frame["probability"].to_numpy(dtype=float)
            out.max_probability_silo = frame["silo"].to_numpy()
            out.membership_source = "assignments.csv (probability of the assigned cluster)"
            return
    memb = folder / "memberships.csv"
    if memb.is_file():
        frame = pd.read_csv(memb, dtype={"silo": str})
        pcols = [c for c in frame.columns if c.startswith("p_")]
        if not pcols or "silo" not in frame.columns:
            raise DataError(f"{memb}: expected columns silo,row,p_1,...,p_K")
        out.max_probability = frame[pcols].to_numpy(dtype=float).max(axis=1)
        out.max_probability_silo = frame["silo"].to_numpy()
        out.membership_source = "memberships.csv (largest membership probability of each row)"


def load_fit(folder) -> FitOutputs:
    """Read ``folder`` (a ``vcmc fit --out`` folder) into :class:`FitOutputs`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; expected the output folder of `vcmc fit --out DIR`")
    result = _read_json(folder / "result.json")
    ids = [int(c["cluster"]) for c in result["clusters"]]
    if not ids:
        raise DataError(f"{folder / 'result.json'}: the fit has no cluster")
    columns, prof, ci = _read_profiles(folder / "profiles.csv", ids)
    out = FitOutputs(folder=folder, result=result, columns=columns, profiles=prof, profiles_ci=ci)
    post = folder / "posterior.nc"
    if post.is_file():
        _read_draws(post, out)
    else:
        out.notes.append("posterior.nc is absent: the characterisation uses the 95% intervals of profiles.csv "
                         "instead of the posterior draws")
    _read_memberships(folder, out)
    return out
