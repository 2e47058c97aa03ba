"""The study runner: scenarios x replicates x methods, in parallel processes, resumable.

Layout of an output folder::

    study.json                              manifest: profile, root seed, settings fingerprint, runs
    cells/<design>-<separability>/rep-0007.json   one file per (scenario, replicate), all its methods
    tables/ figures/                        written by ``vcmc.research.study.tables`` / ``vcmc.research.study.figures``

Reproducibility: replicate ``r`` of scenario ``k`` (index in ``profiles.SCENARIOS``) owns the seed
sequence ``SeedSequence(root_seed, spawn_key=(k, r))``. Its data come from child ``(0,)``, a shared
apply step of group ``g`` from ``(1, crc32(g))``, method ``m`` from ``(2, crc32(m))`` and its matching
evaluation from ``(3, crc32(m))``: any cell (or one method in it) can be re-run alone, and adding a
method, a scenario or a replicate changes nothing already computed.

Resume: a cell file is rewritten atomically (temporary file + ``os.replace``) after every method that
finishes, so an interrupted study loses at most the method running at the time; on restart every
method already in a cell file (with the same settings fingerprint) is skipped.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import math
import os
import platform
import sys
import time
import traceback
import zlib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vcmc.atomic import atomic_write_json as write_json
from vcmc.exceptions import ConfigError
from vcmc.progress import progress_bar
from vcmc.research.study.profiles import SCENARIOS, StudyProfile, normalise_scenario

log = logging.getLogger(__name__)

__all__ = ["StudyRun", "cell_path", "cell_seed", "evaluate_result", "load_cells", "method_seed", "run_cell",
           "run_study", "warm_up"]

CELL_VERSION = 1


# ---------------------------------------------------------------------------------------------------
# Seeds
# ---------------------------------------------------------------------------------------------------

def _stable_hash(name: str) -> int:
    # crc32 is stable across processes and Python versions (unlike hash()).
    return zlib.crc32(name.encode("utf-8"))


def cell_seed(root_seed: int, scenario: str, replicate: int) -> np.random.SeedSequence:
    """The seed sequence owning replicate ``replicate`` of ``scenario``.

    The paper's scenarios are keyed by their index in ``SCENARIOS``; a generalisation design by
    ``2**32 + crc32(name)``, so adding a design never changes the seeds of another.
    """
    name = normalise_scenario(scenario)
    k = SCENARIOS.index(name) if name in SCENARIOS else 2**32 + _stable_hash(name)
    return np.random.SeedSequence(int(root_seed), spawn_key=(k, int(replicate)))


def _child(ss: np.random.SeedSequence, *key: int) -> int:
    child = np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, *key))
    # A plain int seed (63 bits) so every method receives the same kind of ``rng`` and stores it.
    return int(child.generate_state(2, dtype=np.uint32).astype(np.uint64) @ np.array([1, 2**31], np.uint64))


def data_seed(root_seed: int, scenario: str, replicate: int) -> int:
    """Seed of the simulated dataset of a cell."""
    return _child(cell_seed(root_seed, scenario, replicate), 0)


def group_seed(root_seed: int, scenario: str, replicate: int, group: str) -> int:
    """Seed of a shared step (e.g. the VCMC apply step) of a cell."""
    return _child(cell_seed(root_seed, scenario, replicate), 1, _stable_hash(group))


def method_seed(root_seed: int, scenario: str, replicate: int, method: str) -> int:
    """Seed of one method in a cell."""
    return _child(cell_seed(root_seed, scenario, replicate), 2, _stable_hash(method))


def _extra_seed(root_seed: int, scenario: str, replicate: int, method: str) -> int:
    return _child(cell_seed(root_seed, scenario, replicate), 3, _stable_hash(method))


# ---------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------

def cell_path(out: Path, scenario: str, replicate: int) -> Path:
    """Path of the file of one (scenario, replicate)."""
    design, sep = normalise_scenario(scenario).split("/")
    return Path(out) / "cells" / f"{design}-{sep}" / f"rep-{int(replicate):04d}.json"


def scenario_truth_silos(dataset) -> np.ndarray:
    """Number of silos in which each true cluster has a positive probability (its spread)."""
    return (np.asarray(dataset.weights) > 0).sum(axis=0).astype(np.int64)


def _to_jsonable(x):
    """Arrays to lists and non-finite floats to None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): _to_jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _to_jsonable(x.tolist())
    if isinstance(x, np.bool_ | bool):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return float(x) if math.isfinite(float(x)) else None
    return x


