"""``vcmc predict``: memberships of new people in the global clusters of a saved fit."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from vcmc.exceptions import ConfigError, DataError

NAME = "predict"
HELP = "memberships of new people in the clusters of a saved fit"
DESCRIPTION = (
    "Reads the fit in DIR (posterior.nc, result.json, schema.json, as written by vcmc fit) and every FILE "
    "(CSV or Parquet, the fit's columns; any number of rows), encodes them with the fit's schema (a value "
    "outside it is an error, never a neighbouring code) and writes OUT/memberships.csv (silo,row,p_1,...,p_K: "
    "each row's posterior probability of each global cluster, averaged over posterior draws of the global "
    "weights and profiles) and OUT/assignments.csv (silo,row,cluster,probability: the most probable "
    "cluster), in the formats of vcmc fit; 'silo' is the file's name without extension. OUT is held by this run "
    "alone; it may not be the fit's folder, and a folder holding another run's results is refused unless "
    "--overwrite. DIR must hold one finished fit's files (as its .vcmc-run.json records them). DIR may also be a "
    "vcmc fit --k folder (lca.json, schema.json): the memberships are then those of the maximum-likelihood "
    "model. Columns the fit's schema gives a role (covariates, outcomes, identifiers) and those --exclude names "
    "are left out.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("fit_dir", metavar="DIR", help="output folder of vcmc fit")
    p.add_argument("files", nargs="+", metavar="FILE", help="files of people to score")
    p.add_argument("--out", required=True, metavar="OUT", help="output folder (never the fit's own folder DIR)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace another prediction's results in OUT (the same command again resumes without it)")
    p.add_argument("--id-column", metavar="COL", help="a row identifier column to ignore (default: the schema's)")
    p.add_argument("--exclude", metavar="COL[,COL...]", default=None,
                   help="columns of the files to leave out (covariates, outcomes, other columns the schema does not "
                        "declare)")
    p.add_argument("--draws", type=int, default=None, metavar="N",
                   help="posterior draws averaged over, evenly spaced over the chains (default: the fit's "
                        "aggregation.assign-draws)")


def load_fit(fit_dir) -> dict:
    """The saved fit's schema, global draws (chains flattened) and settings; errors name the missing file."""
    import xarray as xr

    from vcmc.data import Schema
    from vcmc.outputs.runkey import check_result_set

    d = Path(fit_dir)
    if not d.is_dir():
        raise ConfigError(f"{d} is not a folder; vcmc predict needs the folder written by vcmc fit --out")
    if not (d / "result.json").exists() and (d / "lca.json").is_file():
        return _load_lca_fit(d)
    for name in ("result.json", "schema.json", "posterior.nc"):
        if not (d / name).is_file():
            hint = (" (fits written before vcmc saved its schema lack it: re-run vcmc fit)" if name == "schema.json"
                    else " (methods without posterior draws, such as fed-kmodes, cannot predict)"
                    if name == "posterior.nc" else "")
            raise ConfigError(f"{d / name} does not exist; vcmc predict needs the folder written by vcmc "
                              f"fit{hint}")
    manifest = check_result_set(d, reader="vcmc predict")
    try:
        result = json.loads((d / "result.json").read_text(encoding="utf-8"))
    except ValueError as err:
        raise ConfigError(f"{d / 'result.json'} is not valid JSON ({err}): damaged or cut short; copy it again "
                          "from the fit, or re-run vcmc fit") from None
    schema = Schema.from_json(d / "schema.json")
    try:
        with xr.open_datatree(d / "posterior.nc") as tree:
            post = tree["posterior"]
            pi = np.asarray(post["pi"].values, dtype=np.float64)
            profiles = np.asarray(post["profiles"].values, dtype=np.float64)
            # the continuous items' draws (docs/design.md §17.9): means, then variances, standardised
            gaussian = None if "mean" not in post else np.concatenate(
                [np.asarray(post["mean"].values, dtype=np.float64), np.asarray(post["variance"].values)], axis=-1)
    except Exception as err:  # noqa: BLE001 - h5py, h5netcdf and xarray each raise their own kinds
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"{d / 'posterior.nc'} cannot be read as the fit's posterior draws ({why[:120]}): the "
                          "file is damaged or truncated (an interrupted copy?); copy it again from the fit's "
                          "folder, or re-run vcmc fit") from None
    pi = pi.reshape(-1, pi.shape[-1])
    profiles = profiles.reshape(-1, *profiles.shape[-2:])
    p = int(np.sum(schema.n_modalities))
    if profiles.shape[1:] != (pi.shape[1], p):
        raise ConfigError(f"{d / 'posterior.nc'} holds profiles of shape {profiles.shape[1:]}, but "
                          f"{d / 'schema.json'} has {p} modality columns for {pi.shape[1]} clusters")
    if (gaussian is None) != (not schema.continuous):
        raise ConfigError(f"{d / 'posterior.nc'} and {d / 'schema.json'} disagree on the continuous variables: "
                          "copy both again from the fit's folder")
    gaussian = None if gaussian is None else gaussian.reshape(-1, *gaussian.shape[-2:])
    draws = int(result.get("config", {}).get("aggregation", {}).get("assign_draws", 100))
    return {"schema": schema, "pi": pi, "profiles": profiles, "draws": draws, "result": result,
            "key": (manifest or {}).get("key"), "gaussian": gaussian}


