"""``vcmc fit``: cluster silo files jointly (each file one silo, or one file split by a column)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vcmc.config import FitConfig
from vcmc.exceptions import ConfigError

NAME = "fit"
HELP = "cluster silo files jointly without pooling them (VCMC or a comparator)"
DESCRIPTION = (
    "Each FILE is one silo (CSV, or Parquet with the [parquet] extra) unless --silo-column splits one file. "
    "All silos are encoded with one shared schema: given with --schema, or inferred from all files. "
    "Writes DIR/result.json (with the posterior predictive checks, WAIC and the posterior of the number of "
    "clusters), DIR/assignments.csv (silo,row,cluster,probability; row = 0-based data row of the input file, "
    "of the whole file with --silo-column; clusters numbered from 1; the most probable cluster and its "
    "probability), DIR/memberships.csv (silo,row,p_1,...,p_K), DIR/profiles.csv, DIR/posterior.nc (ArviZ; a "
    "chain dimension with --chains) and DIR/schema.json (for vcmc predict). Nothing is recoded without being "
    "asked: only empty cells are missing unless --na-values says more, and schema inference refuses labels it "
    "would have to guess (see docs/reliability.md).")


# The flags that set one FitConfig option each come from the option table (vcmc.config.schema: the flag,
# type, choices, default and help of each option are written once, on its dataclass field). Their defaults
# are the library's (shown by --help); a flag overrides the config file and --set only when it is typed.
# --iterations takes "auto" besides a number and --max-iterations caps it, and --rounds takes "auto" (the
# default, aggregation.rounds = 0): they are written out below.
_WRITTEN_OUT = ("sampler.n-iter", "aggregation.rounds")


def _option_flags():
    from vcmc.config.schema import options

    return [o for o in options() if o.flag and o.key not in _WRITTEN_OUT]


def _flag_help(opt) -> str:
    from vcmc.config.schema import describe_default

    text = opt.help.replace("``", "").replace("%", "%%")     # argparse formats help with %
    return text if "default" in text else f"{text} (default {describe_default(opt)})"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="silo data files")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (checked before any sampling; a "
                   "folder holding another run's results is refused without --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of another run in --out (the same run resumes without it)")
    p.add_argument("--silo-column", metavar="COL", help="split one file into silos by this column")
    p.add_argument("--schema", metavar="JSON", help="shared schema file (default: schema.json beside the files, "
                   "else inferred from all files)")
    p.add_argument("--id-column", metavar="COL", help="a row identifier column to ignore (kept out of the model)")
    p.add_argument("--exclude", metavar="COL[,COL...]", default=None,
                   help="columns of the files left out of the clustering (covariates, outcomes, other columns; "
                        "a schema can declare them instead: vcmc schema --covariates/--distal/--exclude)")
    p.add_argument("--na-values", action="append", type=na_values_arg, metavar="TEXT[,TEXT...]",
                   help="cell texts read as missing besides the empty cell, e.g. --na-values NA,-9 (repeatable; "
                        "recorded in result.json); by default 'NA' is a value")
    p.add_argument("--strip-whitespace", action="store_true",
                   help="read ' 1 ' as '1': remove white space around every cell (recorded in result.json)")
    p.add_argument("--case-insensitive", action="store_true",
                   help="read 'Yes' and 'yes' as one modality (an inferred modality is the lower-case label; "
                        "recorded in result.json)")
    from vcmc.methods import METHODS

    p.add_argument("--method", default="vcmc", choices=list(METHODS),
                   help="; ".join(f"{m.name}: {m.about}" for m in METHODS.values()))
    p.add_argument("--config", metavar="TOML", help="options in a TOML (or JSON) file, with the tables and dotted "
                   "keys of the Flower run config: [sampler] n-iter = 2000, matching.method = \"ball\"")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="one option, e.g. --set sampler.n-iter=2000 --set aggregation.stop=plateau (repeatable; "
                        "after --config, before the flags below)")
    from vcmc.config.schema import describe_default, option

    n_iter = option("sampler.n-iter")
    p.add_argument("--iterations", type=_iterations, default=argparse.SUPPRESS, metavar="N|auto",
                   help=f"Gibbs iterations per chain (default {n_iter.default}); auto: run each chain until the "
                        "split R-hat of its log posterior and weights is <= 1.01 and their bulk and tail ESS >= "
                        "400 (sampler.target-rhat, sampler.target-ess), at most --max-iterations")
    p.add_argument("--max-iterations", type=int, default=argparse.SUPPRESS, metavar="N",
                   help=f"with --iterations auto: the most iterations a chain may run (default {n_iter.default})")
    p.add_argument("--rounds", type=_rounds, default=argparse.SUPPRESS, metavar="R|auto",
                   dest="aggregation.rounds",
                   help="rounds of the run (default auto: at most 1,000 global-informed rounds of two chains from "
                        "C+ components, stopping at round 250, 500 or 1,000 once they settled and agree, wherever "
                        "every silo can take part: in this session, and in a deployment whose silos have their "
                        "rounds' keys; else the one-shot pass); 1: the paper's one-shot pass; R > 1: R - 1 rounds "
                        "after it (docs/design.md §16)")
    for opt in _option_flags():
        if opt.negate:
            p.add_argument(opt.flag, action="store_true", default=argparse.SUPPRESS, dest=opt.key,
                           help=f"switch off {opt.key} = true, the default: " + _flag_help(opt).replace(
                               " (default True)", "").replace(" (default True:", " (").replace("(default ", "("))
            continue
        p.add_argument(opt.flag, default=argparse.SUPPRESS, dest=opt.key,
                       type=opt.scalar_type, choices=opt.choices,
                       metavar=None if opt.choices else opt.flag.strip("-")[0].upper(),
                       help=_flag_help(opt))
    del describe_default
    p.add_argument("--clusters", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="deprecated alias: C+ (--components) for the Bayesian methods, K (--n-clusters) for "
                        "fed-kmodes")
    p.add_argument("--n-clusters", type=int, default=None, metavar="K",
                   help="number of clusters of fed-kmodes (which does not infer it)")
    p.add_argument("--min-silos", type=int, default=None, metavar="N",
                   help="continue without failed silos while at least N remain (default: all required)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="root seed (default: a random seed is drawn, printed in the resume line and recorded in "
                        "result.json; the same command again in --out resumes with it)")
    p.add_argument("--jobs", type=int, default=1, metavar="J", help="worker processes (at most J, whatever the "
                   "number of silos)")
    p.add_argument("--silo-policy", metavar="FILE", default=None,
                   help="a deployment preview: every silo built as a SuperNode's node config builds it, from FILE's "
                        "node-config keys (TOML or JSON: the privacy keys such as min-cluster-size, "
                        "suppress-cells-below, round-to and the policy keys such as allow-strategies, min-peers, for "
                        "every silo at the top "
                        "level, a silo's own under [silos.NAME]; an empty file is the operators' defaults), the "
                        "rounds' keys generated for the run, the silos in this process; result.json says so "
                        "(diagnostics.deployment_preview; docs/federation.md)")
    p.add_argument("--save-summaries", action="store_true",
                   help="save silo summaries in DIR/summaries so server steps can be re-run")
    p.add_argument("--report", action="store_true",
                   help="then write DIR/report.html (as `vcmc report DIR` does)")
    _add_lca_arguments(p)
    p.add_argument("--no-resume", action="store_true",
                   help="do not keep the silos' finished apply steps in DIR/silo-state (by default an "
                        "interrupted or repeated run with the same data, options and seed reuses them)")


def _add_lca_arguments(p: argparse.ArgumentParser) -> None:
    """``--k K`` and the three-step flags: the maximum-likelihood latent class analysis (vcmc.lca)."""
    from vcmc.lca.cli import add_common_arguments, positive_k

    g = p.add_argument_group("latent class analysis of a fixed K (maximum likelihood, docs/design.md §15)")
    g.add_argument("--k", type=positive_k, default=None, metavar="K",
                   help="fit the K-class model by federated EM instead of the over-fitted Bayesian model; writes "
                        "lca.json, fit_statistics.csv, item_probabilities.csv/.png")
    g.add_argument("--covariates", metavar="COL[,COL...]", default=None,
                   help="columns (kept out of the clustering) predicting class membership, a bias-adjusted "
                        "three-step multinomial logit -> covariates.csv, at --k K or, without --k, at the Bayesian "
                        "fit's clusters; COL:numeric or COL:categorical forces the kind (default: the schema's "
                        "covariate columns)")
    g.add_argument("--distal", metavar="COL[,COL...]", default=None,
                   help="outcome columns (binary, categorical or numeric) by class, bias-adjusted three-step -> "
                        "distal.csv and distal_tests.csv, at --k K or the Bayesian fit's clusters (default: the "
                        "schema's outcome columns)")
    g.add_argument("--standard-errors", choices=("observed", "complete-data"), default="observed",
                   help="with --k: the item-response probabilities' standard errors from the model's observed "
                        "information (missing values and classification uncertainty included; 2 E-step rounds per "
                        "free parameter, profile intervals at 0 or 1) or the complete-data ones of each class's "
                        "rows that observed the item (one round; a Flower run's default, lca-standard-errors)")
    add_common_arguments(g)


def na_values_arg(text: str) -> list[str]:
    """``--na-values NA,-9``: comma-separated cell texts."""
    return [t for t in text.split(",")]


def _iterations(text: str):
    """``--iterations``: a positive number of iterations or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of iterations or 'auto', got {text!r}") \
            from None