def atomic_write_json(path: Path, obj) -> None:
    """Write ``obj`` as strict JSON (arrays as lists, non-finite floats as null) atomically (``vcmc.atomic``)."""
    write_json(path, _to_jsonable(obj), separators=(",", ":"))


def read_cell(path: Path) -> dict | None:
    """A saved cell, or None when absent or unreadable (a corrupt file is recomputed, not trusted)."""
    try:
        with open(path, encoding="utf-8") as fh:
            rec = json.load(fh)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("version") == CELL_VERSION else None


def load_cells(out: Path, *, fingerprint: dict | None = None, seed: int | None = None) -> list[dict]:
    """Every saved cell of a study folder (optionally only those with the given settings and seed)."""
    recs = []
    for p in sorted((Path(out) / "cells").glob("*/rep-*.json")):
        rec = read_cell(p)
        if rec is None:
            continue
        if fingerprint is not None and rec.get("fingerprint") != _to_jsonable(fingerprint):
            continue
        if seed is not None and rec.get("root_seed") != seed:
            continue
        recs.append(rec)
    return recs


# ---------------------------------------------------------------------------------------------------
# Metrics of one result
# ---------------------------------------------------------------------------------------------------

def evaluate_result(result, dataset) -> dict:
    """The per-replicate metrics and estimates Tables 2-5 need, from one ``GlobalResult``.

    Clusters are aligned to the truth by a Hungarian assignment on the estimated x true confusion matrix
    of the pooled rows (docs/design.md §9.2); a true cluster left unmatched gets missing estimates and is
    counted in ``n_unmatched_true``. VI uses the natural logarithm.
    """
    from vcmc.metrics import (
        adjusted_rand_index,
        align_clusters,
        best_f1,
        majority_pieces,
        variation_of_information,
    )

    true = np.concatenate([np.asarray(t) for t in dataset.labels])
    n_true = int(np.asarray(dataset.global_weights).shape[0])
    p_dim = int(np.asarray(dataset.profiles).shape[1])
    rec: dict = {"n_clusters": int(result.n_clusters)}
    est_pi = np.full(n_true, np.nan)
    pi_ci = np.full((n_true, 2), np.nan)
    est_p = np.full((n_true, p_dim), np.nan)
    p_ci = np.full((n_true, p_dim, 2), np.nan)
    if result.assignments is not None:
        est = np.concatenate([np.asarray(a) for a in result.assignments])
        rec["ari"] = float(adjusted_rand_index(true, est))
        rec["vi"] = float(variation_of_information(true, est, base=np.e))
        aligned = np.asarray(align_clusters(est, true, n_estimated=int(np.asarray(result.weights).shape[0]),
                                            n_true=n_true), dtype=np.int64)
        ok = aligned >= 0
        idx = aligned[ok]
        est_pi[ok] = np.asarray(result.weights)[idx]
        est_p[ok] = np.asarray(result.profiles)[idx]
        if result.weights_ci is not None:
            pi_ci[ok] = np.asarray(result.weights_ci)[idx]
        if result.profiles_ci is not None:
            p_ci[ok] = np.asarray(result.profiles_ci)[idx]
        rec["aligned"] = aligned.tolist()
        rec["n_unmatched_true"] = int(np.count_nonzero(~ok))
        n_est = int(np.asarray(result.weights).shape[0])
        rec["f1"] = best_f1(est, true, n_estimated=n_est, n_true=n_true).tolist()
        rec["pieces"] = majority_pieces(est, true, n_estimated=n_est, n_true=n_true).tolist()
    else:
        rec["ari"] = rec["vi"] = None
        rec["aligned"] = None
        rec["n_unmatched_true"] = n_true
        rec["f1"] = rec["pieces"] = None
    rec["pi"] = {"est": est_pi, "lo": pi_ci[:, 0], "hi": pi_ci[:, 1]}
    rec["p"] = {"est": est_p, "lo": p_ci[..., 0], "hi": p_ci[..., 1]}
    rec["has_ci"] = bool(result.weights_ci is not None)
    rec["timings"] = {k: float(v) for k, v in (result.timings or {}).items()}
    diag = result.diagnostics or {}
    rec["diagnostics"] = {k: diag[k] for k in ("converged", "n_iter", "elbo") if k in diag}
    if isinstance(diag.get("local"), dict):
        # per-silo apply-step figures (clusters found, sampler vs post-processing seconds) for the reading
        rec["diagnostics"]["local"] = {
            str(silo): {k: v for k, v in d.items()
                        if (k.startswith("seconds") or k in ("n_clusters", "n_withheld"))
                        and isinstance(v, int | float)}
            for silo, d in diag["local"].items() if isinstance(d, dict)}
    return rec


