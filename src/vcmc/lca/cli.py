"""What ``vcmc compare`` and ``vcmc fit --k K`` do with their arguments (the commands' modules stay thin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vcmc.exceptions import ConfigError


def parse_k_range(text: str) -> list[int]:
    """``--k 1-8`` -> [1..8]; ``--k 2,3,5`` -> [2, 3, 5]; ``--k 4`` -> [4]."""
    out: list[int] = []
    try:
        for part in str(text).split(","):
            lo, dash, hi = part.strip().partition("-")
            a, b = (int(lo), int(hi)) if dash else (int(lo), int(lo))
            if a < 1 or b < a:
                raise ValueError
            out.extend(range(a, b + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers of classes >= 1 such as 1-8 or 2,3,5; got {text!r}") \
            from None
    return sorted(set(out))


def positive_k(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k < 1:
        raise argparse.ArgumentTypeError(f"--k expects a number of classes >= 1; got {text!r}")
    return k


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """The flags ``vcmc compare`` shares with ``vcmc fit --k``."""
    p.add_argument("--starts", type=int, default=10, metavar="N",
                   help="random starts of EM per K (the best log-likelihood is kept; StepMix's n_init)")
    p.add_argument("--max-em-iterations", type=int, default=1000, metavar="N",
                   help="EM rounds per start at most (StepMix's max_iter)")


def read_frames(files, *, id_column=None, na_values=()) -> dict:
    """One raw frame per file (named by its stem), read as ``vcmc fit`` reads them (every cell as text)."""
    from vcmc.data.readers import read_any

    frames = {}
    for f in files:
        name = Path(f).stem
        if name in frames:
            raise ConfigError(f"two files have the stem {name!r}; silo names must be unique")
        frames[name] = read_any(Path(f))
    return frames


def load(args, *, covariates=None, distal=None):
    from vcmc.config import PrivacyConfig
    from vcmc.data import Schema
    from vcmc.lca.analysis import lca_silos

    na = ["", *[t for group in (getattr(args, "na_values", None) or []) for t in group]]
    frames = read_frames(args.files, id_column=args.id_column, na_values=na)
    schema_path = getattr(args, "schema", None)
    beside = {Path(f).parent / "schema.json" for f in args.files}
    if schema_path is None and len(beside) == 1 and next(iter(beside)).is_file():
        schema_path = next(iter(beside))      # the silos' agreed coding, as vcmc fit uses it
    schema = Schema.from_json(Path(schema_path)) if schema_path else None
    privacy = PrivacyConfig()
    exclude = [c.strip() for c in (getattr(args, "exclude", None) or "").split(",") if c.strip()]
    return lca_silos(frames, covariates=covariates, distal=distal, schema=schema, id_column=args.id_column,
                     na_values=tuple(na), privacy=privacy, min_modality_rows=privacy.min_cluster_size, exclude=exclude)


def _begin_run(args, *, command: str, parts: dict, what: str, files=()):
    """The writer discipline of ``vcmc fit`` (``vcmc.outputs``) for the latent class commands: ``--out`` checked,
    created and held by this run (lock, SIGTERM/SIGHUP like Ctrl-C, a killed run's temporary files removed),
    another run's results refused unless ``--overwrite``, the same command again (without ``--seed``: with the
    seed it drew) resuming in place, and the manifest written before any EM round. Returns ``(out, key, seed,
    mode)``; :func:`_finish_run` seals the files once written."""
    import shlex

    from vcmc.outputs.folder import check_out_dir
    from vcmc.outputs.runkey import check_previous_run, choose_seed, content_key, write_run_manifest

    out = check_out_dir(args.out, command=command)
    inputs = [Path(f) for f in args.files]
    schema = getattr(args, "schema", None)
    inputs += [Path(schema)] if schema else [p for p in {Path(f).parent / "schema.json" for f in args.files}
                                             if p.is_file()]

    def key_of(seed):
        return content_key({"command": command, **parts, "seed": str(seed)}, files=inputs)

    seed = choose_seed(args.seed, out, key_of)
    key = key_of(seed)
    mode = check_previous_run(out, key, overwrite=args.overwrite, what=what)
    argv = list(getattr(args, "_argv", None) or sys.argv[1:])
    if args.seed is None:
        argv += ["--seed", str(seed)]
    write_run_manifest(out, key, seed, argv, command=shlex.join(["vcmc", *argv]))
    return out, key, seed, mode


def _finish_run(out: Path, key: str, mode: str, paths: dict) -> None:
    """After every file is written (atomically): an ``--overwrite`` run removes the earlier run's files it did
    not write, and the manifest records the digest of each file written (the sealed result set)."""
    from vcmc.outputs.folder import RESULT_NAMES, remove_stale
    from vcmc.outputs.runkey import seal_results

    if mode == "overwrite":
        remove_stale(out, paths.values())
    seal_results(out, key, paths.values(), names=RESULT_NAMES)


def _settings(args, *names) -> dict:
    """The flags that determine a run's results, for its key."""
    return {n: getattr(args, n, None) for n in names}


