"""``vcmc simulate``: write one simulated dataset, one CSV per silo, plus the truth.

Two families of designs: the paper's simulation designs of section 5 (Table 1: ``homogeneous``, ``nested``,
``non-nested``, which need ``--separability``) and the synthetic multimorbidity cohort of section 6
(``ehr``, :mod:`vcmc.research.ehr`, which has its own profiles and takes ``--n``, ``--silos``, ``--allocation``).
An option of one family given with a design of the other is refused rather than silently ignored.
"""

from __future__ import annotations

import argparse
import logging
import sys

from vcmc.exceptions import DataError
from vcmc.research.simulate import DESIGNS, SEPARABILITIES, simulate_design

NAME = "simulate"
HELP = "simulate one dataset: the paper's designs or the synthetic EHR cohort (one CSV per silo, plus truth)"
DESCRIPTION = (
    "Simulate one dataset. Paper designs (Table 1: homogeneous, nested, non-nested; --separability "
    "required): 4 silos, four binary and six ternary variables, profiles from a symmetric Dirichlet(0.3) "
    "(easy) or Dirichlet(1) (poor). Design ehr: the synthetic multimorbidity cohort of section 6 (80 "
    "conditions coded no/yes, 27 clusters of Table 7's sizes characterised as in Table 8; --n people, "
    "--allocation uniform over --silos silos, or region over Table 6's 13 regions). Writes DIR/silo_<name>.csv "
    "per silo (header of variable names, values as labels, missing as an empty field), DIR/truth.csv "
    "(silo,row,cluster; row is 0-based in the silo's file; clusters from 1), DIR/truth.json (true weights "
    "per silo and overall, profiles, design, seed; for ehr also the designed characterisation and the "
    "condition names) and DIR/schema.json (the shared schema).")

#: The synthetic cohort's design name.
EHR = "ehr"
_PAPER_ONLY = ("separability", "n_per_silo", "missing_rate", "exact")
_EHR_ONLY = ("n", "silos", "allocation")

log = logging.getLogger(__name__)


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}; got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}; got {value}")
        return value
    return parse


_positive_int = _int_at_least(2)


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
    # Family-specific options are absent from the namespace unless given (SUPPRESS), so that an option of
    # the other family can be refused; their effective defaults are stated in the help and applied in run().
    opt = {"default": argparse.SUPPRESS}
    parser.add_argument("--design", choices=(*DESIGNS, EHR),
                        help="shard design of Table 1, or ehr (the synthetic cohort of section 6)", **req)
    parser.add_argument("--separability", choices=tuple(SEPARABILITIES), **opt,
                        help="paper designs only (required there): easy: profiles ~ Dirichlet(0.3); "
                             "poor: Dirichlet(1)")
    parser.add_argument("--seed", type=int, help="root random seed (same seed, same files)", **req)
    parser.add_argument("--out", metavar="DIR", help="output folder (created if needed)", **req)
    parser.add_argument("--n-per-silo", type=_positive_int, **opt, metavar="N",
                        help="paper designs: individuals per silo (1000 when omitted)")
    parser.add_argument("--missing-rate", type=_rate, **opt, metavar="RATE",
                        help="paper designs: probability that a value is missing, completely at random "
                             "(0 when omitted)")
    parser.add_argument("--exact", action="store_true", **opt,
                        help="paper designs: exact cluster proportions in each silo instead of multinomial "
                             "draws")
    parser.add_argument("--n", type=_positive_int, **opt, metavar="N",
                        help="ehr: cohort size (289821, the paper's, when omitted)")
    parser.add_argument("--silos", type=_int_at_least(1), **opt, metavar="S",
                        help="ehr: number of silos of the uniform allocation (30 when omitted); the region "
                             "allocation has Table 6's 13 regions, so S must then be omitted or 13")
    parser.add_argument("--allocation", choices=("uniform", "region"), **opt,
                        help="ehr: each person to a silo uniformly at random, or to one of Table 6's 13 "
                             "regions with its shares (uniform when omitted)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace another simulation's files in --out (the same command again rewrites the "
                             "same files without it)")
    parser.set_defaults(_simulate_parser=parser)


def _refuse(args: argparse.Namespace, names: tuple[str, ...], why: str) -> None:
    given = [n for n in names if hasattr(args, n)]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        args._simulate_parser.error(f"{flags} {'does' if len(given) == 1 else 'do'} not apply to --design "
                                    f"{args.design}: {why}")


def _simulate(args: argparse.Namespace):
    def opt(name, default=None):
        return getattr(args, name, default)

    if args.design == EHR:
        from vcmc.research.ehr import PAPER_N, simulate_ehr

        _refuse(args, _PAPER_ONLY, "the ehr cohort has its own profiles (Table 8) and no missing values; use "
                                   "--n, --silos and --allocation")
        allocation = opt("allocation", "uniform")
        if allocation == "region" and opt("silos") not in (None, 13):
            args._simulate_parser.error(f"--allocation region has Table 6's 13 regions as silos; --silos must be "
                                        f"omitted or 13 (got {opt('silos')})")
        return simulate_ehr(n=opt("n", PAPER_N), n_silos=opt("silos"), allocation=allocation, rng=args.seed)
    _refuse(args, _EHR_ONLY, "these options belong to --design ehr; the paper's designs take --n-per-silo")
    if opt("separability") is None:
        args._simulate_parser.error(f"--design {args.design} requires --separability (easy or poor)")
    return simulate_design(args.design, args.separability, rng=args.seed, n_per_silo=opt("n_per_silo", 1000),
                           exact=opt("exact", False), missing_rate=opt("missing_rate", 0.0))


def run(args: argparse.Namespace) -> int:
    """Simulate and write the files; print where they went."""
    from vcmc.outputs.folder import check_out_dir, check_simulation_folder, remove_other_silo_files

    data = _simulate(args)                                      # the options' refusals first
    out = check_out_dir(args.out, command="vcmc simulate")      # held by this run; the same checks as fit
    check_simulation_folder(out, design=args.design, seed=args.seed, overwrite=args.overwrite)
    try:
        files = data.write(args.out)
    except OSError as err:
        raise DataError(f"cannot write to output folder {args.out!r}: {err.strerror or err}") from err
    remove_other_silo_files(out, files)
    log.info("wrote %d files", len(files))
    shown = [s.name + ".csv" for s in data.silos]
    listing = ", ".join(shown) if len(shown) <= 6 else f"{shown[0]} .. {shown[-1]}"
    sys.stdout.write(f"wrote {data.n_silos} silo files ({listing}), truth.csv, truth.json and schema.json to "
                     f"{args.out}\n")
    return 0