# ---------------------------------------------------------------------------------------------------
# One cell
# ---------------------------------------------------------------------------------------------------

def simulate_cell(scenario: str, replicate: int, *, profile: StudyProfile, root_seed: int):
    """The dataset of one cell (regenerated identically from the seeds)."""
    from vcmc.research.simulate import simulate_design
    from vcmc.research.study.designs import get_design, is_design

    name = normalise_scenario(scenario)
    seed = data_seed(root_seed, name, replicate)
    if is_design(name):
        return get_design(name).simulate(seed, scale=profile.design_scale)
    design, sep = name.split("/")
    return simulate_design(design, sep, rng=seed, n_per_silo=profile.n_per_silo)


def _truth(dataset) -> dict:
    return {"weights": np.asarray(dataset.global_weights), "profiles": np.asarray(dataset.profiles),
            "n_modalities": list(dataset.n_modalities),
            "sizes": np.bincount(np.concatenate(dataset.labels), minlength=len(dataset.global_weights)),
            "n_silos": scenario_truth_silos(dataset), "silo_sizes": list(dataset.n_per_silo)}


def run_cell(scenario: str, replicate: int, *, profile: StudyProfile, methods, root_seed: int, out: Path,
             registry=None, force: bool = False) -> dict:
    """Compute the missing methods of one (scenario, replicate) and save the cell after each one.

    Parameters
    ----------
    scenario : str
    replicate : int
    profile : StudyProfile
    methods : sequence of str
        Registry names to have in the cell.
    root_seed : int
    out : Path
        Study folder.
    registry : Registry, optional
        Default ``default_registry()``.
    force : bool
        Recompute the methods even if saved.

    Returns
    -------
    dict
        The cell record (as saved), with ``computed`` listing the methods computed by this call.
    """
    from vcmc.research.study.registry import default_registry, oracle_matching

    registry = registry or default_registry()
    scenario = normalise_scenario(scenario)
    path = cell_path(out, scenario, replicate)
    fp = _to_jsonable(profile.fingerprint())
    profile = profile.for_scenario(scenario)
    rec = None if force else read_cell(path)
    if rec is not None and (rec.get("fingerprint") != fp or rec.get("root_seed") != int(root_seed)):
        rec = None
    todo = [m for m in methods if force or rec is None or m not in rec.get("methods", {})]
    if not todo:
        return {**rec, "computed": []}

    dataset = simulate_cell(scenario, replicate, profile=profile, root_seed=root_seed)
    if rec is None:
        rec = {"version": CELL_VERSION, "scenario": scenario, "replicate": int(replicate),
               "root_seed": int(root_seed), "data_seed": data_seed(root_seed, scenario, replicate),
               "fingerprint": fp, "truth": _truth(dataset), "methods": {}, "errors": {}}
    rec.setdefault("errors", {})
    computed = []
    ordered = sorted(todo, key=lambda n: (registry.get(n).group or "~", todo.index(n)))
    shared_cache: dict[str, tuple[object, float]] = {}
    for name in ordered:
        method = registry.get(name)
        seed = method_seed(root_seed, scenario, replicate, name)
        try:
            shared, shared_s = None, 0.0
            if method.group is not None:
                if method.group not in shared_cache:
                    t0 = time.perf_counter()
                    g = registry.groups[method.group]
                    obj = g.prepare(dataset, seed=group_seed(root_seed, scenario, replicate, method.group),
                                    profile=profile)
                    shared_cache[method.group] = (obj, time.perf_counter() - t0)
                shared, shared_s = shared_cache[method.group]
            t0 = time.perf_counter()
            result = method.run(dataset, seed=seed, profile=profile, shared=shared)
            own_s = time.perf_counter() - t0
            mrec = evaluate_result(result, dataset)
            # Run time: the shared step counts in full for every method that uses it (the time the
            # method would take alone), plus its own wall time.
            mrec["time_s"] = shared_s + own_s
            mrec["time_own_s"] = own_s
            par = getattr(shared, "seconds_parallel", None)
            mrec["time_parallel_s"] = (par + own_s) if par is not None else None
            mrec["seed"] = seed
            if method.matching is not None:
                mrec["matching_estimated"] = _evaluate_estimated_matching(result, shared, dataset)
                if method.matching == "calibrated":
                    mrec["matching_levels"] = _matching_at_levels(shared, dataset)
                mrec["matching_true"] = oracle_matching(
                    dataset, method.matching, seed=_extra_seed(root_seed, scenario, replicate, name),
                    profile=profile)
            rec["methods"][name] = mrec
            rec["errors"].pop(name, None)
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as err:  # a failing method must not stop the study: record it, retry on restart
            log.warning("%s replicate %d: method %s failed: %s", scenario, replicate, name, err)
            rec["errors"][name] = {"type": type(err).__name__, "message": str(err),
                                   "traceback": traceback.format_exc(limit=8)}
        computed.append(name)
        atomic_write_json(path, rec)
    return {**rec, "computed": computed}


