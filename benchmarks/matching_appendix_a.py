"""Matching in the paper's Appendix A setting: local partitions set to the truth (no MCMC).

For the six scenarios of docs/design.md §10 and each matching method, prints the percentage of datasets
where the correct matching (docs/design.md §9.1) is recovered, the mean ARI of the propagated partition on all
silos pooled and the mean number of global clusters. Oracle summaries come from exact conjugate draws
given the true partition (``vcmc.research.study.oracle``); minimum divergence talks to in-process silos.

Usage::

    .venv/bin/python benchmarks/matching_appendix_a.py --seeds 10
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from vcmc.config import MatchingConfig
from vcmc.matching import in_process_divergence, match
from vcmc.research.simulate import DESIGNS, SEPARABILITIES, simulate_design
from vcmc.research.study.evaluate import appendix_a_silos, evaluate_matching

METHODS = {
    "hungarian": MatchingConfig(method="hungarian"),
    "min-div (penalised)": MatchingConfig(method="min-divergence"),
    "min-div (augmented)": MatchingConfig(method="min-divergence", new_cluster_rule="augmented"),
    "ball": MatchingConfig(method="ball"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="datasets per scenario (default 10)")
    parser.add_argument("--draws", type=int, default=100, help="oracle posterior draws per silo")
    parser.add_argument("--n-starts", type=int, default=4, help="min-divergence multi-start")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"Appendix A setting (true local partitions), {args.seeds} datasets per scenario; "
          "cells: % correct matching / mean ARI / mean C")
    header = f"{'scenario':<22}" + "".join(f"{m:>24}" for m in METHODS)
    print(header)
    for design in DESIGNS:
        for sep in SEPARABILITIES:
            rows = {m: [] for m in METHODS}
            for seed in range(args.seeds):
                data = simulate_design(design, sep, rng=seed)
                codes = [s.codes for s in data.silos]
                summaries, locals_, local_labels = appendix_a_silos(
                    codes, data.labels, data.n_modalities, n_draws=args.draws, rng=10_000 + seed,
                    names=[s.name for s in data.silos])
                route = in_process_divergence(list(zip(codes, locals_, strict=True)), data.n_modalities)
                for name, cfg in METHODS.items():
                    cfg = dataclasses.replace(cfg, n_starts=args.n_starts)
                    m = match(summaries, cfg, divergence=route, rng=seed)
                    ev = evaluate_matching(m, local_labels, data.labels)
                    rows[name].append((ev["correct"], ev["ari"], ev["n_global"]))
            cells = []
            for name in METHODS:
                arr = np.array(rows[name], dtype=float)
                pct, ari, n_glob = 100 * arr[:, 0].mean(), arr[:, 1].mean(), arr[:, 2].mean()
                cells.append(f"{pct:5.0f}% / {ari:.3f} / {n_glob:4.1f}")
            print(f"{design + ' ' + sep:<22}" + "".join(f"{c:>24}" for c in cells))
    print(f"wall time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
