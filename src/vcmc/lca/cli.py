"""What ``vcmc compare`` and ``vcmc fit --k K`` do with their arguments (the commands' modules stay thin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

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
    p.add_argument("--min-best", type=int, default=2, metavar="N",
                   help="after --starts starts, add starts until N of them reached the best log-likelihood (a "
                        "maximum one start reaches may be a local one; 1: exactly --starts starts, as StepMix's "
                        "n_init)")
    p.add_argument("--max-starts", type=int, default=None, metavar="N",
                   help="the most starts per K with --min-best (default 10 times --starts)")


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


def split_frames(file, column: str) -> tuple[dict, dict, dict]:
    """``--silo-column``: one raw frame per value of ``column`` in the one ``file`` (sorted as ``vcmc fit``
    sorts them), each silo's source text for messages and the positions of its rows in the file."""
    from vcmc.data.readers import read_any
    from vcmc.data.schema import column_labels, sort_modalities
    from vcmc.exceptions import DataError

    df = read_any(Path(file))
    if column not in [str(c) for c in df.columns]:
        raise DataError(f"{file}: silo column {column!r} is not a column; found {list(map(str, df.columns))}")
    silo_of = column_labels(df[column])
    if silo_of.isna().any():
        raise DataError(f"{file}, column {column!r}: {int(silo_of.isna().sum())} row(s) have no silo; expected a "
                        "silo name in every row")
    frames, sources, positions = {}, {}, {}
    for v in sort_modalities(silo_of.unique()):
        mask = (silo_of == v).to_numpy()
        frames[str(v)] = df.loc[mask].drop(columns=column).reset_index(drop=True)
        sources[str(v)] = f"{file} ({column}={v})"
        positions[str(v)] = np.flatnonzero(mask)
    return frames, sources, positions


def schema_of(args):
    """The schema ``--schema`` names, or the one lying beside every file (the silos' agreed coding), or None."""
    from vcmc.data import Schema

    schema_path = getattr(args, "schema", None)
    beside = {Path(f).parent / "schema.json" for f in args.files}
    if schema_path is None and len(beside) == 1 and next(iter(beside)).is_file():
        schema_path = next(iter(beside))      # the silos' agreed coding, as vcmc fit uses it
    return Schema.from_json(Path(schema_path)) if schema_path else None


def columns_arg(text) -> list[str]:
    """``--exclude a,b`` -> ["a", "b"]."""
    return [c.strip() for c in (text or "").split(",") if c.strip()]


def declared(schema, role: str, given):
    """``--covariates`` / ``--distal`` as typed, else the columns the schema gives that role (None: none)."""
    if given is not None or schema is None:
        return given
    cols = [c.spec() for c in schema.columns if c.role == role]
    return ",".join(cols) if cols else None


def load(args, *, covariates=None, distal=None, positions: dict | None = None, schema=None):
    """The silos of ``vcmc compare`` and ``vcmc fit --k``: ``(silos, covariate spec, distal spec)``. ``positions``,
    when given, is filled with each silo's row numbers in its file (``--silo-column``: in the one file)."""
    from vcmc.config import PrivacyConfig
    from vcmc.lca.analysis import lca_silos

    na = ["", *[t for group in (getattr(args, "na_values", None) or []) for t in group]]
    silo_column = getattr(args, "silo_column", None)
    if silo_column is not None:
        if len(args.files) != 1:
            raise ConfigError(f"--silo-column splits ONE file into silos; got {len(args.files)} files")
        frames, sources, rows = split_frames(args.files[0], silo_column)
    else:
        frames = read_frames(args.files, id_column=args.id_column, na_values=na)
        sources = {Path(f).stem: str(f) for f in args.files}
        rows = {n: np.arange(len(f)) for n, f in frames.items()}
    if positions is not None:
        positions.update(rows)
    schema = schema_of(args) if schema is None else schema
    privacy = PrivacyConfig()
    exclude = columns_arg(getattr(args, "exclude", None))
    return lca_silos(frames, covariates=covariates, distal=distal, schema=schema, id_column=args.id_column,
                     na_values=tuple(na), privacy=privacy, min_modality_rows=privacy.min_cluster_size, exclude=exclude,
                     sources=sources)


