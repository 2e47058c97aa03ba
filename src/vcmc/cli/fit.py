"""``vcmc fit``: cluster silo files jointly (each file one silo, or one file split by a column)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from vcmc.config import FitConfig, SamplerConfig
from vcmc.config.options import AUTO_BURN_IN
from vcmc.exceptions import ConfigError

NAME = "fit"
HELP = "cluster silo files jointly without pooling them (VCMC or a comparator)"
DESCRIPTION = (
    "Each FILE is one silo (CSV, or Parquet with the [parquet] extra) unless --silo-column splits one file. "
    "All silos are encoded with one shared schema: given with --schema, or inferred from all files. "
    "Writes DIR/result.json (with the posterior predictive checks, WAIC and the posterior of the number of "
    "clusters), DIR/assignments.csv (silo,row,cluster,probability; row = 0-based row of the input file; "
    "clusters numbered from 1; the most probable cluster and its probability), DIR/memberships.csv "
    "(silo,row,p_1,...,p_K), DIR/profiles.csv, DIR/posterior.nc (ArviZ; a chain dimension with --chains) and "
    "DIR/schema.json (for vcmc predict).")


# Flags that set one FitConfig option each: (flag, dotted key, type, help). Their defaults are the
# library's (shown by --help); a flag overrides the config file and --set only when it is typed.
_OPTION_FLAGS = (
    ("--components", "prior.n-components", int, "C+, components of the over-fitted mixture"),
    ("--alpha", "prior.alpha", float, "Dirichlet prior of the weights"),
    ("--beta", "prior.beta", float, "Dirichlet prior of the profiles"),
    ("--thin", "sampler.thin", int, "keep one draw every N iterations after burn-in"),
    ("--chains", "sampler.n-chains", int, "chains per silo"),
    ("--min-local-fraction", "postprocess.min-cluster-fraction", float,
     "reallocate members of local clusters smaller than F x silo size (0: off; clusters a silo cannot "
     "resolve are merged by the matching whatever their size)"),
    ("--min-cluster-size", "privacy.min-cluster-size", int,
     "disclosure control: no local cluster under N people leaves a silo"),
    ("--level", "matching.level", float, "quantile of the calibrated matching's closeness test"),
    ("--replicates", "assessment.n-replicates", int,
     "replicated datasets of the posterior predictive checks (also the draws of WAIC)"),
)


def _option_default(key: str):
    from vcmc.config import FitConfig
    from vcmc.config.mapping import config_to_mapping

    return config_to_mapping(FitConfig())[key]


def add_arguments(p: argparse.ArgumentParser) -> None:
    from vcmc.config.options import MatchingMethod, Strategy, choices

    p.add_argument("files", nargs="+", metavar="FILE", help="silo data files")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--silo-column", metavar="COL", help="split one file into silos by this column")
    p.add_argument("--schema", metavar="JSON", help="shared schema file (default: schema.json beside the files, "
                   "else inferred from all files)")
    p.add_argument("--id-column", metavar="COL", help="a row identifier column to ignore (kept out of the model)")
    p.add_argument("--method", default="vcmc",
                   choices=["vcmc", "full-mcmc", "consensus", "fed-kmodes", "fedmerdel", "discgs"])
    p.add_argument("--config", metavar="TOML", help="options in a TOML (or JSON) file, with the tables and dotted "
                   "keys of the Flower run config: [sampler] n-iter = 2000, matching.method = \"ball\"")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="one option, e.g. --set sampler.n-iter=2000 --set aggregation.stop=plateau (repeatable; "
                        "after --config, before the flags below)")
    p.add_argument("--matching", default=argparse.SUPPRESS, choices=choices(MatchingMethod),
                   help="calibrated (default): Ball matching with a chi-square closeness test on the local "
                        "posteriors; ball: the paper's Ball radius")
    p.add_argument("--strategy", default=argparse.SUPPRESS, choices=choices(Strategy),
                   help="aggregation strategy (default contingency)")
    p.add_argument("--iterations", type=_iterations, default=argparse.SUPPRESS, metavar="N|auto",
                   help="Gibbs iterations per chain (default 50000); auto: run each chain until the split R-hat "
                        "of its log posterior and weights is <= 1.01 and their bulk and tail ESS >= 400 "
                        "(sampler.target-rhat, sampler.target-ess), at most --max-iterations")
    p.add_argument("--max-iterations", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="with --iterations auto: the most iterations a chain may run (default 50000)")
    p.add_argument("--burn-in", type=int, default=None, metavar="N",
                   help=f"default: half of the iterations; with --iterations auto, {AUTO_BURN_IN} (at most half "
                        "of --max-iterations)")
    for flag, key, typ, text in _OPTION_FLAGS:
        p.add_argument(flag, type=typ, default=argparse.SUPPRESS, dest=key, metavar=flag.strip("-")[0].upper(),
                       help=f"{text} (default {_option_default(key)})")
    p.add_argument("--clusters", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="deprecated alias: C+ (--components) for the Bayesian methods, K (--n-clusters) for "
                        "fed-kmodes")
    p.add_argument("--n-clusters", type=int, default=None, metavar="K",
                   help="number of clusters of fed-kmodes (which does not infer it)")
    p.add_argument("--no-fractionation", action="store_true", help="do not fractionate the prior over silos")
    p.add_argument("--no-assessment", action="store_true",
                   help="skip the model-assessment round (predictive checks, WAIC, posterior of K)")
    p.add_argument("--min-silos", type=int, default=None, metavar="N",
                   help="continue without failed silos while at least N remain (default: all required)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="root seed (stored in result.json)")
    p.add_argument("--jobs", type=int, default=1, metavar="J", help="worker processes (at most J, whatever the "
                   "number of silos)")
    p.add_argument("--save-summaries", action="store_true",
                   help="save silo summaries in DIR/summaries so server steps can be re-run")
    p.add_argument("--report", action="store_true",
                   help="then write DIR/report.html (as `vcmc report DIR` does)")
    p.add_argument("--no-resume", action="store_true",
                   help="do not keep the silos' finished apply steps in DIR/silo-state (by default an "
                        "interrupted or repeated run with the same data, options and seed reuses them)")


def _iterations(text: str):
    """``--iterations``: a positive number of iterations or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of iterations or 'auto', got {text!r}") \
            from None


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
    if getattr(args, "burn_in", None) is not None:
        out["sampler.burn-in"] = args.burn_in
    for _, key, _, _ in _OPTION_FLAGS:
        if key in vars(args):
            out[key] = vars(args)[key]
    if "clusters" in vars(args) and args.method != "fed-kmodes" and "prior.n-components" not in vars(args):
        out["prior.n-components"] = args.clusters
    if getattr(args, "no_fractionation", False):
        out["prior.fractionate"] = False
    if getattr(args, "no_assessment", False):
        out["assessment.enabled"] = False
    if "matching" in vars(args):
        out["matching.method"] = args.matching
    if "strategy" in vars(args):
        out["aggregation.strategy"] = args.strategy
    return out


