"""Time saved by ``--iterations auto`` at equal accuracy, on the paper's designs and the generalisation suite.

For every design and replicate the same data and seed are fitted twice, one run after the other in this
process: the paper's fixed protocol (50,000 iterations, burn-in 25,000, thinning 5) and ``--iterations auto``
(at most 50,000 iterations, burn-in 5,000, R-hat <= 1.01 and ESS >= 400). Reported per design: median
sampler seconds of each, their ratio, iterations the auto chains ran (median and max over silos), silos that
did not converge, and the accuracy of both (ARI against the truth, number of clusters). Writes
``OUT/auto-iterations.json`` and ``OUT/auto-iterations.md`` with the command line and the commit.

    python benchmarks/auto_iterations.py                                  # the paper's six designs, 3 reps
    python benchmarks/auto_iterations.py --designs generalisation --replicates 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _provenance import commit


def _designs(which: str):
    """(name, simulate(rng), C+) of the paper's six designs or of the generalisation suite."""
    from vcmc.config import PriorConfig
    from vcmc.research.simulate import DESIGNS, simulate_design

    if which == "paper":
        return [(f"{d}/{s}", lambda rng, d=d, s=s: simulate_design(d, s, rng=rng), PriorConfig().n_components)
                for d in DESIGNS for s in ("easy", "poor")]
    from vcmc.research.study.designs import GENERALISATION_DESIGNS

    return [(name, d.simulate, d.n_components) for name, d in GENERALISATION_DESIGNS.items()]


def _one(data, config, seed, jobs):
    from vcmc.api import fit
    from vcmc.metrics import adjusted_rand_index

    t0 = time.perf_counter()
    res = fit(data, config=config, rng=seed, jobs=jobs)
    wall = time.perf_counter() - t0
    local = res.diagnostics["local"]
    return {"wall_s": wall, "sampler_s": sum(d["seconds_sampler"] for d in local.values()),
            "iterations": [d["iterations_run"] for d in local.values()],
            "not_converged": sum(1 for d in local.values() if d.get("converged") == 0.0),
            # the stopping rule's log-posterior targets, read off the pooled diagnostics of any run
            "lp_targets_met": sum(1 for d in local.values() if d["rhat_log_posterior"] <= 1.01
                                  and min(d["ess_bulk_log_posterior"], d["ess_tail_log_posterior"]) >= 400),
            "n_silos": len(local),
            "n_clusters": res.n_clusters,
            "ari": adjusted_rand_index(np.concatenate(res.assignments), np.concatenate(data.labels))}


def markdown(report: dict) -> str:
    lines = [f"# `--iterations auto` against the fixed protocol ({report['designs']})", "",
             f"`{report['command']}` at commit `{report['commit']}`, {report['cores']} cores, "
             f"{report['replicates']} replicate(s). Sampler seconds summed over silos; medians over replicates.",
             "'not converged': auto chains that reached the maximum first; 'log-posterior targets met': silos "
             "whose pooled log-posterior R-hat <= 1.01 and bulk and tail ESS >= 400, fixed / auto.", "",
             "| design | fixed s | auto s | auto/fixed | auto iterations (median, max) | not converged | "
             "log-posterior targets met | ARI fixed | ARI auto | K fixed | K auto |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in report["results"].items():
        f = [r["fixed"] for r in rows]
        a = [r["auto"] for r in rows]
        its = [i for r in a for i in r["iterations"]]

        def med(xs, key):
            return statistics.median(x[key] for x in xs)
        lines.append(f"| {name} | {med(f, 'sampler_s'):.1f} | {med(a, 'sampler_s'):.1f} | "
                     f"{statistics.median(y['sampler_s'] / x['sampler_s'] for x, y in zip(f, a, strict=True)):.2f} | "
                     f"{statistics.median(its):.0f}, {max(its):.0f} | {sum(x['not_converged'] for x in a)} of "
                     f"{sum(x['n_silos'] for x in a)} | {sum(x['lp_targets_met'] for x in f)} / "
                     f"{sum(x['lp_targets_met'] for x in a)} | "
                     f"{med(f, 'ari'):.3f} | {med(a, 'ari'):.3f} | {med(f, 'n_clusters'):.0f} | "
                     f"{med(a, 'n_clusters'):.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--designs", default="paper", choices=("paper", "generalisation"))
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=50_000, help="fixed run, and the cap of the auto run")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="docs/results/auto-iterations")
    args = ap.parse_args()

    from vcmc.config import FitConfig, PriorConfig, SamplerConfig
    from vcmc.config.options import AUTO_BURN_IN

    fixed = SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2)
    auto = SamplerConfig(n_iter=args.iterations, burn_in=min(AUTO_BURN_IN, args.iterations // 2), stop="converged")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "auto_iterations", "command": " ".join([sys.executable, *sys.argv]),
              "commit": commit(), "cores": os.cpu_count(), "designs": args.designs,
              "replicates": args.replicates, "results": {}}
    for name, simulate, n_components in _designs(args.designs):
        prior = PriorConfig(n_components=n_components)
        rows = []
        for r in range(args.replicates):
            data = simulate(args.seed + r)
            seed = 1000 * args.seed + r
            rows.append({"fixed": _one(data, FitConfig(prior=prior, sampler=fixed), seed, args.jobs),
                         "auto": _one(data, FitConfig(prior=prior, sampler=auto), seed, args.jobs)})
            print(name, r, json.dumps({k: {m: v[m] for m in ("sampler_s", "ari", "n_clusters")}  # noqa: T201
                                       for k, v in rows[-1].items()}), flush=True)
        report["results"][name] = rows
        (out / f"auto-iterations-{args.designs}.json").write_text(json.dumps(report, indent=1))
        (out / f"auto-iterations-{args.designs}.md").write_text(markdown(report))


if __name__ == "__main__":
    main()