def _rounds(text: str) -> int:
    """``--rounds``: a number of rounds >= 1, or ``auto`` (``aggregation.rounds = 0``: ``vcmc.rounds.plan``)."""
    if text.strip().lower() == "auto":
        return 0
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of rounds >= 1 or 'auto', got {text!r}")
    return value


def _parse_setting(text: str) -> tuple[str, object]:
    """``key=value`` of ``--set``; the value is read as TOML when it parses (numbers, booleans, quoted
    strings), else kept as text, and coerced to the option's type by ``config_from_mapping``."""
    import tomllib

    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE (e.g. --set sampler.n-iter=2000); got {text!r}")
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    return key.strip(), parsed


def config_mapping_from_args(args) -> dict[str, object]:
    """The options typed on the command line as the flat dotted mapping of a Flower run config."""
    out: dict[str, object] = {}
    for text in getattr(args, "settings", []) or []:
        key, value = _parse_setting(text)
        out[key] = value
    if "iterations" in vars(args):
        if args.iterations == "auto":
            out["sampler.stop"] = "converged"
        else:
            out["sampler.n-iter"] = args.iterations
    if "max_iterations" in vars(args):
        if vars(args).get("iterations") != "auto":
            raise ConfigError("--max-iterations caps --iterations auto; with a fixed number of iterations give "
                              "--iterations N alone")
        out["sampler.n-iter"] = args.max_iterations
    if "aggregation.rounds" in vars(args):
        out["aggregation.rounds"] = vars(args)["aggregation.rounds"]
    for opt in _option_flags():
        if opt.key in vars(args):
            out[opt.key] = False if opt.negate else vars(args)[opt.key]
    if "clusters" in vars(args) and args.method != "fed-kmodes" and "prior.n-components" not in vars(args):
        out["prior.n-components"] = args.clusters
    return out