def run_compare(args) -> int:
    from vcmc.lca.analysis import compare
    from vcmc.lca.outputs import write_comparison, write_lca_report

    out, key, seed, mode = _begin_run(
        args, command="vcmc compare", what="run",
        parts=_settings(args, "k", "starts", "max_em_iterations", "waic_draws", "id_column", "na_values", "exclude",
                        "report"))
    silos, _, _ = load(args)
    table, _ = compare(silos, args.k, n_starts=args.starts, max_iter=args.max_em_iterations, rng=seed,
                       waic_draws=args.waic_draws)
    paths = write_comparison(table, out)
    if args.report:
        paths["report"] = write_lca_report(out, comparison=table)
    _finish_run(out, key, mode, paths)
    best = int(table["k"].iloc[int(table["bic"].idxmin())])
    print(f"latent class models K = {', '.join(str(k) for k in args.k)} on {len(silos)} silos "  # noqa: T201
          f"({int(sum(s.data.n_rows for s in silos))} rows): BIC chooses K = {best}")
    for kind, path in paths.items():
        print(f"  {kind:12s} {path}")  # noqa: T201
    return 0


def run_fit(args) -> int:
    """``vcmc fit --k K [--covariates ...] [--distal ...]``: the ML latent class analysis of one K."""
    from vcmc.config.schema import options
    from vcmc.lca.analysis import analyse, coding_text
    from vcmc.lca.outputs import write_analysis, write_lca_report

    if args.method != "vcmc":
        raise ConfigError(f"--k fits the maximum-likelihood latent class model; it does not combine with "
                          f"--method {args.method}")
    if args.silo_column is not None:
        raise ConfigError("--k reads one file per silo; --silo-column is not supported with it yet")
    # flags of the Bayesian fit that the ML analysis would silently ignore are refused instead
    unused = [flag for flag, on in (("--strip-whitespace", args.strip_whitespace),
                                    ("--case-insensitive", args.case_insensitive),
                                    ("--config", args.config), ("--set", args.settings),
                                    ("--save-summaries", args.save_summaries), ("--min-silos", args.min_silos),
                                    ("--n-clusters", args.n_clusters)) if on]
    unused += [f"--{k.replace('_', '-')}" for k in ("iterations", "max_iterations", "clusters") if k in vars(args)]
    unused += [o.flag for o in options() if o.flag and o.key in vars(args)]   # the FitConfig options' flags
    if unused:
        raise ConfigError(f"--k fits the maximum-likelihood latent class model; {', '.join(unused)} belong to the "
                          "Bayesian fit and would be ignored: leave them out")
    out, key, seed, mode = _begin_run(
        args, command="vcmc fit --k", what="run",
        parts=_settings(args, "k", "starts", "max_em_iterations", "id_column", "na_values", "exclude", "covariates",
                        "distal", "report"))
    silos, cov_spec, dis_spec = load(args, covariates=args.covariates, distal=args.distal)
    analysis = analyse(silos, args.k, covariates=cov_spec, distal=dis_spec, n_starts=args.starts,
                       max_iter=args.max_em_iterations, rng=seed)
    settings = {"k": args.k, "starts": args.starts, "max_em_iterations": args.max_em_iterations, "seed": seed,
                "files": [str(f) for f in args.files], "covariates": args.covariates, "distal": args.distal,
                # the inferred coding, in the form a Flower run config states it (lca-covariates, lca-distal)
                "covariate_coding": coding_text(cov_spec) or None, "distal_coding": coding_text(dis_spec) or None,
                "three_step": "ML correction (Vermunt 2010), modal assignment"}
    paths = write_analysis(analysis, out, settings=settings)
    if args.report:
        paths["report"] = write_lca_report(out, analysis=analysis)
    _finish_run(out, key, mode, paths)
    f = analysis.fit
    print(f"latent class model K = {f.k} on {len(silos)} silos ({f.n_rows} rows): log-likelihood "  # noqa: T201
          f"{f.loglik:.3f}, BIC {f.statistics['bic']:.2f}")
    for kind, path in paths.items():
        print(f"  {kind:18s} {path}")  # noqa: T201
    if not f.converged:
        print("warning: EM reached --max-em-iterations before converging", file=sys.stderr)  # noqa: T201
    return 0


def add_point_statistics(result_json, result, silo_data) -> dict:
    """Add the over-fitted fit's statistics at its K to ``result.json`` (key ``fit_statistics``).

    The log-likelihood, AIC, BIC, SABIC, CAIC and entropy of StepMix's definitions at the posterior-mean
    weights and profiles of the occupied clusters, from one federated E-step round (docs/design.md §15.2).
    """
    import json

    import numpy as np

    from vcmc.atomic import atomic_write_text
    from vcmc.federation.transport import InProcessTransport
    from vcmc.lca.em import point_fit
    from vcmc.silo.local import LocalSilo

    keep = np.asarray(result.cluster_sizes) > 0
    silos = [LocalSilo(d) for d in silo_data]
    tr = InProcessTransport(silos)
    fit = point_fit(tr.call, list(tr.silos), silos[0].n_modalities, np.asarray(result.weights)[keep],
                    np.asarray(result.profiles)[keep])
    stats = {"k": fit.k, **{k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                            for k, v in fit.statistics.items()},
             "definition": "at the posterior-mean weights and profiles of the occupied clusters; StepMix's "
                           "definitions (docs/design.md §15.2)"}
    path = Path(result_json)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["fit_statistics"] = stats
    atomic_write_text(path, json.dumps(doc, indent=2))
    return stats
