"""``vcmc simulate``: write one simulated dataset of the paper's designs, one CSV per silo, plus the truth."""

from __future__ import annotations

import argparse
import logging
import sys

from vcmc.exceptions import DataError
from vcmc.simulate import DESIGNS, SEPARABILITIES, simulate_design

NAME = "simulate"
HELP = "simulate one dataset of the paper's designs (one CSV per silo, plus the truth)"
DESCRIPTION = (
    "Simulate one dataset of the paper's designs (Table 1): 4 silos, four binary and six ternary variables, "
    "profiles from a symmetric Dirichlet(0.3) (easy) or Dirichlet(1) (poor). Writes DIR/silo_1.csv .. "
    "DIR/silo_4.csv (header of variable names, values as labels, missing as an empty field), DIR/truth.csv "
    "(silo,row,cluster; row is 0-based in the silo's file; clusters from 1), DIR/truth.json (true weights "
    "per silo and overall, profiles, design, separability, seed) and DIR/schema.json (the shared schema).")

log = logging.getLogger(__name__)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2; got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2; got {value}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1); got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1); got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``vcmc simulate``."""
    req = {"required": True, "default": argparse.SUPPRESS}
    parser.add_argument("--design", choices=DESIGNS, help="shard design of Table 1", **req)
    parser.add_argument("--separability", choices=tuple(SEPARABILITIES),
                        help="easy: profiles ~ Dirichlet(0.3); poor: Dirichlet(1)", **req)
    parser.add_argument("--seed", type=int, help="root random seed (same seed, same files)", **req)
    parser.add_argument("--out", metavar="DIR", help="output folder (created if needed)", **req)
    parser.add_argument("--n-per-silo", type=_positive_int, default=1000, metavar="N",
                        help="individuals per silo")
    parser.add_argument("--missing-rate", type=_rate, default=0.0, metavar="RATE",
                        help="probability that a value is missing (completely at random)")
    parser.add_argument("--exact", action="store_true",
                        help="exact cluster proportions in each silo instead of multinomial draws")


def run(args: argparse.Namespace) -> int:
    """Simulate and write the files; print where they went."""
    data = simulate_design(args.design, args.separability, rng=args.seed, n_per_silo=args.n_per_silo,
                           exact=args.exact, missing_rate=args.missing_rate)
    try:
        files = data.write(args.out)
    except OSError as err:
        raise DataError(f"cannot write to output folder {args.out!r}: {err.strerror or err}") from err
    log.info("wrote %d files", len(files))
    sys.stdout.write(f"wrote {data.n_silos} silo files ({', '.join(s.name + '.csv' for s in data.silos)}), "
                     f"truth.csv, truth.json and schema.json to {args.out}\n")
    return 0
