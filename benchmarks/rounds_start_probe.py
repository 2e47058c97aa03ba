"""The rounds' over-complete start against a start without the silos' copies, on a generalisation design.

The default start gives every (silo, cluster) pair after the first holder its own component, below
``START_COPY_BELOW`` rows (``vcmc.rounds.stage.start_components``), so that the chain can split a cluster the
one-shot matching merged wrongly. This probe replaces it, in this process only, by the one-shot partition itself
(silo s's rows of global cluster k in component k) and runs the default fit both ways on the same data (with
``--copy-below N`` also a start of another threshold; 0: every pair copied, the start before ``START_COPY_BELOW``):

    python benchmarks/rounds_start_probe.py --design big-silos/poor --replicates 2 --out FILE.json

Prints and writes (atomically), per replicate and start, the ARI to the truth, K, whether the rounds settled, their
R-hat and the occupied K every 100 rounds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from _provenance import commit

import vcmc
import vcmc.rounds.stage as stage
from vcmc.atomic import atomic_write_text
from vcmc.config import AggregationConfig, FitConfig, PriorConfig, SamplerConfig
from vcmc.metrics import adjusted_rand_index
from vcmc.research.study.designs import GENERALISATION_DESIGNS

DEFAULT_START = stage.start_components


def without_copies(partition_counts, max_components=None):
    """The one-shot partition as the start: every silo's rows of global cluster k in component k."""
    counts = np.asarray(partition_counts)
    return np.tile(np.arange(counts.shape[1], dtype=np.int64), (counts.shape[0], 1)), counts.shape[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="big-silos/poor", choices=list(GENERALISATION_DESIGNS))
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--copy-below", type=int, default=None, metavar="N",
                    help="also a start that copies a (silo, cluster) pair only where the silo holds fewer than N of "
                         "the cluster's rows (0: every pair; benchmarks/rounds_plans.py's copy-below variants)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    design = GENERALISATION_DESIGNS[args.design]
    out = {"command": "python benchmarks/rounds_start_probe.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "commit": commit(), "design": args.design, "runs": []}
    for rep in range(args.replicates):
        data = design.simulate(rng=1000 + rep)          # the replicates of benchmarks/rounds_designs.py
        truth = np.concatenate(data.labels)
        cfg = FitConfig(prior=PriorConfig(n_components=design.n_components),
                        sampler=SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2, thin=5),
                        aggregation=AggregationConfig(rounds=0, round_labels="silo"))
        starts = [("the default start", DEFAULT_START), ("no copies", without_copies)]
        if args.copy_below is not None:
            from rounds_plans import copy_below_start

            starts.append((f"copies below {args.copy_below} rows", copy_below_start(args.copy_below)))
        for start, fn in starts:
            stage.start_components = fn
            res = vcmc.fit(data, config=cfg, method="vcmc", rng=rep + 1, jobs=2, show_progress=False)
            rounds = res.diagnostics["rounds"]
            row = {"replicate": rep, "start": start,
                   "ari": float(adjusted_rand_index(truth, np.concatenate(res.assignments))),
                   "k": int(res.n_clusters), "settled": bool(rounds["stability"]["stable"]),
                   "rhat": rounds["stability"]["rhat"], "n_rounds": rounds["n_rounds"],
                   "k_every_100": [p["k"] for p in rounds["per_round"][::100]]}
            out["runs"].append(row)
            print(json.dumps(row), flush=True)  # noqa: T201
    stage.start_components = DEFAULT_START
    if args.out:
        atomic_write_text(args.out, json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