def _evaluate_estimated_matching(result, shared, dataset) -> dict | None:
    """Table 2 with estimated local partitions: the matching scored on the silos' own partitions."""
    from vcmc.research.study.evaluate import evaluate_matching

    local = shared.local_partitions() if shared is not None else None
    if result.matching is None or local is None:
        return None
    names = list(result.matching.silos)
    by_name = {s.name: i for i, s in enumerate(dataset.silos)}
    idx = [by_name[n] for n in names]
    ev = evaluate_matching(result.matching, [local[i] for i in idx], [dataset.labels[i] for i in idx])
    return {"correct": bool(ev["correct"]), "ari": float(ev["ari"]), "n_global": int(ev["n_global"])}


#: Other levels of the calibrated closeness test scored on the same summaries (the default's sensitivity).
SENSITIVITY_LEVELS: tuple[float, ...] = (0.99, 0.999, 0.9999, 1 - 1e-8)


def _matching_at_levels(shared, dataset) -> dict | None:
    """Correct matching, ARI and C of calibrated matching at other levels (pure matching, no aggregation)."""
    from vcmc.matching import match_calibrated
    from vcmc.research.study.evaluate import evaluate_matching

    local = shared.local_partitions() if shared is not None else None
    if local is None:
        return None
    by_name = {s.name: i for i, s in enumerate(dataset.silos)}
    idx = [by_name[s.silo] for s in shared.summaries]
    out = {}
    for level in SENSITIVITY_LEVELS:
        m = match_calibrated(shared.summaries, level=level)
        ev = evaluate_matching(m, [local[i] for i in idx], [dataset.labels[i] for i in idx])
        out[str(level)] = {"correct": bool(ev["correct"]), "ari": float(ev["ari"]), "n_global": int(ev["n_global"])}
    return out


_WARMED: set = set()


def warm_up(methods, profile: StudyProfile, registry=None) -> None:
    """Run each method once on a tiny dataset, untimed and unsaved, so that compilation of the numba
    kernels (or loading them from the on-disk cache) is not billed to the first replicate's run time."""
    from vcmc.research.simulate import simulate_design
    from vcmc.research.study.registry import default_registry

    registry = registry or default_registry()
    todo = [m for m in methods if m not in _WARMED]
    if not todo:
        return
    tiny = profile.with_overrides(n_iter=40, burn_in=20, thin=1, n_per_silo=60, oracle_draws=10)
    data = simulate_design("nested", "easy", rng=0, n_per_silo=60)
    shared: dict = {}
    for name in todo:
        m = registry.get(name)
        try:
            if m.group is not None and m.group not in shared:
                shared[m.group] = registry.groups[m.group].prepare(data, seed=0, profile=tiny)
            m.run(data, seed=0, profile=tiny, shared=shared.get(m.group))
        except Exception as err:  # a method that fails here fails again, with its record, in the study
            log.info("warm-up of %s failed: %s", name, err)
        _WARMED.add(name)