def config_from_args(args) -> FitConfig:
    """``FitConfig`` from ``--config``, then ``--set``, then the flags, merged key by key and built by the one
    mapping parser (the Flower run config's). The burn-in, unless one of them sets it, is derived by the
    config itself (``SamplerConfig``: half of the iterations; ``AUTO_BURN_IN`` with ``--iterations auto``)."""
    from vcmc.config import config_from_mapping
    from vcmc.config.mapping import merge_mappings, read_config_file
    from vcmc.flower.server import SERVER_KEYS  # a Flower app's pyproject.toml can be given to --config as is

    merged = merge_mappings(read_config_file(args.config) if getattr(args, "config", None) else {},
                            config_mapping_from_args(args))
    from vcmc.cli._guard import say_config_error, typed_options, validate_config

    file_keys = read_config_file(args.config) if getattr(args, "config", None) else {}
    try:
        config = config_from_mapping(merged, ignore=SERVER_KEYS)
    except ConfigError as err:
        said = say_config_error(err, typed_options(args, file_keys))
        if said is not err:
            raise said from None
        where = f" (from {args.config!r}, --set or the flags)" if getattr(args, "config", None) else ""
        raise ConfigError(f"{err}{where}") from None
    validate_config(config, typed_options(args, file_keys))
    return config


