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
    "Writes DIR/result.json, DIR/assignments.csv (silo,row,cluster; row = 0-based row of the input file; "
    "clusters numbered from 1), DIR/profiles.csv and DIR/posterior.nc (ArviZ).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="silo data files")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--silo-column", metavar="COL", help="split one file into silos by this column")
    p.add_argument("--schema", metavar="JSON", help="shared schema file (default: schema.json beside the files, "
                   "else inferred from all files)")
    p.add_argument("--id-column", metavar="COL", help="a row identifier column to ignore (kept out of the model)")
    p.add_argument("--method", default="vcmc",
                   choices=["vcmc", "full-mcmc", "consensus", "fed-kmodes", "fedmerdel", "discgs"])
    p.add_argument("--matching", default="calibrated", choices=["calibrated", "ball", "hungarian", "min-divergence"],
                   help="calibrated (default): Ball matching with a chi-square closeness test on the local "
                        "posteriors; ball: the paper's Ball radius")
    p.add_argument("--strategy", default="contingency", choices=["contingency", "federated-gradient", "design"])
    p.add_argument("--iterations", type=int, default=50_000, metavar="N", help="Gibbs iterations per chain")
    p.add_argument("--burn-in", type=int, default=None, metavar="N", help="default: half of --iterations")
    p.add_argument("--thin", type=int, default=5, metavar="N")
    p.add_argument("--chains", type=int, default=1, metavar="N", help="chains per silo")
    p.add_argument("--clusters", type=int, default=15, metavar="N",
                   help="C+, components of the over-fitted mixture (fed-kmodes: the number of clusters K)")
    p.add_argument("--alpha", type=float, default=0.01, metavar="A", help="Dirichlet prior of the weights")
    p.add_argument("--beta", type=float, default=0.5, metavar="B", help="Dirichlet prior of the profiles")
    p.add_argument("--no-fractionation", action="store_true", help="do not fractionate the prior over silos")
    p.add_argument("--min-local-fraction", type=float, default=0.0, metavar="F",
                   help="reallocate members of local clusters smaller than F x silo size (default 0: off; "
                        "local clusters the silo cannot resolve are merged whatever their size)")
    p.add_argument("--min-cluster-size", type=int, default=10, metavar="N",
                   help="disclosure control: no local cluster under N people leaves a silo")
    p.add_argument("--min-silos", type=int, default=None, metavar="N",
                   help="continue without failed silos while at least N remain (default: all required)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="root seed (stored in result.json)")
    p.add_argument("--jobs", type=int, default=1, metavar="J", help="worker processes")
    p.add_argument("--save-summaries", action="store_true",
                   help="save silo summaries in DIR/summaries so server steps can be re-run")
    p.add_argument("--no-resume", action="store_true",
                   help="do not keep the silos' finished apply steps in DIR/silo-state (by default an "
                        "interrupted or repeated run with the same data, options and seed reuses them)")


def config_mapping_from_args(args) -> dict[str, object]:
    """The CLI options as the flat dotted mapping a Flower run config uses (one source of truth)."""
    burn_in = args.iterations // 2 if args.burn_in is None else args.burn_in
    return {
        "prior.n-components": args.clusters if args.method != "fed-kmodes" else 15,
        "prior.alpha": args.alpha,
        "prior.beta": args.beta,
        "prior.fractionate": not args.no_fractionation,
        "sampler.n-iter": args.iterations,
        "sampler.burn-in": burn_in,
        "sampler.thin": args.thin,
        "sampler.n-chains": args.chains,
        "postprocess.min-cluster-fraction": args.min_local_fraction,
        "privacy.min-cluster-size": args.min_cluster_size,
        "matching.method": args.matching,
        "aggregation.strategy": args.strategy,
    }


def config_from_args(args) -> FitConfig:
    """``FitConfig`` from the CLI arguments, through the same builder as the Flower run config."""
    from vcmc.config import config_from_mapping

    return config_from_mapping(config_mapping_from_args(args))


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
                 n_clusters=args.clusters if args.method == "fed-kmodes" else None,
                 state_dir=None if args.no_resume else out / "silo-state")
    paths = write_outputs(result, out, schema=silos[0].schema)
    print(f"{result.method}: {result.n_clusters} clusters from {len(result.silos)} silos "  # noqa: T201
          f"({int(result.partition_counts.sum())} rows) in {result.timings.get('total', 0):.1f} s")
    for kind, path in paths.items():
        print(f"  {kind:12s} {path}")  # noqa: T201
    for w in result.diagnostics.get("warnings", []) if isinstance(result.diagnostics, dict) else []:
        print(f"warning: {w}", file=sys.stderr)  # noqa: T201
    return 0