def _cell_job(args) -> tuple[str, int, list[str], list[str], float]:
    scenario, replicate, profile, methods, root_seed, out, force = args
    warm_up(methods, profile)
    t0 = time.perf_counter()
    rec = run_cell(scenario, replicate, profile=profile, methods=methods, root_seed=root_seed, out=Path(out),
                   force=force)
    return scenario, replicate, rec["computed"], sorted(rec.get("errors", {})), time.perf_counter() - t0


def _worker_init() -> None:
    # One process per core: keep BLAS and numba single-threaded inside each worker.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("VCMC_NO_PROGRESS", "1")
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)


# ---------------------------------------------------------------------------------------------------
# The study
# ---------------------------------------------------------------------------------------------------

@dataclass
class StudyRun:
    """What ``run_study`` did.

    Attributes
    ----------
    out : Path
    cells_total : int
        Cells requested.
    cells_computed : int
        Cells in which at least one method was computed by this run (the others were already saved).
    methods_computed : int
    errors : list of (scenario, replicate, method)
    seconds : float
    """

    out: Path
    cells_total: int = 0
    cells_computed: int = 0
    methods_computed: int = 0
    errors: list = field(default_factory=list)
    seconds: float = 0.0


def _machine() -> dict:
    return {"cores": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
            "processor": platform.processor() or platform.machine()}


#: What a study writes into its folder (the layout above); ``vcmc study --overwrite`` replaces exactly these.
STUDY_LAYOUT = ("study.json", "cells", "tables", "figures")


def _read_study_manifest(out: Path) -> dict | None:
    try:
        manifest = json.loads((Path(out) / "study.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def other_study(out, profile: StudyProfile, root_seed: int) -> dict | None:
    """The manifest of the study in ``out`` when it has other settings or another seed (None: no study there,
    or this same study, which resumes)."""
    manifest = _read_study_manifest(out)
    if manifest is None:
        return None
    same = (manifest.get("fingerprint") == _to_jsonable(profile.fingerprint())
            and manifest.get("root_seed") == int(root_seed))
    return None if same else manifest


def _check_manifest(out: Path, profile: StudyProfile, root_seed: int, command: str | None) -> None:
    """Create the manifest, or check that a resumed study uses the same settings and seed."""
    from vcmc._version import __version__

    path = Path(out) / "study.json"
    fp = _to_jsonable(profile.fingerprint())
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    manifest = _read_study_manifest(out)
    other = other_study(out, profile, root_seed)
    if other is not None:
        raise ConfigError(
            f"The output folder {str(out)!r} holds a study with other settings (seed "
            f"{other.get('root_seed')}, {other.get('fingerprint')}); this run has seed "
            f"{root_seed}, {fp}. It is kept: use another --out, the same settings to resume it, or --overwrite "
            "to replace it.")
    if manifest is None:
        manifest = {"root_seed": int(root_seed), "fingerprint": fp, "created": now, "runs": []}
    manifest["profile"] = profile.to_dict()
    manifest["fit_config"] = profile.fit_config().to_dict()
    manifest["runs"].append({"started": now, "command": command, "vcmc": __version__, "machine": _machine(),
                             "methods": list(profile.methods), "scenarios": list(profile.scenarios),
                             "replicates": profile.n_replicates})
    atomic_write_json(path, manifest)


def _finish_manifest(out: Path, run: StudyRun) -> None:
    path = Path(out) / "study.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["runs"][-1].update({
        "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "seconds": run.seconds,
        "cells_computed": run.cells_computed, "errors": [list(e) for e in run.errors]})
    atomic_write_json(path, manifest)


