"""Speed of a silo's half of a global-informed round (issue 19/24): one sweep of its rows' allocations and the
memberships under the silo's own weights, milliseconds per round.

One silo of the application's cohort (``vcmc.research.ehr.simulate_ehr``, 289,821 people in 30 silos: its first
silo, about 9,650 people, 80 binary conditions), 30 components (the rounds' C+ start), a draw of the server
shaped like a fitted one (prevalences Beta(0.5, 8), weights Dirichlet(1)), the layout the silo's rounds use.
Times, per repetition, ``--rounds`` calls of ``vcmc.mcmc.sampler.round_kernels.sweep_patterns`` (a burn-in
round: no memberships kept) and of ``accumulate_patterns`` (what a kept round adds under
``aggregation.round_labels = "silo"``, the default); the median of ``--runs`` repetitions is reported (CPU
time of the process).

With ``--against DIR`` (another checkout, e.g. ``git worktree add ../base <commit>``) the same is timed
alternately in a fresh process of this checkout and of DIR, ``--runs`` times each, in an order that swaps every
run; ``ratio_*`` are medians of the per-alternation ratios this / DIR (both sides see the same load).

    python benchmarks/round_sweep.py [--runs 5] [--rounds 50]
    python benchmarks/round_sweep.py --against DIR [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

_SNIPPET = r"""
import json, sys
sys.path.insert(0, {bench!r})
import round_sweep, vcmc
print(json.dumps({{"vcmc": vcmc.__file__, **round_sweep.time_once({rounds}, {runs})}}))
"""


def _silo():
    from vcmc.research.ehr import simulate_ehr

    data = simulate_ehr(rng=1)
    silo = data.silos[0]
    return np.ascontiguousarray(silo.codes, dtype=np.int16), [int(m) for m in silo.n_modalities]


def time_once(rounds: int, runs: int) -> dict:
    """Median CPU milliseconds of one burn-in sweep and of one kept round's own-weight memberships."""
    from vcmc.mcmc.sampler.layout import by_exception_count, sparse_layout
    from vcmc.model import profile_offsets
    try:
        from vcmc.mcmc.sampler.round_kernels import accumulate_patterns, sweep_patterns
        order = by_exception_count          # the layout vcmc.rows.rounds.start builds
    except ImportError:     # a checkout before 89c900b (--against): the kernels lived in vcmc.silo
        from vcmc.silo.round_kernels import accumulate_patterns, sweep_patterns
        order = lambda layout: layout       # noqa: E731 - its rounds used the layout as built

    codes, n_mod = _silo()
    off = profile_offsets(n_mod)
    lay = order(sparse_layout(codes, off))
    c = 30
    rng = np.random.default_rng(0)
    prof = np.empty((c, int(off[-1])))
    for q in range(len(n_mod)):           # binary conditions, low prevalences as a fitted EHR model's
        p1 = rng.beta(0.5, 8.0, size=c)
        prof[:, off[q]], prof[:, off[q] + 1] = 1.0 - p1, p1
    log_prof, log_pi = np.log(prof), np.log(rng.dirichlet(np.ones(c)))
    z = rng.integers(0, c, codes.shape[0])
    summed, summed_sq = np.zeros((lay.n_patterns, c)), np.zeros((lay.n_patterns, c))
    uniforms = rng.random(codes.shape[0])
    layout = (lay.pat_start, lay.row_of, lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col)

    def sweep():
        sweep_patterns(*layout, log_pi, log_prof, uniforms, False, summed, summed_sq, z)

    def own():
        accumulate_patterns(lay.pat_start, lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col, log_pi,
                            log_prof, summed, summed_sq)

    out = {"rows": int(codes.shape[0]), "patterns": int(lay.n_patterns), "components": c}
    for name, fn in (("sweep_ms", sweep), ("own_memberships_ms", own)):
        fn()                                  # compiled (or loaded from the cache) outside the timing
        reps = []
        for _ in range(runs):
            t0 = time.process_time()
            for _ in range(rounds):
                fn()
            reps.append((time.process_time() - t0) / rounds * 1e3)
        out[name] = round(float(np.median(reps)), 3)
    return out


def main(argv=None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _provenance import commit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--against", default=None, metavar="DIR")
    args = ap.parse_args(argv)
    head = {"benchmark": "round-sweep", "command": " ".join(["python", *sys.argv]), "commit": commit()}
    if not args.against:
        print(json.dumps({**head, **time_once(args.rounds, args.runs)}))   # noqa: T201
        return
    here = Path(__file__).resolve().parent.parent
    trees = {"this": here, "other": Path(args.against).resolve()}
    times: dict[str, list[dict]] = {"this": [], "other": []}
    for r in range(args.runs):
        for side in (("this", "other") if r % 2 == 0 else ("other", "this")):
            env = dict(os.environ, PYTHONPATH=str(trees[side] / "src"))
            code = _SNIPPET.format(bench=str(here / "benchmarks"), rounds=args.rounds, runs=1)
            out = json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                            text=True).stdout.strip().splitlines()[-1])
            if not out["vcmc"].startswith(str(trees[side])):
                raise RuntimeError(f"the {side} run imported vcmc from {out['vcmc']}, not {trees[side]}")
            times[side].append(out)
    report = {**head, "other": str(trees["other"]), "runs": times}
    for key in ("sweep_ms", "own_memberships_ms"):
        ratios = [a[key] / b[key] for a, b in zip(times["this"], times["other"], strict=True)]
        report[f"ratio_{key}"] = round(float(np.median(ratios)), 3)
        report[f"this_{key}"] = float(np.median([t[key] for t in times["this"]]))
        report[f"other_{key}"] = float(np.median([t[key] for t in times["other"]]))
    print(json.dumps(report))   # noqa: T201


if __name__ == "__main__":
    main()