def _load_lca_fit(d: Path) -> dict:
    """A ``vcmc fit --k`` folder: its schema and maximum-likelihood weights and profiles (one "draw"), and with
    continuous variables the classes' Gaussian means and variances (standardised)."""
    from vcmc.data import Schema
    from vcmc.outputs.runkey import check_result_set

    if not (d / "schema.json").is_file():
        raise ConfigError(f"{d / 'schema.json'} does not exist: {d} holds a latent class model written before vcmc "
                          "fit --k kept its schema; re-run vcmc fit --k to score new rows with it")
    manifest = check_result_set(d, reader="vcmc predict")
    try:
        doc = json.loads((d / "lca.json").read_text(encoding="utf-8"))
        pi = np.asarray(doc["weights"], dtype=np.float64)[None, :]
        profiles = np.asarray(doc["profiles"], dtype=np.float64)[None, :, :]
        gaussian = None if doc.get("gaussian") is None else np.asarray(doc["gaussian"], dtype=np.float64)
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{d / 'lca.json'} holds no fitted profiles ({type(err).__name__}): written by an older "
                          "vcmc fit --k, or damaged; re-run vcmc fit --k") from None
    schema = Schema.from_json(d / "schema.json")
    if profiles.shape[2] != int(np.sum(schema.n_modalities)):
        raise ConfigError(f"{d / 'lca.json'} holds profiles of {profiles.shape[2]} modality columns, "
                          f"{d / 'schema.json'} {int(np.sum(schema.n_modalities))}")
    g = len(schema.continuous)
    if (gaussian is None) != (g == 0) or (gaussian is not None and gaussian.shape != (pi.shape[1], 2 * g)):
        raise ConfigError(f"{d / 'lca.json'} and {d / 'schema.json'} disagree on the continuous variables: "
                          "copy both again from the fit's folder")
    return {"schema": schema, "pi": pi, "profiles": profiles, "draws": 1, "result": doc,
            "key": (manifest or {}).get("key"), "lca": True, "lca_gaussian": gaussian}