def _begin_run(args, *, command: str, parts: dict, what: str, prepare=None):
    """The writer discipline of ``vcmc fit`` (``vcmc.outputs``) for the latent class commands: ``--out`` checked,
    created and held by this run (lock, SIGTERM/SIGHUP like Ctrl-C, a killed run's temporary files removed),
    another run's results refused unless ``--overwrite``, the same command again (without ``--seed``: with the
    seed it drew) resuming in place, and the manifest written before any EM round. ``prepare()`` (reading and
    checking the data) runs before the manifest is written: a run refused there leaves no manifest, and a
    folder it created stays only if something else is in it. Returns ``(out, key, seed, mode, prepared)``;
    :func:`_finish_run` seals the files once written."""
    import contextlib
    import shlex

    from vcmc.outputs.folder import check_out_dir
    from vcmc.outputs.runkey import check_previous_run, choose_seed, content_key, write_run_manifest

    existed = Path(args.out).exists() if args.out else True
    out = check_out_dir(args.out, command=command)
    try:
        prepared = prepare() if prepare is not None else None
    except BaseException:
        if not existed:        # the folder this refused run created: nothing but its lock is in it
            from vcmc.outputs import lock

            lock.release(out)
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
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
    return out, key, seed, mode, prepared


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

    if getattr(args, "jobs", 1) < 1:
        raise ConfigError(f"--jobs must be a whole number >= 1 (worker processes); got {args.jobs}")
    posterior = None
    if getattr(args, "bayesian", None):
        from vcmc.lca.guide import bayesian_k

        posterior = bayesian_k(args.bayesian)
    out, key, seed, mode, (silos, _, _) = _begin_run(
        args, command="vcmc compare", what="run",
        parts=_settings(args, "k", "starts", "max_em_iterations", "waic_draws", "id_column", "na_values", "exclude",
                        "report", "silo_column", "min_best", "max_starts", "bayesian"),
        prepare=lambda: load(args))
    table, fits = compare(silos, args.k, n_starts=args.starts, max_iter=args.max_em_iterations, rng=seed,
                          waic_draws=args.waic_draws, jobs=getattr(args, "jobs", 1),
                          min_best=getattr(args, "min_best", None), max_starts=getattr(args, "max_starts", None))
    if posterior is not None:
        from vcmc.lca.guide import with_bayesian

        table = with_bayesian(table, posterior)
    paths = write_comparison(table, out)
    if args.report:
        paths["report"] = write_lca_report(out, comparison=table)
    _finish_run(out, key, mode, paths)
    best = int(table["k"].iloc[int(table["bic"].idxmin())])
    print(f"latent class models K = {', '.join(str(k) for k in args.k)} on {len(silos)} silos "  # noqa: T201
          f"({int(sum(s.data.n_rows for s in silos))} rows): BIC chooses K = {best}")
    for kind, path in paths.items():
        print(f"  {kind:12s} {path}")  # noqa: T201
    for k, fit in fits.items():
        if fit.n_best < 2 and k > 1:
            print(f"warning: K = {k}: only {fit.n_best} of {len(fit.start_logliks)} EM starts reached the best "  # noqa: T201
                  "log-likelihood; it may be a local maximum: add --starts", file=sys.stderr)
    return 0


def _lca_schema(silos, args, cov_spec, dis_spec):
    """The schema the fit's folder keeps (``vcmc predict`` reads it): the clustering's coding and the roles of
    the other columns (the covariates and outcomes used, the excluded and identifier columns)."""
    from vcmc.data.schema import Column

    schema = silos[0].data.schema
    if schema.columns:
        return schema
    cols = [Column(c.name, "covariate", c.kind) for c in (cov_spec.columns if cov_spec else ())]
    cols += [Column(c.name, "outcome", c.kind) for c in (dis_spec.columns if dis_spec else ())]
    cols += [Column(c, "ignored") for c in columns_arg(getattr(args, "exclude", None))]
    if args.id_column is not None:
        cols.append(Column(str(args.id_column), "id"))
    return schema.with_columns(cols)


def run_fit(args) -> int:
    """``vcmc fit --k K [--covariates ...] [--distal ...]``: the ML latent class analysis of one K."""
    from vcmc.config.schema import options
    from vcmc.lca.analysis import analyse, coding_text
    from vcmc.lca.outputs import write_analysis, write_lca_report

    if args.method != "vcmc":
        raise ConfigError(f"--k fits the maximum-likelihood latent class model; it does not combine with "
                          f"--method {args.method}")
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
    schema = schema_of(args)
    covariates = declared(schema, "covariate", args.covariates)
    distal = declared(schema, "outcome", args.distal)
    if (covariates or distal) and schema is not None and schema.continuous and args.covariates is None \
            and args.distal is None:
        # the schema's roles, not typed: the measurement model is fitted without them (typed, analyse refuses)
        print("warning: the three-step covariate and distal models are not built for continuous clustering "  # noqa: T201
              "variables yet (docs/design.md §17.5): the schema's covariate and outcome columns are left out of "
              "this fit", file=sys.stderr)
        covariates = distal = None
    positions: dict = {}
    out, key, seed, mode, (silos, cov_spec, dis_spec) = _begin_run(
        args, command="vcmc fit --k", what="run",
        parts={**_settings(args, "k", "starts", "max_em_iterations", "id_column", "na_values", "exclude", "report",
                           "silo_column", "min_best", "max_starts", "standard_errors"), "covariates": covariates,
               "distal": distal},
        prepare=lambda: load(args, covariates=covariates, distal=distal, positions=positions, schema=schema))
    analysis = analyse(silos, args.k, covariates=cov_spec, distal=dis_spec, n_starts=args.starts,
                       max_iter=args.max_em_iterations, rng=seed, min_best=getattr(args, "min_best", None),
                       max_starts=getattr(args, "max_starts", None),
                       standard_errors=getattr(args, "standard_errors", "observed"),
                       profile_intervals=getattr(args, "standard_errors", "observed") == "observed")
    settings = {"k": args.k, "starts": args.starts, "max_em_iterations": args.max_em_iterations, "seed": seed,
                "files": [str(f) for f in args.files], "silo_column": args.silo_column,
                "covariates": covariates, "distal": distal,
                # the inferred coding, in the form a Flower run config states it (lca-covariates, lca-distal)
                "covariate_coding": coding_text(cov_spec) or None, "distal_coding": coding_text(dis_spec) or None,
                "three_step": "ML correction (Vermunt 2010), modal assignment"}
    paths = write_analysis(analysis, out, settings=settings, silos=silos, rows=positions,
                           schema=_lca_schema(silos, args, cov_spec, dis_spec))
    if args.report:
        paths["report"] = write_lca_report(out, analysis=analysis)
    _finish_run(out, key, mode, paths)
    f = analysis.fit
    print(f"latent class model K = {f.k} on {len(silos)} silos ({f.n_rows} rows): log-likelihood "  # noqa: T201
          f"{f.loglik:.3f}, BIC {f.statistics['bic']:.2f}; {f.n_best} of {len(f.start_logliks)} EM starts reached it")
    for kind, path in paths.items():
        print(f"  {kind:18s} {path}")  # noqa: T201
    if not f.converged:
        print("warning: EM reached --max-em-iterations before converging", file=sys.stderr)  # noqa: T201
    for w in analysis.warnings:
        print(f"warning: {w}", file=sys.stderr)  # noqa: T201
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