def run_study(profile: StudyProfile, *, out, root_seed: int = 2026, replicates=None, jobs: int = 1,
              force: bool = False, registry=None, command: str | None = None,
              progress: bool | None = None, warm: bool | None = None) -> StudyRun:
    """Run (or resume) a simulation study.

    Parameters
    ----------
    profile : StudyProfile
        Settings, methods and scenarios (see ``vcmc.research.study.profiles``).
    out : path
        Study folder; created if needed. A folder that already holds a study with other settings or
        another seed is refused.
    root_seed : int
        Root of every cell's seed (``cell_seed``).
    replicates : sequence of int, optional
        Replicate indices to run (default ``range(profile.n_replicates)``): one index re-runs one cell.
    jobs : int
        Worker processes; cells run in parallel (``jobs=1`` runs in this process).
    force : bool
        Recompute the selected cells even when saved.
    registry : Registry, optional
        Method registry (only with ``jobs=1``: worker processes use the default registry).
    command : str, optional
        Command line recorded in the manifest.
    progress : bool, optional
        Force the progress bar on or off (default: on a terminal, off in CI).
    warm : bool, optional
        Run every method once on a tiny dataset before the first timed cell of each process
        (``warm_up``); default: on with the default registry, off with a custom one.

    Returns
    -------
    StudyRun
    """
    from vcmc.research.study.registry import default_registry

    if not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"The 'jobs' parameter of run_study must be an int >= 1. Got {jobs!r} instead.")
    if registry is not None and jobs > 1:
        raise ConfigError("The 'registry' parameter of run_study needs jobs=1 (worker processes import the "
                          f"default registry). Got jobs={jobs!r} instead.")
    reg = registry or default_registry()
    reg.check(profile.methods)
    out = Path(out)
    reps = list(range(profile.n_replicates)) if replicates is None else [int(r) for r in replicates]
    if any(r < 0 for r in reps):
        raise ConfigError(f"The 'replicates' parameter of run_study must hold indices >= 0. Got {reps} "
                          "instead.")
    _check_manifest(out, profile, root_seed, command)

    fp = _to_jsonable(profile.fingerprint())
    cells = [(sc, r) for sc in profile.scenarios for r in reps]
    todo = []
    for sc, r in cells:
        rec = None if force else read_cell(cell_path(out, sc, r))
        done = (rec is not None and rec.get("fingerprint") == fp and rec.get("root_seed") == int(root_seed)
                and all(m in rec.get("methods", {}) for m in profile.methods))
        if not done:
            todo.append((sc, r))
    run = StudyRun(out=out, cells_total=len(cells))
    log.info("study %s: %d cells, %d already saved, %d to compute", out, len(cells), len(cells) - len(todo),
             len(todo))
    t_start = time.perf_counter()
    args = [(sc, r, profile, tuple(profile.methods), int(root_seed), str(out), force) for sc, r in todo]
    with progress_bar(total=len(todo), desc="vcmc study", enabled=progress, unit="cell") as bar:
        def done_one(res):
            sc, r, computed, errors, secs = res
            run.cells_computed += bool(computed)
            run.methods_computed += len(computed)
            run.errors.extend((sc, r, m) for m in errors)
            bar.update(1)
            # the same ETA as the bar, for logs in CI where the bar is off
            n_done = bar.n
            elapsed = time.perf_counter() - t_start
            eta = elapsed / n_done * (len(args) - n_done) if n_done else float("nan")
            log.info("%s replicate %d: %d methods in %.1f s%s; %d/%d cells, ETA %.0f s", sc, r, len(computed),
                     secs, f" (failed: {errors})" if errors else "", n_done, len(args), eta)

        if jobs == 1 or len(args) <= 1:
            if args and (warm if warm is not None else registry is None):
                warm_up(profile.methods, profile, reg)
            for a in args:
                sc, r = a[0], a[1]
                t0 = time.perf_counter()
                rec = run_cell(sc, r, profile=profile, methods=profile.methods, root_seed=int(root_seed),
                               out=out, registry=reg, force=force)
                done_one((sc, r, rec["computed"], sorted(rec.get("errors", {})), time.perf_counter() - t0))
        else:
            import multiprocessing as mp

            # "spawn": a clean interpreter per worker (no forked numba/BLAS thread state).
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(jobs, len(args)), mp_context=ctx,
                                     initializer=_worker_init) as pool:
                futures = [pool.submit(_cell_job, a) for a in args]
                try:
                    for fut in as_completed(futures):
                        done_one(fut.result())
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    run.seconds = time.perf_counter() - t_start
    _finish_manifest(out, run)
    return run