def predict_memberships(fit: dict, codes: np.ndarray, n_draws: int | None = None, values=None) -> np.ndarray:
    """Memberships (n, K) of encoded rows under the fit's global draws (docs/design.md §8.2); for a latent
    class model (``vcmc fit --k``) at its maximum-likelihood estimate, as its own memberships.csv. With
    continuous items, ``values`` are the rows' measurements in their units (a missing one skipped, as a missing
    code is)."""
    if fit.get("lca"):
        from vcmc.data.continuous import standardised
        from vcmc.lca.outputs import lca_memberships

        gaussian = fit.get("lca_gaussian")
        z = None if gaussian is None else standardised(values, fit["schema"].continuous)
        return lca_memberships(codes, fit["schema"].n_modalities, fit["pi"][0], fit["profiles"][0], values=z,
                               gaussian=gaussian)
    from vcmc.assessment import even_draws
    from vcmc.rows.memberships import posterior_memberships

    n_draws = fit["draws"] if n_draws is None else int(n_draws)
    if n_draws < 1:
        raise ConfigError(f"--draws must be an int >= 1; got {n_draws}")
    idx = even_draws(fit["pi"].shape[0], n_draws)
    if fit.get("gaussian") is not None:
        from vcmc.data.continuous import standardised
        from vcmc.rows.mixed import memberships

        z = standardised(values, fit["schema"].continuous)
        return memberships(codes, fit["schema"].n_modalities, z, fit["pi"][idx], fit["profiles"][idx],
                           fit["gaussian"][idx])
    return posterior_memberships(codes, fit["schema"].n_modalities, fit["pi"][idx], fit["profiles"][idx])


def _out_folder(args, fit_dir: Path) -> Path:
    """OUT: checked and held like vcmc fit's --out, never another fit's folder (the fit's own is refused
    before anything is read)."""
    from vcmc.outputs.folder import OutputError, check_out_dir
    from vcmc.outputs.runkey import read_manifest

    out = check_out_dir(args.out, command="vcmc predict")
    previous = read_manifest(out) or {}
    if (out / "posterior.nc").exists() or (out / "result.json").exists() or (out / "lca.json").exists() or \
            str(previous.get("command", "")).startswith("vcmc fit"):
        raise OutputError(f"--out {out} holds the results of a vcmc fit; vcmc predict never writes into a fit's "
                          "folder (even with --overwrite): choose another --out")
    return out


def run(args) -> int:
    import shlex
    import sys

    from vcmc.data import read_rows
    from vcmc.lca.cli import columns_arg
    from vcmc.outputs.folder import OutputError, remove_stale, same_folder
    from vcmc.outputs.runkey import check_previous_run, content_key, file_digest, seal_results, write_run_manifest
    from vcmc.rows.memberships import write_membership_files

    fit_dir = Path(args.fit_dir)
    fit = load_fit(fit_dir)
    if same_folder(args.out, fit_dir):
        raise OutputError(f"--out {args.out} is the fit's own folder {fit_dir}: the predictions would replace the "
                          "fit's assignments.csv and memberships.csv; choose another --out, e.g. "
                          f"--out {fit_dir.name}-predicted")
    argv = list(getattr(args, "_argv", None) or sys.argv[1:])
    rows = []
    names = set()
    for f in args.files:
        data = read_rows(f, fit["schema"], id_column=args.id_column, exclude=columns_arg(args.exclude))
        if data.name in names:
            raise DataError(f"two files are named {data.name!r} (without extension); the 'silo' column would "
                            "not tell their rows apart: rename one")
        names.add(data.name)
        m = predict_memberships(fit, data.codes, args.draws, values=data.values)
        rows.append((data.name, m, np.argmax(m, axis=1)))
    out = _out_folder(args, fit_dir)            # the files are read and scored: OUT is created only now
    fit_key = fit["key"] or file_digest(fit_dir / ("lca.json" if fit.get("lca") else "posterior.nc"))
    key = content_key({"command": "predict", "fit": fit_key, "draws": args.draws, "id_column": args.id_column,
                       "exclude": args.exclude},
                      files=[Path(f) for f in args.files])
    mode = check_previous_run(out, key, overwrite=args.overwrite, what="run of vcmc predict")
    write_run_manifest(out, key, None, argv, command=shlex.join(["vcmc", *argv]))
    paths = write_membership_files(out, rows, n_clusters=fit["pi"].shape[1])
    if mode == "overwrite":
        remove_stale(out, paths.values())
    seal_results(out, key, paths.values())
    n = sum(r[2].size for r in rows)
    print(f"predict: {n} rows of {len(rows)} file(s) scored against the {fit['pi'].shape[1]} clusters of "  # noqa: T201
          f"{args.fit_dir}")
    for kind, path in paths.items():
        print(f"  {kind:12s} {path}")  # noqa: T201
    return 0
