"""``vcmc study``: the paper's simulation study, resumable, with tables beside the paper's."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

NAME = "study"
HELP = ("run the paper's simulation study (section 5) or the generalisation suite, resumable, and write their "
        "tables")
DESCRIPTION = (
    "Runs scenarios x replicates x methods in parallel processes, saving every finished replicate at once: "
    "an interrupted study resumes where it stopped. Every replicate has its own seed, so one cell can be "
    "re-run alone (--scenario nested/easy --replicate 7). Profiles paper and quick run the paper's six "
    "scenarios (3 shard designs x 2 separabilities) and write tables/table{2,3,4,5}.{csv,md} beside the "
    "paper's values; profiles generalisation and generalisation-quick run the designs of other shapes "
    "(2-30 silos, 10-80 variables, sparse binary conditions, 3-27 clusters) and write "
    "tables/generalisation.{csv,md}. Figures go to figures/*.png.")


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _int_list(text: str) -> list[int]:
    out = []
    for part in _csv_list(text):
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=("paper", "quick", "generalisation", "generalisation-quick"),
                   default="quick",
                   help="paper: the paper's protocol (50,000 iterations, 25,000 burn-in, thinning 5, "
                        "C+ = 15, 100 replicates); quick: short chains and 2 replicates (for CI); "
                        "generalisation: 12 designs of other shapes x 5 replicates, 10,000 iterations; "
                        "generalisation-quick: 3 small designs, short chains (for tests)")
    p.add_argument("--out", default=None, metavar="DIR", help="study folder; None means study-<profile>")
    p.add_argument("--seed", type=int, default=2026, metavar="S", help="root seed of the whole study")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="J",
                   help="worker processes (replicates run in parallel)")
    p.add_argument("--methods", type=_csv_list, default=None, metavar="M,M",
                   help="comma-separated registry names (see --list-methods); None means the profile's")
    p.add_argument("--scenarios", "--scenario", dest="scenarios", type=_csv_list, default=None,
                   metavar="D/S,D/S", help="e.g. nested/easy,non-nested/poor or wide-20x4/easy; None means "
                                           "the profile's")
    p.add_argument("--replicates", type=int, default=None, metavar="R", help="replicates per scenario")
    p.add_argument("--replicate", type=_int_list, default=None, metavar="I",
                   help="run only these replicate indices (0-based; '7', '0,3' or '0-9')")
    p.add_argument("--iterations", type=int, default=None, metavar="N", help="Gibbs iterations per chain")
    p.add_argument("--burn-in", type=int, default=None, metavar="N")
    p.add_argument("--thin", type=int, default=None, metavar="N")
    p.add_argument("--components", type=int, default=None, metavar="C", help="C+ of the over-fitted model")
    p.add_argument("--n-per-silo", type=int, default=None, metavar="N", help="rows per silo (paper: 1000)")
    p.add_argument("--force", action="store_true", help="recompute the selected cells even if saved")
    p.add_argument("--overwrite", action="store_true",
                   help="replace another study (other settings or seed) or another command's results in --out "
                        "(without it they are kept and the run is refused; the same study always resumes)")
    p.add_argument("--tables-only", action="store_true",
                   help="do not run anything: rebuild tables and figures from the saved cells")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--list-methods", action="store_true", help="list the registered methods and exit")


def _is_suite(out: Path) -> bool:
    """Whether the study folder holds a generalisation-suite run (its manifest's profile says so)."""
    import json

    profile = json.loads((out / "study.json").read_text(encoding="utf-8")).get("profile", {})
    return str(profile.get("name", "")).startswith("generalisation")


def run(args) -> int:
    from vcmc.exceptions import ConfigError
    from vcmc.research.study.figures import write_figures
    from vcmc.research.study.profiles import get_profile, normalise_scenario
    from vcmc.research.study.registry import default_registry
    from vcmc.research.study.runner import run_study
    from vcmc.research.study.tables import write_tables

    reg = default_registry()
    if args.list_methods:
        avail = set(reg.available())
        for name, m in reg.methods.items():
            state = "available" if name in avail else "not installed"
            group = f", shares '{m.group}'" if m.group else ""
            print(f"{name:22s} {m.label} ({state}{group})")  # noqa: T201
        return 0
    profile = get_profile(args.profile)
    scenarios = [normalise_scenario(s) for s in args.scenarios] if args.scenarios else None
    profile = profile.with_overrides(n_iter=args.iterations, burn_in=args.burn_in, thin=args.thin,
                                     n_components=args.components, n_per_silo=args.n_per_silo,
                                     n_replicates=args.replicates, methods=args.methods, scenarios=scenarios)
    if args.iterations is not None and args.burn_in is None and profile.burn_in >= profile.n_iter:
        raise ConfigError(f"--iterations {profile.n_iter} is not above the profile's burn-in "
                          f"{profile.burn_in}; pass --burn-in too.")
    from vcmc.outputs.folder import check_out_dir

    # held by this run (a second study into the folder is refused); the study's own manifest resumes it
    out = check_out_dir(args.out or f"study-{args.profile}", command="vcmc study")
    if not args.tables_only:
        from vcmc.outputs.folder import check_study_folder
        from vcmc.research.study.runner import STUDY_LAYOUT, other_study

        reps = args.replicate
        if reps is not None and max(reps) >= profile.n_replicates:
            profile = profile.with_overrides(n_replicates=max(reps) + 1)
        # the profile run_study checks its manifest against: another study or another command's results are
        # refused here, before any cell, unless --overwrite
        check_study_folder(out, other=other_study(out, profile, args.seed), layout=STUDY_LAYOUT,
                           overwrite=args.overwrite)
        command = "vcmc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv else None
        n_cells = len(profile.scenarios) * (len(reps) if reps is not None else profile.n_replicates)
        print(f"vcmc study ({profile.name}): {len(profile.scenarios)} scenarios, {n_cells} cells, methods "  # noqa: T201
              f"{', '.join(profile.methods)}; {profile.n_iter} iterations ({profile.burn_in} burn-in, thin "
              f"{profile.thin}), C+ = {profile.n_components}; {args.jobs} processes -> {out}")
        res = run_study(profile, out=out, root_seed=args.seed, replicates=reps, jobs=args.jobs,
                        force=args.force, command=command)
        print(f"{res.cells_computed} of {res.cells_total} cells computed in {res.seconds:.0f} s "  # noqa: T201
              f"({res.cells_total - res.cells_computed} already saved).")
        if res.errors:
            print(f"{len(res.errors)} method runs failed (recorded in the cell files, retried on restart): "  # noqa: T201
                  + ", ".join(f"{s} #{r} {m}" for s, r, m in res.errors[:10]))
    elif not (out / "study.json").exists():
        raise ConfigError(f"--tables-only needs an existing study folder; {str(out)!r} has no study.json.")
    if _is_suite(out):
        from vcmc.research.study.generalisation import write_suite_tables

        paths = write_suite_tables(out, figures=not args.no_figures)
        print(f"Tables: {paths['markdown']} (and generalisation*.csv beside it)")  # noqa: T201
        return 0
    paths = write_tables(out)
    print(f"Tables: {paths['markdown']} (and table2..5 .csv/.md beside it)")  # noqa: T201
    if not args.no_figures:
        figs = write_figures(out)
        print(f"Figures: {', '.join(str(p) for p in figs.values())}")  # noqa: T201
    return 0
