"""The global-informed rounds on simulated designs: the generalisation suite's and the paper's six scenarios.

For each design and replicate: the one-shot VCMC pass, the same pass followed by ``--rounds R`` for each R
asked, and full-data MCMC on the pooled rows (the reference), all with the suite's protocol (10,000
iterations, burn-in 5,000, thinning 5, C+ = 15) and the library's defaults otherwise; ARI to the true
partition and K. The suite's pass rule on ARI: ΔARI = ARI - full MCMC's ARI >= -0.03 (docs/results/
generalisation/).

    python benchmarks/rounds_designs.py --designs sparse-25/medium sparse-40/poor thirty-sparse/easy \\
        --rounds 500 2000 --replicates 3 --out docs/results/real/rounds
    python benchmarks/rounds_designs.py --designs paper --rounds 2000 --replicates 5 --name paper-designs
    python benchmarks/rounds_designs.py --designs paper --rounds 2000 --round-labels pooled silo --replicates 5
    python benchmarks/rounds_designs.py --designs <the 12> --rounds 2000 --round-labels silo --split-merge-only \
        --round-components cplus --name suite-cplus-split-merge    # the rounds started within C+ components

``--designs paper`` stands for the paper's six scenarios (``homogeneous/easy`` ... ``non-nested/poor``: 4 silos x
1,000 rows, 10 variables, C+ = 15, ``vcmc.research.simulate.simulate_design``); their paper's VCMC and full-MCMC
ARIs (Table 3) are printed beside.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _provenance import commit  # noqa: E402


def main(argv=None) -> None:
    import vcmc
    from vcmc.config import AggregationConfig, FitConfig, PriorConfig, SamplerConfig
    from vcmc.metrics import adjusted_rand_index
    from vcmc.research.study.designs import GENERALISATION_DESIGNS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", nargs="+", default=["sparse-25/medium", "sparse-40/poor", "thirty-sparse/easy"],
                    choices=[*GENERALISATION_DESIGNS, *PAPER_SCENARIOS, "paper"])
    ap.add_argument("--name", default="designs", help="output files OUT/NAME.{json,md} (default designs)")
    ap.add_argument("--rounds", nargs="+", type=int, default=[500, 2000])
    ap.add_argument("--round-labels", nargs="+", default=["pooled"], choices=["pooled", "silo"],
                    help="aggregation.round_labels of the rounds' runs (each asked: one run per R; 'silo' runs are "
                         "labelled rounds-R-silo)")
    ap.add_argument("--split-merge", action="store_true",
                    help="also run each R with aggregation.round_split_merge (labelled rounds-R[-labels]-sm)")
    ap.add_argument("--split-merge-only", action="store_true",
                    help="run each R only with aggregation.round_split_merge (not also without)")
    ap.add_argument("--round-components", default="0",
                    help="aggregation.round_components: a number (0: the library's default, 4 C+) or 'cplus' (the "
                         "design's C+, the model full-data MCMC samples)")
    ap.add_argument("--copy-below", type=int, default=None, metavar="N",
                    help="the rounds' start: copy a (silo, cluster) pair only where the silo holds fewer than N of the "
                         "cluster's rows (default: the library's, vcmc.rounds.stage.START_COPY_BELOW; 0: every "
                         "pair), in this process")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("docs/results/real/rounds"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.copy_below is not None:
        from rounds_plans import copy_below_start

        from vcmc.rounds import stage

        stage.start_components = copy_below_start(args.copy_below)
    out = {"command": " ".join(["rounds_designs.py", *(argv or sys.argv[1:])]), "commit": commit(),
           "iterations": args.iterations, "designs": {}}
    path = args.out / f"{args.name}.json"
    names = [d for name in args.designs for d in (PAPER_SCENARIOS if name == "paper" else [name])]
    for name in names:
        design = GENERALISATION_DESIGNS.get(name) or _PaperScenario(name)
        rows = []
        for rep in range(args.replicates):
            data = design.simulate(rng=1000 + rep)
            truth = np.concatenate(data.labels)
            sampler = SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2, thin=5)
            prior = PriorConfig(n_components=design.n_components)
            start = design.n_components if args.round_components == "cplus" else int(args.round_components)
            row = {"replicate": rep}
            runs = [("full-mcmc", "full-mcmc", 1, "pooled", False), ("one-shot", "vcmc", 1, "pooled", False),
                    *((f"rounds-{r}" + ("" if lab == "pooled" else f"-{lab}") + ("-sm" if sm else ""), "vcmc", r,
                       lab, sm)
                      for r in args.rounds for lab in args.round_labels
                      for sm in ((True,) if args.split_merge_only else
                                 (False, True) if args.split_merge else (False,)))]
            for label, method, rounds, labels, sm in runs:
                cfg = FitConfig(prior=prior, sampler=sampler,
                                aggregation=AggregationConfig(rounds=rounds, round_labels=labels,
                                                              round_split_merge=sm, round_components=start))
                t0 = time.perf_counter()
                res = vcmc.fit(data, config=cfg, method=method, rng=rep + 1, jobs=args.jobs, show_progress=False)
                secs = time.perf_counter() - t0
                ari = adjusted_rand_index(truth, np.concatenate(res.assignments))
                row[label] = {"ari": ari, "k": int(res.n_clusters), "seconds": round(secs, 1)}
                print(f"{name:22s} rep {rep} {label:12s} K={res.n_clusters:3d} ARI={ari:.3f} {secs:.0f}s", flush=True)
            rows.append(row)
        out["designs"][name] = {"about": design.description, "replicates": rows}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=2))
        os.replace(tmp, path)
    (args.out / f"{args.name}.md").write_text(markdown(out))


PAPER_SCENARIOS = ("homogeneous/easy", "homogeneous/poor", "nested/easy", "nested/poor", "non-nested/easy",
                   "non-nested/poor")


class _PaperScenario:
    """One of the paper's six scenarios in the interface of a generalisation design."""

    n_components = 15      # the paper's C+

    def __init__(self, name: str):
        self.name = name
        self.design, self.separability = name.split("/")
        self.description = f"the paper's {name} (4 silos x 1,000 rows, 10 variables)"

    def simulate(self, rng):
        from vcmc.research.simulate import simulate_design

        return simulate_design(self.design, self.separability, rng=rng, n_per_silo=1000)


def markdown(out: dict) -> str:
    labels = None
    lines = [f"Command: `{out['command']}` at commit {out['commit']}; {out['iterations']} iterations, burn-in half, "
             "thinning 5. Means over replicates; ΔARI against full MCMC on the same data (suite's pass: >= -0.03).", ""]
    for name, d in out["designs"].items():
        reps = d["replicates"]
        labels = [k for k in reps[0] if k != "replicate"]
        if len(lines) == 2:
            lines += ["| design | method | ARI | ΔARI | K (full MCMC's) | seconds |",
                      "| --- | --- | --- | --- | --- | --- |"]
        full = np.mean([r["full-mcmc"]["ari"] for r in reps])
        full_k = np.mean([r["full-mcmc"]["k"] for r in reps])
        for i, lab in enumerate(labels):
            ari = np.mean([r[lab]["ari"] for r in reps])
            k = np.mean([r[lab]["k"] for r in reps])
            secs = np.mean([r[lab]["seconds"] for r in reps])
            head = f"{name} ({len(reps)} replicates)" if i == 0 else ""
            lines.append(f"| {head} | {lab} | {ari:.3f} | {ari - full:+.3f} | {k:.1f} ({full_k:.1f}) | {secs:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