def config_from_args(args) -> FitConfig:
    """``FitConfig`` from ``--config``, then ``--set``, then the flags, merged key by key and built by the one
    mapping parser (the Flower run config's). The burn-in is half of the iterations unless one of them
    sets it; with ``sampler.stop = "converged"`` (``--iterations auto``) it is ``AUTO_BURN_IN`` iterations,
    at most half of the maximum."""
    from vcmc.config import config_from_mapping
    from vcmc.config.mapping import merge_mappings, read_config_file
    from vcmc.flower.server import SERVER_KEYS  # a Flower app's pyproject.toml can be given to --config as is

    merged = merge_mappings(read_config_file(args.config) if getattr(args, "config", None) else {},
                            config_mapping_from_args(args))
    keys = {k.replace("-", "_"): k for k in merged}
    auto = str(merged.get(keys.get("sampler.stop", ""), "fixed")) == "converged"
    if "sampler.burn_in" not in keys and ("sampler.n_iter" in keys or auto):
        with contextlib.suppress(TypeError, ValueError):   # config_from_mapping names a bad n-iter
            n_iter = int(merged[keys["sampler.n_iter"]]) if "sampler.n_iter" in keys else SamplerConfig().n_iter
            merged["sampler.burn-in"] = min(AUTO_BURN_IN, n_iter // 2) if auto else n_iter // 2
    try:
        return config_from_mapping(merged, ignore=SERVER_KEYS)
    except ConfigError as err:
        where = f" (from {args.config!r}, --set or the flags)" if getattr(args, "config", None) else ""
        raise ConfigError(f"{err}{where}") from None


def load_silos(files, *, silo_column=None, schema_path=None, id_column=None):
    from vcmc.data import Schema, infer_schema, read_csv, read_parquet, split_by_column

    paths = [Path(f) for f in files]
    if schema_path is None:
        # a schema.json beside the inputs (vcmc simulate writes one) is the silos' agreed coding: use it,
        # so that a modality no silo happens to observe keeps its place in the coding
        beside = {p.parent / "schema.json" for p in paths}
        if len(beside) == 1 and next(iter(beside)).is_file():
            schema_path = next(iter(beside))
    schema = Schema.from_json(Path(schema_path)) if schema_path else None
    if silo_column is not None:
        if len(paths) != 1:
            raise ConfigError(f"--silo-column splits ONE file into silos; got {len(paths)} files.")
        return split_by_column(paths[0], silo_column, schema=schema, id_column=id_column)
    if schema is None:
        schema = infer_schema(paths, id_column=id_column)
    silos = []
    for path in paths:
        reader = read_parquet if path.suffix.lower() in (".parquet", ".pq") else read_csv
        silos.append(reader(path, schema=schema, id_column=id_column))
    return silos


def run(args) -> int:
    from vcmc.api import fit
    from vcmc.federation.faults import FaultPolicy
    from vcmc.report import write_outputs

    config = config_from_args(args)
    silos = load_silos(args.files, silo_column=args.silo_column, schema_path=args.schema,
                       id_column=args.id_column)
    out = Path(args.out)
    result = fit(silos, config=config, method=args.method, rng=args.seed, jobs=args.jobs,
                 policy=FaultPolicy(min_silos=args.min_silos),
                 save_dir=(out / "summaries") if args.save_summaries else None,
                 n_clusters=(args.n_clusters if args.n_clusters is not None
                             else vars(args).get("clusters") if args.method == "fed-kmodes" else None),
                 state_dir=None if args.no_resume else out / "silo-state")
    paths = write_outputs(result, out, schema=silos[0].schema)
    print(f"{result.method}: {result.n_clusters} clusters from {len(result.silos)} silos "  # noqa: T201
          f"({int(result.partition_counts.sum())} rows) in {result.timings.get('total', 0):.1f} s")
    for kind, path in paths.items():
        print(f"  {kind:12s} {path}")  # noqa: T201
    for w in result.diagnostics.get("warnings", []) if isinstance(result.diagnostics, dict) else []:
        print(f"warning: {w}", file=sys.stderr)  # noqa: T201
    if args.report:
        from vcmc.report import write_report

        print(f"  {'report':12s} {write_report(out).html}")  # noqa: T201
    return 0
