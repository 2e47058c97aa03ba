"""Wall time of a whole VCMC run against full-data MCMC on the same simulated dataset (target:
VCMC at most half the wall time of full-data MCMC at the paper's protocol; the paper: 1940 s vs 4338 s).

Both methods run in this process tree on the same machine, one after the other, several times; the
figure reported is the median ratio of VCMC to full-MCMC wall time, plus the stage timings. Prints one
JSON line.

    python benchmarks/end_to_end.py --iterations 50000 --repeats 3 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--design", default="nested")
    ap.add_argument("--separability", default="easy")
    ap.add_argument("--iterations", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from vcmc.api import fit
    from vcmc.config import FitConfig, SamplerConfig
    from vcmc.metrics import adjusted_rand_index
    from vcmc.research.simulate import simulate_design

    cfg = FitConfig(sampler=SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2))
    warm = FitConfig(sampler=SamplerConfig(n_iter=200, burn_in=100))
    data = simulate_design(args.design, args.separability, rng=args.seed)
    truth = np.concatenate(data.labels)
    fit(data, config=warm, rng=0, jobs=args.jobs)               # compile / load caches in every worker
    fit(data, config=warm, rng=0, method="full-mcmc")
    rows = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        v = fit(data, config=cfg, rng=100 + r, jobs=args.jobs)
        tv = time.perf_counter() - t0
        t0 = time.perf_counter()
        f = fit(data, config=cfg, rng=100 + r, method="full-mcmc")
        tf = time.perf_counter() - t0
        rows.append({"vcmc_s": tv, "full_mcmc_s": tf, "ratio": tv / tf,
                     "vcmc_stages_s": {k: round(x, 3) for k, x in v.timings.items()},
                     "vcmc_clusters": v.n_clusters, "full_clusters": f.n_clusters,
                     "vcmc_ari": adjusted_rand_index(np.concatenate(v.assignments), truth),
                     "full_ari": adjusted_rand_index(np.concatenate(f.assignments), truth)})
    print(json.dumps({  # noqa: T201
        "benchmark": "end_to_end", "design": args.design, "separability": args.separability,
        "iterations": args.iterations, "jobs": args.jobs, "cores": os.cpu_count(),
        "median_vcmc_s": statistics.median(r["vcmc_s"] for r in rows),
        "median_full_mcmc_s": statistics.median(r["full_mcmc_s"] for r in rows),
        "median_ratio": statistics.median(r["ratio"] for r in rows), "runs": rows}))


if __name__ == "__main__":
    main()