def load_silos(files, *, silo_column=None, schema_path=None, id_column=None, na_values=(), normalisation=None,
               min_modality_rows: int = 1, info: dict | None = None, exclude=()):
    """The silos of ``vcmc fit``. ``info``, when given, is filled with what ``result.json`` records about the
    data: the schema used (a file, or inferred), the missing-value texts, the normalisation and what it
    changed, and the row numbers of each silo's rows in its file (``rows``)."""
    from vcmc.data import Schema, read_silos, split_by_column
    from vcmc.data.normalise import NO_NORMALISATION

    normalisation = normalisation or NO_NORMALISATION
    na = ("", *na_values)
    paths = [Path(f) for f in files]
    source = "--schema" if schema_path is not None else None
    if schema_path is None:
        # a schema.json beside the inputs (vcmc simulate writes one) is the silos' agreed coding: use it,
        # so that a modality no silo happens to observe keeps its place in the coding. Beside only some of
        # the files, or different ones, it is ambiguous: refused rather than silently ignored.
        beside = {p: p.parent / "schema.json" for p in paths}
        found = sorted({str(b) for b in beside.values() if b.is_file()})
        if len(found) == 1 and all(b.is_file() for b in beside.values()):
            schema_path, source = found[0], "beside the files"
        elif found:
            without = [str(p) for p, b in beside.items() if not b.is_file()]
            raise ConfigError(
                f"a schema.json lies beside some of the files ({', '.join(found)}) but not beside "
                f"{', '.join(without) or 'the others'}" + (" and they differ" if len(found) > 1 else "") +
                "; say which schema to use: --schema PATH for every file, or move the files together")
    schema = Schema.from_json(Path(schema_path)) if schema_path else None
    changes: dict = {}
    positions: dict = {}
    min_name = "--min-cluster-size"
    if silo_column is not None:
        if len(paths) != 1:
            raise ConfigError(f"--silo-column splits ONE file into silos; got {len(paths)} files.")
        silos = split_by_column(paths[0], silo_column, schema=schema, id_column=id_column, na_values=na,
                                normalisation=normalisation, min_modality_rows=min_modality_rows,
                                min_modality_rows_flag=min_name,
                                changes=changes, positions=positions, exclude=exclude)
    else:
        silos = read_silos(paths, schema=schema, id_column=id_column, na_values=na, normalisation=normalisation,
                           min_modality_rows=min_modality_rows, min_modality_rows_flag=min_name, changes=changes,
                           exclude=exclude)
        positions = {s.name: None for s in silos}
    if info is not None:
        info.update({
            "files": [str(p) for p in paths],
            "silo_column": silo_column,
            "id_column": id_column if id_column is not None else silos[0].schema.id_column,
            "excluded": list(exclude) + list(silos[0].schema.role_columns("covariate", "outcome", "ignored")),
            "schema": {"source": "inferred from the files" if schema is None else f"{schema_path} ({source})",
                       "fingerprint": silos[0].schema.fingerprint()},
            "na_values": list(dict.fromkeys((*na, *silos[0].schema.na_values))),
            "normalisation": normalisation.to_dict(),
            "normalised": [{"silo": silo, "column": col, "from": raw, "to": to, "cells": n}
                           for silo, cols in changes.items() for col, items in cols.items()
                           for raw, to, n in items],
            "rows": positions,
        })
    return silos


def _clusters_of(paths) -> list[dict]:
    """The clusters holding rows, as ``result.json`` lists them (weight, interval, size)."""
    import json

    if "result" not in paths:
        return []
    doc = json.loads(Path(paths["result"]).read_text(encoding="utf-8"))
    return [c for c in doc.get("clusters", []) if (c.get("size") or 0) > 0]


