"""``vcmc report``: one self-contained HTML page of a fit's output folder."""

from __future__ import annotations

import argparse

NAME = "report"
HELP = ("write DIR/report.html (figures embedded, no network) from a `vcmc fit --out DIR` folder (also "
        "`vcmc fit --k` and `vcmc compare` folders)")
DESCRIPTION = (
    "Reads DIR/result.json and DIR/profiles.csv (required) and DIR/posterior.nc, DIR/assignments.csv, "
    "DIR/memberships.csv (when present), and writes DIR/report.html: cluster sizes and weights, the heatmap of "
    "scaled prevalence differences against the whole population, the characterisation of each cluster, the "
    "posterior of K, membership certainty, per-silo contributions and convergence, the ELBO trace, posterior "
    "predictive checks, warnings and the configuration. Also writes each figure to DIR/figures/*.png and every "
    "cluster x modality contrast to DIR/characterisation.csv. Sections whose data the result lacks say so. DIR "
    "must hold one finished run's files (as its .vcmc-run.json records them), and is held by this run alone "
    "while the report is written. A latent class analysis' folder (`vcmc fit --k K`: lca.json, "
    "item_probabilities.csv, covariates.csv, distal.csv; `vcmc compare`: comparison.csv) gets the page its "
    "--report writes: the comparison table and plot, fit statistics, item-response plot, covariate and distal "
    "tables and forest plot.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", metavar="DIR", help="output folder of `vcmc fit --out DIR`")
    p.add_argument("--out", metavar="FILE", default=None, help="the HTML file (default DIR/report.html)")
    p.add_argument("--labels", metavar="FILE", default=None,
                   help="cluster names: a CSV with header cluster,label or a JSON object {\"1\": \"name\", ...}; "
                        "every cluster holding rows needs one")


def run(args) -> int:
    from pathlib import Path

    from vcmc.exceptions import ConfigError
    from vcmc.outputs.folder import check_out_dir
    from vcmc.outputs.runkey import check_result_set
    from vcmc.report.build import write_report

    if not Path(args.folder).is_dir():
        raise ConfigError(f"{args.folder} is not a folder; vcmc report needs the folder written by vcmc fit --out")
    from vcmc.lca.outputs import is_lca_folder

    if is_lca_folder(args.folder):    # a vcmc compare or vcmc fit --k folder: the latent class analysis' page
        return _lca_report(args)
    check_out_dir(args.folder, command="vcmc report", flag="DIR")
    check_result_set(args.folder, reader="vcmc report")
    paths = write_report(args.folder, out=args.out, labels=args.labels)
    print(f"report: {paths.html}")  # noqa: T201
    print(f"  figures: {len(paths.figures)} PNG files in {paths.html.parent if args.out is None else args.folder}"  # noqa: T201
          f"/figures; contrasts: {paths.characterisation}")
    return 0


def _lca_report(args) -> int:
    from vcmc.exceptions import ConfigError
    from vcmc.lca.outputs import lca_report_from_folder

    if args.labels:
        raise ConfigError("--labels names the clusters of a Bayesian fit's report; a latent class analysis "
                          "numbers its classes by decreasing weight (leave --labels out)")
    html = lca_report_from_folder(args.folder, out=args.out)
    print(f"report: {html}")  # noqa: T201
    return 0
