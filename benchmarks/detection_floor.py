"""Detection floor of the silos' local samplers on the application-shaped cohort (issue: small clusters).

A federated fit can only report a cluster that at least one silo's own posterior separates: the matching
links local clusters, it cannot create them. This benchmark measures, on the synthetic cohort of
``vcmc.research.ehr`` (27 clusters of Table 7's sizes, 80 binary conditions, 30 silos of about 9,700 people), which
true clusters a silo's local sampler separates as a function of how many members the cluster has *in that
silo*: each of ``--silos`` silos runs the apply step exactly as in a federated fit (C+ = 30, the prior
fractionated over the 30 silos), and every true cluster is scored by its best F1 against the local
partition (recovered when >= 0.8). With the uniform allocation a cluster of size N has about N / 30 members
in every silo, so the 27 clusters span per-silo sizes from about 4,600 down to 1.

The same cluster pooled (full-data MCMC, ``benchmarks/ehr.py``) has 30 times the members: the gap between
the two floors is the federated cost that no matching can repair. Writes ``OUT/detection-floor.json`` and
``OUT/detection-floor.md``.

    python benchmarks/detection_floor.py                      # 3 silos, the paper's protocol
    python benchmarks/detection_floor.py --iterations 4000 --silos 1 --n 60000   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from _provenance import commit


def markdown(report: dict) -> str:
    rows = report["clusters"]
    lines = [f"# Detection floor of a silo's local sampler ({report['allocation']} allocation)", "",
             f"`{report['command']}` at commit `{report['commit']}`; cohort n = {report['n']:,} in "
             f"{report['n_silos']} silos; {report['protocol']['iterations']:,} iterations (burn-in "
             f"{report['protocol']['burn_in']:,}, thin {report['protocol']['thin']}), C+ = "
             f"{report['protocol']['components']}; silos scored: {', '.join(report['silos_scored'])}.", "",
             "Best F1 of each true cluster against the local partition of each scored silo (recovered when "
             ">= 0.8).", "",
             "| true cluster | cohort size | members per scored silo | best F1 per silo | recovered in |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['cluster']} | {r['size']:,} | {', '.join(str(m) for m in r['members'])} | "
                     f"{', '.join(f'{f:.2f}' for f in r['best_f1'])} | {r['recovered']} of {len(r['best_f1'])} |")
    lines += ["", f"**Floor**: every cluster with at least {report['floor_all']} members in a silo was recovered "
              f"there; the smallest recovered had {report['smallest_recovered']} members; the largest missed "
              f"had {report['largest_missed']}.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=289_821)
    ap.add_argument("--allocation", default="uniform", choices=("uniform", "region"))
    ap.add_argument("--silos", type=int, default=3, help="how many silos to score (the first ones)")
    ap.add_argument("--iterations", type=int, default=50_000)
    ap.add_argument("--burn-in", type=int, default=None)
    ap.add_argument("--thin", type=int, default=5)
    ap.add_argument("--components", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="docs/results/ehr")
    args = ap.parse_args()
    burn_in = args.iterations // 2 if args.burn_in is None else args.burn_in

    from vcmc._rng import spawn_generators
    from vcmc.config import PriorConfig, SamplerConfig
    from vcmc.mcmc.apply import run_apply_step
    from vcmc.metrics import best_f1
    from vcmc.research.ehr import simulate_ehr

    data = simulate_ehr(n=args.n, allocation=args.allocation, rng=args.seed)
    k_true = data.n_clusters
    prior = PriorConfig(n_components=args.components)
    sampler = SamplerConfig(n_iter=args.iterations, burn_in=burn_in, thin=args.thin)
    gens = spawn_generators(args.seed, data.n_silos)     # one stream per silo, as a federated fit has
    scored, members, f1s, seconds = [], [], [], []
    for s in range(min(args.silos, data.n_silos)):
        silo, truth = data.silos[s], data.labels[s]
        t0 = time.perf_counter()
        local = run_apply_step(silo.codes, data.n_modalities, prior=prior, sampler=sampler, n_silos=data.n_silos,
                               rng=gens[s])
        seconds.append(time.perf_counter() - t0)
        scored.append(silo.name)
        members.append(np.bincount(truth, minlength=k_true))
        f1s.append(best_f1(local.partition, truth, local.n_clusters, k_true))
        print(f"{silo.name}: {silo.n_rows} rows, {local.n_clusters} local clusters, {seconds[-1]:.0f} s, "  # noqa: T201
              f"recovered {int(np.sum(f1s[-1] >= 0.8))} of {k_true}", flush=True)
    members, f1s = np.array(members), np.array(f1s)
    sizes = np.bincount(data.pooled_labels, minlength=k_true)
    rec = f1s >= 0.8
    present = members > 0
    missed = present & ~rec
    floor_all = int(members[missed].max()) + 1 if missed.any() else int(members[present].min())
    report = {"benchmark": "detection_floor", "command": " ".join([sys.executable, *sys.argv]),
              "commit": commit(), "cores": os.cpu_count(), "n": args.n, "allocation": args.allocation,
              "n_silos": data.n_silos, "silos_scored": scored, "seconds": seconds,
              "protocol": {"iterations": args.iterations, "burn_in": burn_in, "thin": args.thin,
                           "components": args.components, "seed": args.seed},
              "floor_all": floor_all,
              "smallest_recovered": int(members[rec].min()) if rec.any() else None,
              "largest_missed": int(members[missed].max()) if missed.any() else None,
              "clusters": [{"cluster": int(c) + 1, "size": int(sizes[c]), "members": members[:, c].tolist(),
                            "best_f1": f1s[:, c].round(4).tolist(), "recovered": int(rec[:, c].sum())}
                           for c in np.argsort(-sizes)]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = args.allocation
    (out / f"detection-floor-{tag}.json").write_text(json.dumps(report, indent=1))
    (out / f"detection-floor-{tag}.md").write_text(markdown(report))
    print(markdown(report))  # noqa: T201


if __name__ == "__main__":
    main()