def run(args) -> int:
    from vcmc.cli import _guard

    argv = list(getattr(args, "_argv", None) or sys.argv[1:])
    if args.k is not None:
        from vcmc.lca.cli import run_fit

        return run_fit(args)
    _guard.validate_args(args)
    from vcmc.lca.cli import bayesian_auxiliary

    # the three-step models at the Bayesian fit's clusters (docs/design.md §15.3): the columns typed or declared
    covariates, distal, auxiliary_excluded = bayesian_auxiliary(args)
    config = config_from_args(args)
    out = _guard.check_out_dir(args.out)       # before reading any data or importing the samplers: < 1 s

    from vcmc.api import fit
    from vcmc.data.normalise import Normalisation
    from vcmc.federation.faults import FaultPolicy
    from vcmc.report import write_outputs

    normalisation = Normalisation(strip_whitespace=args.strip_whitespace, case_insensitive=args.case_insensitive)
    na_values = [t for group in (args.na_values or []) for t in group]
    preview = None
    if args.silo_policy is not None:
        from vcmc.flower.preview import read_silo_policy

        preview = read_silo_policy(args.silo_policy)      # checked before any data is read
    info: dict = {}
    silos = load_silos(args.files, silo_column=args.silo_column, schema_path=args.schema,
                       id_column=args.id_column, na_values=na_values, normalisation=normalisation,
                       min_modality_rows=config.privacy.min_cluster_size, info=info, exclude=auxiliary_excluded)
    _guard.validate_against_data(args, silos, config)
    resume = not args.no_resume
    n_clusters = (args.n_clusters if args.n_clusters is not None
                  else vars(args).get("clusters") if args.method == "fed-kmodes" else None)

    if (covariates or distal) and args.method in ("fed-kmodes",):
        raise ConfigError(f"--covariates and --distal need a model of class membership; --method {args.method} "
                          "gives hard labels only")
    if (covariates or distal) and silos[0].schema.continuous:
        why = ("the three-step covariate and distal models are not built for continuous clustering variables yet "
               "(docs/design.md §17.5)")
        if args.covariates or args.distal:
            raise ConfigError(f"{why}; fit without --covariates/--distal, or band the continuous variables")
        print(f"warning: {why}: the schema's covariate and outcome columns are left out of this fit",  # noqa: T201
              file=sys.stderr)
        covariates = distal = None

    def key_of(seed):
        method = args.method if preview is None else f"{args.method} (deployment preview {preview!r})"
        return _guard.run_key(method=method, config=config, seed=seed, silos=silos, n_clusters=n_clusters,
                              normalisation=normalisation, na_values=na_values,
                              extra={"covariates": covariates, "distal": distal})

    # the seed is fixed here, so that the line printed on Ctrl-C can give the command that resumes; without
    # --seed, the seed a previous run of this same command drew in --out (it resumes)
    seed = _guard.choose_seed(args, out, key_of)
    key = key_of(seed)
    mode = _guard.check_previous_run(out, key, overwrite=args.overwrite)
    _guard.check_free_space(out, _guard.estimate_bytes(config, silos, resume=resume,
                                                       save_summaries=args.save_summaries))
    _guard.write_run_manifest(out, key, seed, argv)
    try:
        result = fit(silos, config=config, method=args.method, rng=seed, jobs=args.jobs,
                     policy=FaultPolicy(min_silos=args.min_silos),
                     save_dir=(out / "summaries") if args.save_summaries else None, n_clusters=n_clusters,
                     state_dir=out / "silo-state" if resume else None, silo_policy=args.silo_policy)
    except KeyboardInterrupt:
        print(_guard.interrupted_line(out, argv, seed, resume=resume, n_silos=len(silos)),  # noqa: T201
              file=sys.stderr)
        return 130
    rows = info.pop("rows")
    try:
        paths = write_outputs(result, out, schema=silos[0].schema, rows=rows, data=info)
    except OSError as err:
        raise _guard.write_error(err, out, resume=resume) from None
    if "result" in paths and len(silos) == len(result.silos):
        from vcmc.lca.cli import add_point_statistics, bayesian_three_step

        add_point_statistics(paths["result"], result, silos)
        if covariates or distal:
            paths.update(bayesian_three_step(args, out, paths["result"], result, silos, covariates, distal, info))
    if mode == "overwrite":
        _guard.remove_stale(out, paths.values())
    _guard.seal_results(out, key, paths.values())
    print(f"{result.method}: {result.n_clusters} clusters from {len(result.silos)} silos "  # noqa: T201
          f"({int(result.partition_counts.sum())} rows) in {result.timings.get('total', 0):.1f} s")
    for kind, path in paths.items():
        print(f"  {kind:12s} {path}")  # noqa: T201
    for w in result.diagnostics.get("warnings", []) if isinstance(result.diagnostics, dict) else []:
        print(f"warning: {w}", file=sys.stderr)  # noqa: T201
    other = (result.diagnostics.get("rounds_plan") or {}).get("other_mode") or {}
    if other.get("differs"):      # the same options may give another answer in the other mode
        print(f"note: {other['note']}", file=sys.stderr)  # noqa: T201
    _guard.say_result_warnings(out, config)
    from vcmc.report.sections import weakly_identified

    for w in weakly_identified(_clusters_of(paths)):
        print(f"warning: {w}", file=sys.stderr)  # noqa: T201
    if info["normalised"]:
        n = sum(item["cells"] for item in info["normalised"])
        print(f"note: {n} cell(s) normalised as asked (--strip-whitespace / --case-insensitive / --na-values); "  # noqa: T201
              "listed under data.normalised in result.json", file=sys.stderr)
    if args.report:
        from vcmc.report import write_report

        print(f"  {'report':12s} {write_report(out).html}")  # noqa: T201
    return 0
