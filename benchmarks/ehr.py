"""The paper's application at its scale: a synthetic multimorbidity cohort of 289,821 people in 30 silos.

Generates the cohort (``vcmc simulate --design ehr``), writes one CSV per silo, then runs, each in its own
process so that its peak memory is its own:

- ``vcmc``: VCMC as a federation would run it, the silos' data read inside ``--jobs`` worker processes
  (the server never holds a row), at the paper's protocol by default (50,000 iterations, burn-in 25,000,
  thinning 5, C+ = 30): wall time per stage, peak resident memory of the server and of every worker;
- ``full-mcmc``: the same sampler on the pooled rows (the gold standard a federation cannot run);
- ``fedmerdel``: the variational comparator.

With ``--profile`` the VCMC run is repeated once more with every silo in the benchmark's own process (the
in-process transport, one core) under cProfile, and ``OUT/profile-<allocation>.{md,json}`` say where each
second goes: the stages, each silo request type, and the functions with the most own time (a compiled
kernel's time is its Python caller's own time).

Every fit is scored against the truth: number of clusters, ARI, best F1 of every true cluster (recovered
when >= 0.8) by size, and the fit's heatmap of scaled prevalence differences (the paper's Figure 4).
Writes ``OUT/ehr-<allocation>.json``, ``OUT/ehr-<allocation>.md`` and the heatmaps; the command line and the
commit are recorded in the JSON.

    python benchmarks/ehr.py                                  # the paper's protocol, uniform silos
    python benchmarks/ehr.py --allocation region              # the 13 regions of Table 6
    python benchmarks/ehr.py --n 30000 --iterations 2000      # a quick look
    python benchmarks/ehr.py --stop converged --methods vcmc  # --iterations auto (ehr-uniform-auto.*)
    python benchmarks/ehr.py --iterations 4000 --methods vcmc --profile --tag app4000   # issue 24's scale
    python benchmarks/ehr.py --methods startup --tag startup  # where the process pool's start-up goes
    python benchmarks/ehr.py --rescore --tag T --data D ...   # the scores of OUT/ehr-T.json again, same runs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _provenance import commit


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------------------------------------ worker
def _config(args):
    from vcmc.config import AggregationConfig, FitConfig, PostprocessConfig, PriorConfig, SamplerConfig

    sampler = SamplerConfig(n_iter=args.iterations, burn_in=args.burn_in, thin=args.thin, stop=args.stop)
    return FitConfig(prior=PriorConfig(n_components=args.components), sampler=sampler,
                     postprocess=PostprocessConfig(summary_draws=args.summary_draws),
                     aggregation=AggregationConfig(rounds=args.rounds, round_components=args.round_components,
                                                   round_anneal=args.round_anneal,
                                                   round_split_merge=args.round_split_merge == "true",
                                                   round_births=args.round_births))


def _write_report(result, schema, data_dir: Path, report_dir: Path) -> None:
    """The fit's own files (in the temporary data folder: memberships of 290,000 people stay out of the
    repository) and its ``vcmc report``, copied to ``report_dir`` (page, figures, characterisation.csv)."""
    import shutil

    from vcmc.report import write_report
    from vcmc.report.outputs import write_outputs

    fit_dir = data_dir / "fit-vcmc"
    write_outputs(result, fit_dir, schema=schema)
    paths = write_report(fit_dir)
    if report_dir.exists():
        shutil.rmtree(report_dir)
    (report_dir / "figures").mkdir(parents=True)
    shutil.copy2(paths.html, report_dir / "report.html")
    shutil.copy2(paths.characterisation, report_dir / "characterisation.csv")
    for fig in paths.figures.values():
        shutil.copy2(fig, report_dir / "figures" / Path(fig).name)


def _silo_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("silo_*.csv"))


def _run_vcmc(args, data_dir: Path) -> dict:
    import functools

    from vcmc.data import Schema, read_csv
    from vcmc.federation.transport import ProcessPoolTransport
    from vcmc.pipeline import run_vcmc

    schema = Schema.from_json(data_dir / "schema.json")
    loaders = {p.stem: functools.partial(read_csv, p, schema=schema) for p in _silo_files(data_dir)}
    config = _config(args)
    t0 = time.perf_counter()
    with ProcessPoolTransport(loaders, privacy=config.privacy, max_workers=args.jobs) as pool:
        t_start = time.perf_counter() - t0
        result = run_vcmc(pool, config, rng=args.fit_seed)
        labels = pool.local_assignments()
    wall = time.perf_counter() - t0
    server_peak = _peak_rss_mb()       # before the report: writing files is not part of the run
    local = result.diagnostics.get("local", {})
    if args.report_dir:
        _write_report(result, schema, data_dir, Path(args.report_dir))
    timings = dict(result.timings)
    labelling = result.diagnostics.get("classification", {}).get("monte_carlo")
    return {"wall_s": wall, "startup_s": t_start, "timings_s": timings,
            # silo-side labelling (the assign round) and assessment against the apply step, in one run
            "labelling_and_assessment_over_apply": (timings.get("partition", 0.0) + timings.get("assessment", 0.0))
            / timings["apply"] if timings.get("apply") else None,
            "labelling_monte_carlo": labelling,
            "server_peak_rss_mb": server_peak,
            "worker_peak_rss_mb": max(float(d.get("process_peak_rss_mb", float("nan"))) for d in local.values()),
            "silo_sampler_s": {s: d.get("seconds_sampler") for s, d in local.items()},
            "local_clusters": {s: d.get("n_clusters") for s, d in local.items()},
            "draws_sent": {s: d.get("n_draws_sent") for s, d in local.items()},
            "worker_peak_rss_mb_per_silo": {s: d.get("process_peak_rss_mb") for s, d in local.items()},
            "aggregation_iterations": result.diagnostics.get("n_iter"),
            "n_clusters": result.n_clusters, "labels": {s: labels[s].tolist() for s in result.silos},
            "profiles": np.asarray(result.profiles).tolist(), "weights": np.asarray(result.weights).tolist(),
            "warnings": result.diagnostics.get("warnings", []), "rounds": _rounds_record(result)}


def _rounds_record(result) -> dict | None:
    """What the global-informed rounds did (``vcmc fit --rounds``): components, K over the rounds (every
    50th), seconds, the stability verdict."""
    rd = result.diagnostics.get("rounds")
    if not rd:
        return None
    per = rd["per_round"]
    return {"n_rounds": rd["n_rounds"], "components": rd["components"], "seconds": rd["seconds"],
            "plan": result.diagnostics.get("rounds_plan"), "births": rd.get("births"),
            "split_merge": rd.get("split_merge"),
            "stability": rd["stability"], "k_every_50": [t["k"] for t in per[::50]],
            "log_joint_every_50": [t["log_joint"] for t in per[::50]],
            "one_shot_k": rd.get("one_shot_k", result.diagnostics.get("one_shot", {}).get("n_clusters"))}


def _pooled(data_dir: Path):
    from vcmc.data import Schema, read_csv

    schema = Schema.from_json(data_dir / "schema.json")
    silos = [read_csv(p, schema=schema) for p in _silo_files(data_dir)]
    return silos, schema


def _run_full(args, data_dir: Path) -> dict:
    from vcmc.research.baselines.full_mcmc import fit_full_mcmc

    silos, schema = _pooled(data_dir)
    config = _config(args)
    t0 = time.perf_counter()
    res = fit_full_mcmc([s.codes for s in silos], schema.n_modalities, prior=config.prior,
                        sampler=config.sampler, postprocess=config.postprocess, rng=args.fit_seed,
                        silo_names=[s.name for s in silos])
    return {"wall_s": time.perf_counter() - t0, "timings_s": dict(res.timings), "peak_rss_mb": _peak_rss_mb(),
            "n_clusters": res.n_clusters,
            "labels": {s.name: np.asarray(a).tolist() for s, a in zip(silos, res.assignments, strict=True)},
            "profiles": np.asarray(res.profiles).tolist(), "weights": np.asarray(res.weights).tolist()}


def _run_fedmerdel(args, data_dir: Path) -> dict:
    from vcmc.research.baselines.fedmerdel import fit_fedmerdel

    silos, schema = _pooled(data_dir)
    t0 = time.perf_counter()
    res = fit_fedmerdel([s.codes for s in silos], schema.n_modalities, k_init=args.components, rng=args.fit_seed,
                        silo_names=[s.name for s in silos])
    return {"wall_s": time.perf_counter() - t0, "peak_rss_mb": _peak_rss_mb(), "n_clusters": res.n_clusters,
            "labels": {s.name: np.asarray(a).tolist() for s, a in zip(silos, res.assignments, strict=True)},
            "profiles": np.asarray(res.profiles).tolist(), "weights": np.asarray(res.weights).tolist()}


def _where(code) -> str:
    """``module-path:line(function)`` of a profiled function, without this machine's folders."""
    filename, line, name = code
    for marker in ("/src/", "/site-packages/", "/lib/python"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{filename}:{line}({name})" if line else name


def _run_profile(args, data_dir: Path) -> dict:
    """The VCMC run with every silo in this process under cProfile: where each second goes."""
    import cProfile
    import pstats

    from vcmc.data import Schema, read_csv
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import run_vcmc
    from vcmc.silo.local import LocalSilo

    schema = Schema.from_json(data_dir / "schema.json")
    config = _config(args)
    silos = [LocalSilo(read_csv(p, schema=schema), privacy=config.privacy) for p in _silo_files(data_dir)]
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    result = run_vcmc(InProcessTransport(silos), config, rng=args.fit_seed)
    profiler.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(profiler).stats
    own = sorted(((tt, ct, nc, _where(code)) for code, (_, nc, tt, ct, _) in stats.items()), reverse=True)
    requests = {}
    for code, (_, nc, _, ct, _) in stats.items():
        if "silo/endpoints/" in code[0] and code[2].startswith("answer"):   # each endpoint's answer
            family = code[0].rsplit("/", 1)[-1].removesuffix(".py")
            requests[f"{family}.{code[2]}"] = {"seconds": ct, "calls": nc}
    entry = {}
    for code, (_, nc, tt, ct, _) in stats.items():
        if code[2] in ("run_chain", "memberships_to_target", "assess_rows", "replicate", "fill", "sparse_layout",
                       "aggregate", "run_apply_step", "build_summary", "read_csv", "consensus"):
            entry[_where(code)] = {"seconds": ct, "own_seconds": tt, "calls": nc}
    return {"wall_s": wall, "timings_s": dict(result.timings), "silo_requests": requests, "entry_points": entry,
            "top_own_time": [{"function": f, "own_s": tt, "cumulative_s": ct, "calls": nc}
                             for tt, ct, nc, f in own[:30]],
            "labelling_monte_carlo": result.diagnostics.get("classification", {}).get("monte_carlo"),
            "n_clusters": result.n_clusters}


def profile_markdown(report: dict, prof: dict) -> str:
    t = prof["timings_s"]
    lines = [f"# Where each second of a VCMC run goes ({report['allocation']} allocation, n = {report['n']:,}, "
             f"{report['n_silos']} silos, {report['protocol']['iterations']:,} iterations)", "",
             f"Command: `{report['command']}` at commit `{report['commit']}`; {report['cores']} cores (shared). "
             "Every silo in one process (in-process transport, one core) under cProfile, so the stages add "
             "up to the run; a compiled kernel's time is its Python caller's own time.", "",
             f"Whole run {prof['wall_s']:.1f} s (under the profiler).", "", "| stage | seconds | share |",
             "| --- | --- | --- |"]
    total = t.get("total") or sum(v for k, v in t.items() if k != "total")
    for k, v in t.items():
        if k != "total":
            lines.append(f"| {k} | {v:.2f} | {v / total:.1%} |")
    lines += ["", "Silo requests (cumulative, all silos):", "", "| request | seconds | calls |", "| --- | --- | --- |"]
    for k, v in sorted(prof["silo_requests"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| {k} | {v['seconds']:.2f} | {v['calls']} |")
    lines += ["", "Entry points (cumulative):", "", "| function | seconds | own | calls |", "| --- | --- | --- | --- |"]
    for k, v in sorted(prof["entry_points"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| `{k}` | {v['seconds']:.2f} | {v['own_seconds']:.2f} | {v['calls']} |")
    lines += ["", "Most own time:", "", "| function | own s | cumulative s | calls |", "| --- | --- | --- | --- |"]
    for r in prof["top_own_time"][:20]:
        lines.append(f"| `{r['function']}` | {r['own_s']:.2f} | {r['cumulative_s']:.2f} | {r['calls']} |")
    mc = prof.get("labelling_monte_carlo")
    if mc:
        draws = sorted(set(mc["draws_per_silo"].values()))
        lines += ["", f"Labelling: memberships averaged over {draws} draws per silo, largest Monte Carlo "
                      f"standard error of a membership {mc['max_error']:.3f} (target {mc['target']})."]
    return "\n".join(lines) + "\n"


def _run_startup(args, data_dir: Path) -> dict:
    """Where the start of a ``--jobs`` run goes: the process pool's start-up as ``_run_vcmc`` makes it (fork
    server and its imports, then each worker reading its silos one after the other and answering the hello),
    then, in this process, the same reading and hello of every silo one after the other, timed apart."""
    import functools

    from vcmc.data import Schema, read_csv
    from vcmc.federation.transport import ProcessPoolTransport
    from vcmc.protocol import HelloRequest
    from vcmc.silo.local import LocalSilo

    schema = Schema.from_json(data_dir / "schema.json")
    files = _silo_files(data_dir)
    loaders = {p.stem: functools.partial(read_csv, p, schema=schema) for p in files}
    t0 = time.perf_counter()
    with ProcessPoolTransport(loaders, max_workers=args.jobs):
        pool_s = time.perf_counter() - t0
    read_s, hello_s = [], []
    for p in files:
        t0 = time.perf_counter()
        data = read_csv(p, schema=schema)
        t1 = time.perf_counter()
        LocalSilo(data).handle(HelloRequest()).to_arrays()
        read_s.append(t1 - t0)
        hello_s.append(time.perf_counter() - t1)
    return {"startup_s": pool_s, "read_csv_s_per_silo": float(np.median(read_s)),
            "hello_s_per_silo": float(np.median(hello_s)), "read_and_hello_all_silos_one_process_s":
            float(sum(read_s) + sum(hello_s)), "n_silos": len(files), "jobs": args.jobs}


WORKERS = {"vcmc": _run_vcmc, "full-mcmc": _run_full, "fedmerdel": _run_fedmerdel, "profile": _run_profile,
           "startup": _run_startup}


# ------------------------------------------------------------------------------------------------ scoring
def score(run: dict, truth: dict) -> dict:
    """K, ARI and best F1 of every true cluster, from the labels of a run and the truth file."""
    from vcmc.metrics import adjusted_rand_index, best_f1, majority_pieces

    silos = list(truth["labels"])
    true = np.concatenate([np.asarray(truth["labels"][s]) for s in silos])
    est = np.concatenate([np.asarray(run["labels"][s]) for s in silos])
    n_true = len(truth["sizes"])
    f1 = best_f1(est, true, n_estimated=int(est.max()) + 1, n_true=n_true)
    pieces = majority_pieces(est, true, n_estimated=int(est.max()) + 1, n_true=n_true)
    # Where each estimated cluster lives: silos holding at least 10 of its members (the disclosure minimum),
    # and the true cluster most of its members come from. A single-silo fragment is a cluster found in one
    # silo only whose true cluster is also (mostly) another estimated cluster: a piece the matching left apart.
    # "Found in one silo only": no other silo holds 10 of its members and one silo holds most of them (a
    # pooled chain's component of a few dozen rows spread thinly over many silos is a small cluster of the
    # federation, not a silo's piece).
    n_est = int(est.max()) + 1
    per_silo = np.stack([np.bincount(np.asarray(run["labels"][s]), minlength=n_est) for s in silos])
    from vcmc.metrics import confusion_matrix

    conf = confusion_matrix(est, true, n_est, n_true).T                         # (estimated, true)
    majority = np.argmax(conf, axis=1)
    silos_of = (per_silo >= 10).sum(axis=0)
    size = per_silo.sum(axis=0)
    single = [int(c + 1) for c in range(n_est) if size[c] > 0 and silos_of[c] <= 1
              and 2 * per_silo[:, c].max() > size[c] and pieces[majority[c]] > 1]
    return {"n_clusters": int(run["n_clusters"]), "ari": float(adjusted_rand_index(true, est)),
            "best_f1": f1.round(4).tolist(), "recovered": [int(c + 1) for c in np.flatnonzero(f1 >= 0.8)],
            "pieces": pieces.tolist(), "estimated_sizes": per_silo.sum(axis=0).tolist(),
            "estimated_silos": silos_of.tolist(), "estimated_majority": (majority + 1).tolist(),
            "estimated_largest_silo": per_silo.max(axis=0).tolist(),
            "estimated_any_silo": (per_silo > 0).sum(axis=0).tolist(),
            "single_silo_fragments": single}


def _rescore(path: Path, data_dir: Path, truth: dict) -> None:
    """``--rescore``: the scores of a committed report recomputed from the same runs' labels (the scoring
    changed, not the runs); the report keeps its command and commit and records the rescoring's."""
    report = json.loads(path.read_text())
    if report["truth"]["sizes"] != truth["sizes"]:
        raise SystemExit(f"{path} was made on another cohort (give the same --n, --allocation and --seed)")
    for method, kept in report["runs"].items():
        if "score" not in kept:
            continue
        run = json.loads((data_dir / f"run-{method}.json").read_text())
        if abs(float(run["wall_s"]) - float(kept["wall_s"])) > 1e-6:
            raise SystemExit(f"{data_dir}/run-{method}.json is not the run of {path} (wall time "
                             f"{run['wall_s']:.1f} s against {kept['wall_s']:.1f} s)")
        kept["score"] = score(run, truth)
    report["rescored"] = {"command": " ".join(["python", *sys.argv]), "commit": commit()}
    path.write_text(json.dumps(report, indent=1))
    path.with_suffix(".md").write_text(markdown(report))


def heatmap(profiles, weights, names, path: Path, title: str) -> Path:
    """Scaled difference between each cluster's prevalence and the population's (the paper's Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prof = np.asarray(profiles)[:, 1::2]            # P(yes) of every condition
    w = np.asarray(weights)
    pop = w @ prof
    scaled = (prof - pop[None, :]) / np.sqrt(pop * (1 - pop))[None, :]
    order = np.argsort(-w)
    fig, ax = plt.subplots(figsize=(16, 0.3 * len(order) + 2))
    lim = np.nanpercentile(np.abs(scaled), 99)
    im = ax.imshow(scaled[order], aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.set_yticks(range(len(order)), [f"{k + 1} ({w[c]:.1%})" for k, c in enumerate(order)], fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.02, label="(cluster - population) / sd of population prevalence")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _startup_lines(report: dict) -> list[str]:
    if "startup" not in report["runs"]:
        return []
    st = report["runs"]["startup"]
    return ["", f"Start-up of the process pool ({st['n_silos']} silos, --jobs {st['jobs']}): {st['startup_s']:.1f} s; "
                f"reading one silo {st['read_csv_s_per_silo']:.2f} s and its hello {st['hello_s_per_silo']:.2f} s "
                f"(medians, one process; all silos one after the other "
                f"{st['read_and_hello_all_silos_one_process_s']:.1f} s)."]


def markdown(report: dict) -> str:
    sizes = report["truth"]["sizes"]
    methods = [m for m in report["runs"] if "score" in report["runs"][m]]
    lines = [f"# EHR-scale benchmark ({report['allocation']} allocation, n = {report['n']:,})", "",
             f"Command: `{report['command']}` at commit `{report['commit']}`; {report['cores']} cores.", "",
             *[line for c in report.get("earlier_commands", [])
               for line in (f"Earlier runs kept in this file (`--keep-runs`): `{c}`; each run's commit is in the JSON.",
                            "")],
             *([f"Scores recomputed from the same runs' labels: `{report['rescored']['command']}` at commit "
                f"`{report['rescored']['commit']}`.", ""] if "rescored" in report else []),
             "| | " + " | ".join(methods) + " |", "| --- | " + " | ".join("---" for _ in methods) + " |"]

    if not methods:  # --methods startup alone: no fit, no tables
        lines = lines[:3]

    if not methods:  # --methods startup alone: no fit, no tables
        return "\n".join(lines[:4] + _startup_lines(report)) + "\n"

    def row(label, fn):
        lines.append(f"| {label} | " + " | ".join(fn(report["runs"][m]) for m in methods) + " |")

    row("wall time (s)", lambda r: f"{r['wall_s']:.0f}")
    row("clusters K", lambda r: str(r["score"]["n_clusters"]))
    row("ARI", lambda r: f"{r['score']['ari']:.3f}")
    row("recovered (best F1 >= 0.8)", lambda r: str(len(r["score"]["recovered"])))
    row("fragments (extra pieces of a true cluster)",
        lambda r: str(sum(max(int(p) - 1, 0) for p in r["score"]["pieces"])))
    row("of which single-silo fragments", lambda r: str(len(r["score"].get("single_silo_fragments", []))))
    row("peak memory (MB)", lambda r: f"{r.get('peak_rss_mb', r.get('server_peak_rss_mb', float('nan'))):.0f}")
    lines += ["", "Best F1 of every true cluster (Table 7 sizes):", "",
              "| cluster | size | " + " | ".join(methods) + " |", "| --- | --- | " +
              " | ".join("---" for _ in methods) + " |"]
    for c, n in enumerate(sizes):
        lines.append(f"| {c + 1} | {n:,} | " + " | ".join(f"{report['runs'][m]['score']['best_f1'][c]:.2f}"
                                                      for m in methods) + " |")
    for m in methods:
        sc = report["runs"][m]["score"]
        if "estimated_sizes" not in sc:
            continue
        spread = [f"; in {a} silos, at most {b} in one" for a, b in
                  zip(sc["estimated_any_silo"], sc["estimated_largest_silo"], strict=True)] if (
            "estimated_any_silo" in sc) else [""] * len(sc["estimated_sizes"])
        lines += ["", f"{m}: estimated clusters (size; silos holding 10 or more of its members"
                      f"{'; silos holding any, most in one silo' if 'estimated_any_silo' in sc else ''}; true cluster "
                      "of most of its members):", "",
                  ", ".join(f"{c + 1}: {n:,}; {k} silos{sp}; true {t}" for c, (n, k, sp, t) in
                            enumerate(zip(sc["estimated_sizes"], sc["estimated_silos"], spread,
                                          sc["estimated_majority"], strict=True)) if n > 0)]
    lines += _startup_lines(report)
    if "vcmc" in report["runs"] and "timings_s" in report["runs"]["vcmc"]:
        v = report["runs"]["vcmc"]
        ratio = v.get("labelling_and_assessment_over_apply")
        mc = v.get("labelling_monte_carlo")
        lines += ["", "VCMC stages (s): " + ", ".join(f"{k} {x:.1f}" for k, x in v["timings_s"].items()),
                  *([f"Silo-side labelling and assessment together: {ratio:.1%} of the apply step (same run)."]
                    if ratio is not None else []),
                  *([f"Labelling averaged {sorted(set(mc['draws_per_silo'].values()))} draws per silo; largest "
                     f"Monte Carlo standard error of a membership {mc['max_error']:.3f} (target {mc['target']})."]
                    if mc else []),
                  f"Server peak memory {v['server_peak_rss_mb']:.0f} MB, worker peak {v['worker_peak_rss_mb']:.0f} MB; "
                  f"draws sent per silo: {sorted(set(int(x) for x in v.get('draws_sent', {}).values() if x))}.",
                  "", f"The fit's report: [report-{report['tag']}/report.html](report-{report['tag']}/report.html) "
                  f"(characterisation table: report-{report['tag']}/characterisation.csv)."]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------- main
def main() -> None:
    from vcmc.config import AggregationConfig

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=289_821)
    ap.add_argument("--allocation", default="uniform", choices=("uniform", "region"))
    ap.add_argument("--iterations", type=int, default=50_000)
    ap.add_argument("--burn-in", type=int, default=None)
    ap.add_argument("--thin", type=int, default=5)
    ap.add_argument("--stop", default="fixed", choices=("fixed", "converged"),
                    help="converged: vcmc fit --iterations auto (--iterations is then the maximum)")
    ap.add_argument("--components", type=int, default=30)
    ap.add_argument("--summary-draws", type=int, default=1000,
                    help="most draws a silo sends (PostprocessConfig.summary_draws, the library default; 0: all)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="seed of the cohort (and of the fits unless --fit-seed)")
    ap.add_argument("--fit-seed", type=int, default=None,
                    help="seed of the fits (default --seed): the same cohort fitted again with another seed, for "
                         "the reference's seed-to-seed agreement")
    ap.add_argument("--rounds", type=int, default=1,
                    help="vcmc fit --rounds (aggregation.rounds; default 1 here: the one-shot pass, the run issue "
                         "24's targets are measured on; 0: the library's default, auto: at the paper's protocol the "
                         "same as --rounds 10000 --round-components 30 --round-split-merge true)")
    ap.add_argument("--round-components", type=int, default=0,
                    help="aggregation.round_components (0: the library's default)")
    ap.add_argument("--round-anneal", type=float, default=1.0, help="aggregation.round_anneal (default 1)")
    ap.add_argument("--round-split-merge", choices=["true", "false"], default="false",
                    help="aggregation.round_split_merge (default false)")
    ap.add_argument("--round-births", type=float, default=AggregationConfig().round_births,
                    help="aggregation.round_births (default: the library's)")
    ap.add_argument("--methods", default="vcmc,full-mcmc,fedmerdel")
    ap.add_argument("--out", default="docs/results/ehr")
    ap.add_argument("--data", default=None, help="folder for the silo files (default: a temporary folder)")
    ap.add_argument("--copy-below", type=int, default=None, metavar="N",
                    help="the rounds' start: copy a (silo, cluster) pair only where the silo holds fewer than N of the "
                         "cluster's rows (default: the library's, vcmc.rounds.stage.START_COPY_BELOW; 0: every pair)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--report-dir", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true",
                    help="also run VCMC once in this process under cProfile: OUT/profile-<tag>.{md,json}")
    ap.add_argument("--tag", default=None, help="name of the output files (default: the allocation, -auto)")
    ap.add_argument("--rescore", action="store_true",
                    help="score again the runs of OUT/ehr-<tag>.json from their labels kept in --data "
                         "(run-<method>.json, the same run: its wall time is checked), and rewrite the report")
    ap.add_argument("--keep-runs", action="store_true",
                    help="keep the other methods' runs already in OUT/ehr-<allocation>.json (same cohort and "
                         "protocol): re-run one method without re-running the others")
    args = ap.parse_args()
    if args.fit_seed is None:
        args.fit_seed = args.seed
    if args.burn_in is None:
        from vcmc.config.options import AUTO_BURN_IN

        args.burn_in = min(AUTO_BURN_IN, args.iterations // 2) if args.stop == "converged" else args.iterations // 2
    tag = args.tag or args.allocation + ("-auto" if args.stop == "converged" else "")

    if args.worker and args.copy_below is not None:
        from rounds_plans import copy_below_start

        from vcmc.rounds import stage

        stage.start_components = copy_below_start(args.copy_below)
    if args.worker:                       # one method in this process: its peak memory is its own
        out = WORKERS[args.worker](args, Path(args.data))
        Path(args.data, f"run-{args.worker}.json").write_text(json.dumps(out))
        return

    from vcmc.research.ehr import simulate_ehr

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = None
    if args.data is None:
        tmp = tempfile.TemporaryDirectory(prefix="vcmc-ehr-")
        data_dir = Path(tmp.name)
    else:
        data_dir = Path(args.data)
        data_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = simulate_ehr(n=args.n, allocation=args.allocation, rng=args.seed)
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    data.write(data_dir)
    t_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    silos, _ = _pooled(data_dir)
    t_read = time.perf_counter() - t0
    del silos
    truth = {"labels": {s.name: lab.tolist() for s, lab in zip(data.silos, data.labels, strict=True)},
             "sizes": np.bincount(data.pooled_labels, minlength=data.n_clusters).tolist()}
    report = {"benchmark": "ehr", "tag": tag, "command": " ".join(["python", *sys.argv]), "commit": commit(),
              "cores": os.cpu_count(), "n": args.n, "allocation": args.allocation, "n_silos": data.n_silos,
              "protocol": {"iterations": args.iterations, "burn_in": args.burn_in, "thin": args.thin, "stop": args.stop,
                           "components": args.components, "summary_draws": args.summary_draws, "jobs": args.jobs,
                           "seed": args.seed, **({"fit_seed": args.fit_seed} if args.fit_seed != args.seed else {}),
                           **({"rounds": args.rounds, "round_components": args.round_components,
                                                  "round_anneal": args.round_anneal,
                                                  "round_split_merge": args.round_split_merge == "true",
                                                  "round_births": args.round_births}
                                                 if args.rounds != 1 else {})},
              "data_s": {"simulate": t_sim, "write_csv": t_write, "read_and_encode": t_read},
              "truth": {"sizes": truth["sizes"]}, "runs": {}}
    previous = out_dir / f"ehr-{tag}.json"
    if args.keep_runs and previous.exists():
        # runs of other methods made earlier on the same cohort and protocol stay, each with its own commit
        old = json.loads(previous.read_text())
        if all(old.get(k) == report[k] for k in ("n", "allocation", "protocol")):
            report["runs"] = old["runs"]
            report["earlier_commands"] = [*old.get("earlier_commands", []), old["command"]]
    names = [v.name for v in data.schema.variables]
    if args.rescore:
        _rescore(out_dir / f"ehr-{tag}.json", data_dir, truth)
        return
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        cmd = [sys.executable, __file__, "--worker", method, "--data", str(data_dir),
               *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                 if k in ("iterations", "burn_in", "thin", "stop", "components", "summary_draws", "jobs", "seed",
                          "fit_seed", "rounds", "round_components", "round_anneal", "round_split_merge",
                          "round_births", "copy_below") and v is not None],
               *(["--report-dir", str(out_dir / f"report-{tag}")] if method == "vcmc" else [])]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, text=True)
        if proc.returncode != 0:
            report["runs"][method] = {"error": f"exit code {proc.returncode}"}
            continue
        run = json.loads((data_dir / f"run-{method}.json").read_text())
        run["process_wall_s"] = time.perf_counter() - t0
        run["commit"] = report["commit"]
        if method == "startup":  # no fit: nothing to score
            report["runs"][method] = run
            (out_dir / f"ehr-{tag}.json").write_text(json.dumps(report, indent=1))
            (out_dir / f"ehr-{tag}.md").write_text(markdown(report))
            print(f"startup: pool {run['startup_s']:.1f} s; per silo read {run['read_csv_s_per_silo']:.2f} s, "  # noqa: T201
                  f"hello {run['hello_s_per_silo']:.2f} s", flush=True)
            continue
        run["score"] = score(run, truth)
        heatmap(run["profiles"], run["weights"], names, out_dir / f"heatmap-{tag}-{method}.png",
                f"{method}: scaled difference of prevalence, cluster vs population")
        for key in ("labels", "profiles"):
            run.pop(key)
        report["runs"][method] = run
        (out_dir / f"ehr-{tag}.json").write_text(json.dumps(report, indent=1))
        (out_dir / f"ehr-{tag}.md").write_text(markdown(report))
        print(f"{method}: {run['wall_s']:.0f} s, K = {run['score']['n_clusters']}, ARI = "  # noqa: T201
              f"{run['score']['ari']:.3f}, recovered {run['score']['recovered']}", flush=True)
    if args.profile:
        cmd = [sys.executable, __file__, "--worker", "profile", "--data", str(data_dir),
               *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                 if k in ("iterations", "burn_in", "thin", "stop", "components", "summary_draws", "jobs", "seed",
                          "fit_seed")]]
        if subprocess.run(cmd, text=True).returncode == 0:
            prof = json.loads((data_dir / "run-profile.json").read_text())
            prof.update({k: report[k] for k in ("command", "commit", "cores", "n", "allocation", "n_silos",
                                                 "protocol")})
            (out_dir / f"profile-{tag}.json").write_text(json.dumps(prof, indent=1))
            (out_dir / f"profile-{tag}.md").write_text(profile_markdown(report, prof))
            print(f"profile: {prof['wall_s']:.0f} s -> {out_dir / f'profile-{tag}.md'}", flush=True)  # noqa: T201
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
