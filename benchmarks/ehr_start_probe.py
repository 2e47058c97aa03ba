"""The rounds' start at the application scale: several starts from one one-shot pass of the synthetic cohort.

``benchmarks/ehr.py`` runs the whole default once per configuration, six minutes of them the one-shot pass. This
probe makes that pass once (the silos in ``--jobs`` worker processes, as ``ehr.py``), then runs the default rounds
from it under each start (``vcmc.rounds.stage.start_components`` replaced in this process, the server's side,
where the start is built) and scores each answer against the truth as ``ehr.py`` does (K, ARI, the true clusters
recovered with best F1 >= 0.8, the pieces of each, single-silo fragments):

    python benchmarks/ehr_start_probe.py --allocation uniform --starts copy-all copy-below-2000 \\
        copy-total-below-2000 --out docs/results/ehr/relay/start-probe-uniform.json

Starts: ``default`` (the library's), ``copy-all`` (every pair after a cluster's first holder copied, the start
before ``START_COPY_BELOW``), ``copy-below-N`` and ``copy-total-below-N`` (``benchmarks/rounds_plans.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _provenance import commit
from ehr import score
from rounds_plans import copy_below_start, copy_total_below_start

from vcmc.atomic import atomic_write_text


def start_of(name: str):
    from vcmc.rounds import stage

    if name == "default":
        return stage.start_components
    if name == "copy-all":
        return copy_below_start(0)
    if name.startswith("copy-total-below-"):
        return copy_total_below_start(int(name.rsplit("-", 1)[1]))
    if name.startswith("copy-below-"):
        return copy_below_start(int(name.rsplit("-", 1)[1]))
    raise SystemExit(f"unknown start {name!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=289_821)
    ap.add_argument("--allocation", default="uniform", choices=("uniform", "region"))
    ap.add_argument("--iterations", type=int, default=50_000)
    ap.add_argument("--components", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1, help="seed of the cohort and of the fit")
    ap.add_argument("--starts", nargs="+", default=["copy-all", "default"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import functools

    from vcmc.config import FitConfig, PriorConfig, SamplerConfig
    from vcmc.data import Schema, read_csv
    from vcmc.federation.transport import ProcessPoolTransport
    from vcmc.pipeline import server_steps, summarize_silos
    from vcmc.research.ehr import simulate_ehr
    from vcmc.rounds import stage

    starts = {name: start_of(name) for name in args.starts}
    config = FitConfig(prior=PriorConfig(n_components=args.components),
                       sampler=SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2, thin=5))
    doc = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
           "commit": commit(), "n": args.n, "allocation": args.allocation, "iterations": args.iterations,
           "seed": args.seed, "starts": {}}
    with tempfile.TemporaryDirectory(prefix="vcmc-ehr-start-") as tmp:
        data = simulate_ehr(n=args.n, allocation=args.allocation, rng=args.seed)
        data.write(Path(tmp))
        truth = {"labels": {s.name: lab.tolist() for s, lab in zip(data.silos, data.labels, strict=True)},
                 "sizes": np.bincount(data.pooled_labels, minlength=data.n_clusters).tolist()}
        schema = Schema.from_json(Path(tmp) / "schema.json")
        loaders = {p.stem: functools.partial(read_csv, p, schema=schema) for p in sorted(Path(tmp).glob("silo_*.csv"))}
        original = stage.start_components
        with ProcessPoolTransport(loaders, privacy=config.privacy, max_workers=args.jobs) as pool:
            t0 = time.perf_counter()
            summaries, _ = summarize_silos(pool, config, rng=args.seed)
            doc["one_shot_s"] = time.perf_counter() - t0
            print(f"one-shot pass: {doc['one_shot_s']:.0f} s", flush=True)
            for name, fn in starts.items():
                stage.start_components = fn
                try:
                    t0 = time.perf_counter()
                    result = server_steps(summaries, pool, config, rng=args.seed, show_progress=False)
                    seconds = time.perf_counter() - t0
                finally:
                    stage.start_components = original
                labels = pool.local_assignments()
                got = score({"labels": {s: np.asarray(labels[s]).tolist() for s in result.silos},
                             "n_clusters": result.n_clusters}, truth)
                rounds = result.diagnostics["rounds"]
                got.update({"seconds": seconds, "components": rounds["components"],
                            "settled": rounds["stability"]["stable"], "rhat": rounds["stability"]["rhat"],
                            "k_every_100": [t["k"] for t in rounds["per_round"][::100]]})
                doc["starts"][name] = got
                pieces = {c + 1: p for c, p in enumerate(got["pieces"]) if p > 1}
                print(f"{name:24s} K {got['n_clusters']:2d} ARI {got['ari']:.3f} recovered {len(got['recovered'])} "
                      f"{got['recovered']} pieces>1 {pieces} single-silo {got['single_silo_fragments']} "
                      f"components {got['components']} settled {got['settled']} ({seconds:.0f} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
