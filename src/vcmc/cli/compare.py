"""``vcmc compare``: maximum-likelihood latent class models for a range of K, with their fit statistics."""

from __future__ import annotations

import argparse

NAME = "compare"
HELP = "compare latent class models of K = 1..8 classes (log-likelihood, AIC, BIC, SABIC, CAIC, entropy, WAIC)"
DESCRIPTION = (
    "Each FILE is one silo. For every K, the maximum-likelihood latent class model is fitted by federated EM "
    "rounds (whole-silo sums only; the best of --starts random starts). Writes DIR/comparison.csv (k, "
    "log_likelihood, n_parameters, aic, bic, sabic, caic, entropy, relative_entropy, waic) and "
    "DIR/comparison.png. StepMix's definitions (docs/design.md §15). Columns that are not clustering items "
    "(covariates, outcomes, identifiers) stay in the files: --exclude, or their roles in the schema.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from vcmc.cli.fit import na_values_arg
    from vcmc.lca.cli import add_common_arguments, parse_k_range

    p.add_argument("files", nargs="+", metavar="FILE", help="silo data files")
    p.add_argument("--k", type=parse_k_range, default=parse_k_range("1-8"), metavar="RANGE",
                   help="numbers of classes, e.g. 1-8 or 2,3,5")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier comparison in --out")
    p.add_argument("--schema", metavar="JSON", help="shared schema file (default: inferred from all files)")
    p.add_argument("--silo-column", metavar="COL", help="split one file into silos by this column")
    p.add_argument("--id-column", metavar="COL", help="a row identifier column to ignore")
    p.add_argument("--na-values", action="append", type=na_values_arg, metavar="TEXT[,TEXT...]",
                   help="cell texts read as missing besides the empty cell")
    p.add_argument("--exclude", metavar="COL[,COL...]", default=None,
                   help="columns left out of the clustering (e.g. the covariates and outcomes of a later vcmc fit "
                        "--k K --covariates/--distal)")
    add_common_arguments(p)
    p.add_argument("--waic-draws", type=int, default=200, metavar="N",
                   help="draws of the WAIC at each K (0: no WAIC)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="root seed")
    p.add_argument("--jobs", type=int, default=1, metavar="J",
                   help="worker processes fitting the K in parallel (the result does not depend on it)")
    p.add_argument("--report", action="store_true", help="also write DIR/report.html")
    p.add_argument("--bayesian", metavar="FIT_DIR", default=None,
                   help="the folder of a Bayesian vcmc fit of the same files: its posterior of K joins the table "
                        "(column p_bayes) and the report's guide to K")


def run(args) -> int:
    from vcmc.lca.cli import run_compare

    return run_compare(args)