def bayesian_auxiliary(args) -> tuple[str | None, str | None, list[str]]:
    """The covariate and outcome columns of a Bayesian ``vcmc fit`` (typed, else the schema's roles), and the
    columns its readers must leave out of the clustering: ``--exclude`` and the typed columns the schema does
    not already declare (a declared column is left out by the schema itself)."""
    from vcmc.lca.analysis import parse_columns

    schema = schema_of(args) if getattr(args, "silo_column", None) is None or getattr(args, "schema", None) else None
    covariates = declared(schema, "covariate", args.covariates)
    distal = declared(schema, "outcome", args.distal)
    known = set(schema.role_columns()) if schema is not None else set()
    typed = [n for n, _ in parse_columns(args.covariates, "--covariates") + parse_columns(args.distal, "--distal")]
    excluded = columns_arg(getattr(args, "exclude", None))
    clash = sorted(set(typed) & set(excluded))
    if clash:
        raise ConfigError(f"columns {clash} are both excluded (--exclude) and used as covariates or outcomes")
    return covariates, distal, excluded + [n for n in typed if n not in known]


def bayesian_three_step(args, out: Path, result_json, result, silo_data, covariates, distal, info: dict) -> dict:
    """The bias-adjusted three-step models at the Bayesian fit's clusters (its posterior-mean weights and
    profiles of the occupied clusters; docs/design.md §15.3): ``covariates.csv``, ``distal.csv``,
    ``distal_tests.csv``, ``forest.png`` in the fit's folder and ``three_step`` in ``result.json``. A model that
    fails is reported there (and on the console); the fit is kept whatever happens."""
    import json

    from vcmc.atomic import atomic_write_text
    from vcmc.lca.analysis import three_step_at
    from vcmc.lca.outputs import write_three_step_files

    positions = info.get("rows") or {}
    if getattr(args, "silo_column", None) is not None:
        frames, _, rows = split_frames(args.files[0], args.silo_column)
    else:
        frames = read_frames(args.files)
        rows = {n: np.arange(len(f)) for n, f in frames.items()}
    del positions
    by_name = {d.name: d for d in silo_data}
    names = [n for n in result.silos if n in by_name]
    keep = np.asarray(result.cluster_sizes) > 0
    weights = np.asarray(result.weights)[keep]
    weights = weights / weights.sum()
    aux = [frames[n].iloc[rows[n]].reset_index(drop=True) if len(rows[n]) != len(frames[n]) else frames[n]
           for n in names]
    na = {"", *info.get("na_values", [])}
    aux = [f.map(lambda v: np.nan if isinstance(v, str) and v in na else v) for f in aux]
    analysis = three_step_at([by_name[n] for n in names], aux, weights, np.asarray(result.profiles)[keep],
                             covariates=covariates, distal=distal)
    paths = write_three_step_files(analysis, out)
    path = Path(result_json)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["three_step"] = {"covariates": covariates, "distal": distal, "k": int(keep.sum()),
                         "at": "the posterior-mean weights and profiles of the occupied clusters (clusters numbered "
                               "as in profiles.csv); reference class 1",
                         "method": "ML correction (Vermunt 2010), modal assignment (docs/design.md §15.3)",
                         "classification_error": None if analysis.error is None else analysis.error.tolist(),
                         "warnings": list(analysis.warnings)}
    atomic_write_text(path, json.dumps(doc, indent=2))
    for w in analysis.warnings:
        print(f"warning: {w}", file=sys.stderr)  # noqa: T201
    return paths
