"""``vcmc schema``: write the shared schema from the silos' files for the user to review (or check files
against one), so that nobody writes schema JSON by hand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "schema"
HELP = "write the shared schema of the silos' files (schema.json) for review, or --check files against one"
DESCRIPTION = (
    "Infers the variables and modalities of every FILE (one silo each, or one file split by --silo-column) "
    "with the checks of vcmc fit (labels differing only by white space, case or numeric spelling; missing-value "
    "texts; identifier-like columns) and writes them to --out (schema.json, for vcmc fit --schema). Modalities "
    "seen in fewer rows than --min-cluster-size are listed, not refused: a modality in the schema is "
    "published in the results (profiles.csv, posterior.nc), so keeping a rare one is the user's decision "
    "(merge or recode it in the files otherwise). Columns that are not clustering items stay in the files and "
    "get a role in the schema: --covariates (predictors of class membership), --distal (outcomes), --exclude "
    "(left out of every analysis) and --id-column (the row identifier); every command then leaves them out of "
    "the clustering, and vcmc fit uses the covariates and outcomes. With --check SCHEMA, nothing is written: "
    "every file is encoded with SCHEMA and any value outside it is reported.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from vcmc.config import FitConfig

    p.add_argument("files", nargs="+", metavar="FILE", help="silo data files (CSV, or Parquet)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", metavar="JSON", help="the schema file to write (e.g. schema.json)")
    what.add_argument("--check", metavar="JSON", help="check the files against this schema; write nothing")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--silo-column", metavar="COL", help="split one file into silos by this column")
    p.add_argument("--id-column", metavar="COL", help="a row identifier column to leave out of the clustering "
                   "(recorded in the schema with the role 'id')")
    p.add_argument("--covariates", metavar="COL[,COL...]", default=None,
                   help="columns that predict class membership (age, sex): recorded with the role 'covariate' "
                        "and left out of the clustering; COL:numeric or COL:categorical states the kind")
    p.add_argument("--distal", metavar="COL[,COL...]", default=None,
                   help="outcome columns (death, a score): recorded with the role 'outcome' and left out of the "
                        "clustering; COL:numeric or COL:categorical states the kind")
    p.add_argument("--exclude", metavar="COL[,COL...]", default=None,
                   help="other columns left out of every analysis (recorded with the role 'ignored')")
    p.add_argument("--na-values", action="append", metavar="TEXT[,TEXT...]", default=[],
                   help="cell texts read as missing besides the empty cell, e.g. NA,-9 (recorded in the schema)")
    p.add_argument("--continuous", action="append", metavar="COL[,COL...]", default=[],
                   help="read these columns as continuous (Gaussian items); by default a column of numbers with more "
                        "than 10 distinct values is proposed as continuous, and the command says which")
    p.add_argument("--categorical", action="append", metavar="COL[,COL...]", default=[],
                   help="keep these columns categorical (no continuous proposal for them)")
    p.add_argument("--strip-whitespace", action="store_true", help="read ' 1 ' as '1'")
    p.add_argument("--case-insensitive", action="store_true", help="read 'Yes' and 'yes' as one modality")
    p.add_argument("--min-modality-rows", type=int, metavar="N",
                   help="list modalities seen in fewer rows of all silos than this (default "
                        f"{FitConfig().privacy.min_cluster_size}: vcmc fit's disclosure minimum, --min-cluster-size, "
                        "under which vcmc fit's own inference refuses them)")
    # the name of the first release, kept working: it named the disclosure minimum, which this is not
    p.add_argument("--min-cluster-size", type=int, dest="deprecated_min_cluster_size", metavar="N",
                   help=argparse.SUPPRESS)


def _names(groups) -> list[str]:
    return [t for group in groups for t in group.split(",") if t]


def role_columns(args) -> list:
    """The non-item columns the flags name, with their roles (``vcmc.data.schema.Column``)."""
    from vcmc.data.schema import Column
    from vcmc.exceptions import ConfigError
    from vcmc.lca.analysis import parse_columns

    out = [Column(name, "covariate", kind) for name, kind in parse_columns(args.covariates, "--covariates")]
    out += [Column(name, "outcome", kind) for name, kind in parse_columns(args.distal, "--distal")]
    out += [Column(name, "ignored") for name, _ in parse_columns(args.exclude, "--exclude")]
    if args.id_column is not None:
        out.append(Column(str(args.id_column), "id"))
    names = [c.name for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"column(s) {twice} are given two roles (--covariates, --distal, --exclude, --id-column); "
                          "give each column one")
    return out


def _silos(args, schema, proposed: list | None = None, exclude=()):
    from vcmc.data import read_silos, split_by_column
    from vcmc.data.normalise import Normalisation

    norm = Normalisation(strip_whitespace=args.strip_whitespace, case_insensitive=args.case_insensitive)
    na = ("", *_names(args.na_values))
    # explicit --continuous columns replace the proposal; --categorical columns are left out of it
    kinds = {"continuous": _names(args.continuous) or "auto", "categorical": _names(args.categorical),
             "proposed": proposed} if schema is None else {}
    if args.silo_column:
        if len(args.files) != 1:
            from vcmc.exceptions import ConfigError

            raise ConfigError(f"--silo-column splits ONE file into silos; got {len(args.files)} files")
        return split_by_column(args.files[0], args.silo_column, schema=schema, id_column=args.id_column,
                               na_values=na, normalisation=norm, exclude=exclude, **kinds), na
    return read_silos(args.files, schema=schema, id_column=args.id_column, na_values=na, normalisation=norm,
                      exclude=exclude, **kinds), na


def rare_modalities(silos, min_modality_rows: int) -> list[str]:
    """``column 'x': 'west' in 3 row(s) of b.csv`` for each modality seen in fewer than ``min_modality_rows`` rows."""
    import numpy as np

    schema = silos[0].schema
    out = []
    for q, var in enumerate(schema.variables):
        for k, label in enumerate(var.modalities):
            per = {s.source or s.name: int(np.count_nonzero(s.codes[:, q] == k)) for s in silos}
            n = sum(per.values())
            if n < min_modality_rows:
                where = ", ".join(f"{src}" for src, c in per.items() if c)
                out.append(f"column {var.name!r}: {label!r} in {n} row(s) ({where or 'no silo'})")
    return out


def run(args) -> int:
    from vcmc.data import Schema
    from vcmc.data.checks import data_warnings
    from vcmc.exceptions import ConfigError

    columns = role_columns(args)
    excluded = [c.name for c in columns if c.role != "id"]
    if args.check:
        silos, _ = _silos(args, Schema.from_json(Path(args.check)), exclude=excluded)
        for line in data_warnings(silos):
            print(f"warning: {line}", file=sys.stderr)  # noqa: T201
        print(f"schema: {len(silos)} silo(s), {sum(s.n_rows for s in silos)} rows: every value is a modality of "  # noqa: T201
              f"{args.check} or missing")
        return 0
    out = Path(args.out)
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder; give the schema file to write, e.g. --out {out / 'schema.json'}")
    if out.exists() and not args.overwrite:
        raise ConfigError(f"--out {out} exists (it may hold reviewed edits); it is kept: choose another name, or "
                          "add --overwrite to replace it")
    proposed: list[str] = []
    silos, na = _silos(args, None, proposed, exclude=excluded)
    schema = silos[0].schema
    if len(na) > 1 or columns:
        schema = Schema(schema.variables, na_values=tuple(t for t in na if t), continuous=schema.continuous,
                        columns=tuple(columns))
    from vcmc.outputs import lock

    out.parent.mkdir(parents=True, exist_ok=True)
    lock.acquire(out.parent, "vcmc schema")
    schema.to_json(out)
    cont = f" and {len(schema.continuous)} continuous" if schema.continuous else ""
    print(f"schema: {schema.n_variables} variables, {sum(schema.n_modalities)} modalities{cont} from {len(silos)} "  # noqa: T201
          f"silo(s) -> {out}; review it, then give it to vcmc fit --schema {out}")
    for role in ("covariate", "outcome", "id", "ignored"):
        named = schema.role_columns(role)
        if named:
            print(f"  {role + ' column' + ('s' if len(named) > 1 else '') + ':':19s} {', '.join(named)} (left out of "  # noqa: T201
                  "the clustering)")
    for line in data_warnings(silos):
        print(f"warning: {line}", file=sys.stderr)  # noqa: T201
    if proposed:
        print(f"note: {len(proposed)} column(s) of numbers with more than 10 distinct values are proposed as "  # noqa: T201
              f"continuous (Gaussian items, standardised by the location and scale written in the schema): "
              f"{', '.join(proposed)}; keep one categorical with --categorical COL", file=sys.stderr)
    minimum = args.min_modality_rows
    if args.deprecated_min_cluster_size is not None:
        if minimum is not None:
            raise ConfigError("give --min-modality-rows alone (--min-cluster-size is its deprecated name)")
        print("warning: vcmc schema --min-cluster-size is deprecated; it is --min-modality-rows (the fewest rows "  # noqa: T201
              "a modality is seen in, not a cluster size)", file=sys.stderr)
        minimum = args.deprecated_min_cluster_size
    if minimum is None:
        from vcmc.config import FitConfig

        minimum = FitConfig().privacy.min_cluster_size
    rare = rare_modalities(silos, minimum)
    if rare:
        print(f"note: {len(rare)} modalit{'y is' if len(rare) == 1 else 'ies are'} seen in fewer rows of all "  # noqa: T201
              f"silos than --min-modality-rows {minimum} (by default vcmc fit's disclosure minimum, "
              "--min-cluster-size):", file=sys.stderr)
        for line in rare:
            print(f"  {line}", file=sys.stderr)  # noqa: T201
        print("  they are in the schema, so vcmc fit --schema publishes them in the results (profiles.csv, "  # noqa: T201
              "posterior.nc); keeping them is your decision: delete a modality from the file and recode or "
              "merge its rows in the data (e.g. into 'other') if it must not be published", file=sys.stderr)
    return 0
