"""Coverage of the item-response probabilities' 95% intervals of the fixed-K latent class model (issue 46).

Each replicate simulates 3 silos of 500 rows from a 3-class model of 8 binary items (weights 0.45, 0.35,
0.20; the probabilities below, none at the boundary), leaves 30% of the item cells missing completely at
random, fits the 3-class model by federated EM (``vcmc.lca.analyse``: best of at least 10 starts, until two
reach the best value) and asks whether each 95% interval of P(item = 1 | class) and of the class weights
covers the truth (classes matched to the true ones by the least L1 distance of their profiles). Reported: the
coverage of the intervals vcmc writes (the observed information of the mixture, Wald on the logit scale,
docs/design.md §15.1) and, for comparison, of the complete-data intervals ``p +/- 1.96 sqrt(p (1 - p) /
N_k)`` that vcmc wrote before (the whole class, as if every row observed every item and its class were
known).

    python benchmarks/lca_coverage.py --replicates 200 --out docs/results/lca/coverage
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _provenance import commit
from scipy.optimize import linear_sum_assignment

WEIGHTS = np.array([0.45, 0.35, 0.20])
PROFILES = np.array([[0.85, 0.80, 0.75, 0.80, 0.30, 0.25, 0.70, 0.20],
                     [0.20, 0.25, 0.30, 0.15, 0.80, 0.75, 0.70, 0.25],
                     [0.25, 0.30, 0.20, 0.30, 0.25, 0.20, 0.15, 0.70]])   # P(item = 1 | class)


def simulate(rng: np.random.Generator, n_per_silo=(500, 500, 500), missing: float = 0.3):
    from vcmc.data import Schema
    from vcmc.data.schema import SiloData
    from vcmc.silo.local import LocalSilo

    schema = Schema.from_n_modalities([2] * PROFILES.shape[1], prefix="item")
    silos = []
    for s, n in enumerate(n_per_silo):
        z = rng.choice(len(WEIGHTS), size=n, p=WEIGHTS)
        x = (rng.random((n, PROFILES.shape[1])) < PROFILES[z]).astype(np.int16)
        x[rng.random(x.shape) < missing] = -1
        silos.append(LocalSilo(SiloData(f"silo{s + 1}", x, schema)))
    return silos


def replicate(seed: int, missing: float) -> dict:
    from vcmc.lca.analysis import analyse

    rng = np.random.default_rng(seed)
    silos = simulate(rng, missing=missing)
    a = analyse(silos, 3, n_starts=10, rng=rng)
    f = a.fit
    yes = f.profiles[:, 1::2]                                     # P(item = 1 | fitted class)
    cost = np.abs(yes[:, None, :] - PROFILES[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    order = rows[np.argsort(cols)]                                # fitted class of each true class
    lo, hi = a.items.ci[order][:, 1::2, 0], a.items.ci[order][:, 1::2, 1]
    se = a.items.se[order][:, 1::2]
    p = yes[order]
    n_k = f.pi[order] * f.n_rows
    cd = np.sqrt(p * (1 - p) / n_k[:, None])
    return {"seed": seed, "loglik": f.loglik, "starts": len(f.start_logliks), "starts_at_best": f.n_best,
            "covered": ((lo <= PROFILES) & (hi >= PROFILES)).tolist(),
            "covered_complete_data": ((p - 1.96 * cd <= PROFILES) & (p + 1.96 * cd >= PROFILES)).tolist(),
            "weight_covered": ((a.items.weight_ci[order, 0] <= WEIGHTS) & (a.items.weight_ci[order, 1] >= WEIGHTS)
                               ).tolist(),
            "se": se.tolist(), "se_complete_data": cd.tolist(), "estimate": p.tolist(),
            "intervals": sorted(set(a.items.interval[order][:, 1::2].ravel().tolist())),
            "max_assignment_cost": float(cost[rows, cols].max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--missing", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    seeds = np.random.SeedSequence(args.seed).generate_state(args.replicates).tolist()
    t0 = time.perf_counter()
    reps = []
    for i, seed in enumerate(seeds):
        reps.append(replicate(int(seed), args.missing))
        if (i + 1) % 20 == 0:
            cov = np.mean([r["covered"] for r in reps])
            print(f"{i + 1} replicates: coverage {cov:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    covered = np.array([r["covered"] for r in reps], dtype=float)           # (R, K, Q)
    cd = np.array([r["covered_complete_data"] for r in reps], dtype=float)
    w = np.array([r["weight_covered"] for r in reps], dtype=float)
    se = np.array([r["se"] for r in reps])
    est = np.array([r["estimate"] for r in reps])
    summary = {
        "command": f"python benchmarks/lca_coverage.py --replicates {args.replicates} --missing {args.missing} "
                   f"--seed {args.seed}",
        "commit": commit(), "replicates": args.replicates, "missing": args.missing,
        "design": {"silos": [500, 500, 500], "weights": WEIGHTS.tolist(), "profiles_p_yes": PROFILES.tolist()},
        "coverage": float(covered.mean()),
        "coverage_per_parameter": covered.mean(axis=0).round(3).tolist(),
        "coverage_range": [float(covered.mean(axis=0).min()), float(covered.mean(axis=0).max())],
        "coverage_complete_data": float(cd.mean()),
        "coverage_weights": float(w.mean()),
        "mean_se_over_sd_of_estimates": float(np.mean(np.nanmean(se, axis=0) / est.std(axis=0, ddof=1))),
        "mean_complete_data_se_over_sd": float(np.mean(np.array([r["se_complete_data"] for r in reps]).mean(axis=0)
                                                       / est.std(axis=0, ddof=1))),
        "starts_at_best_min": int(min(r["starts_at_best"] for r in reps)),
        "interval_kinds": sorted({k for r in reps for k in r["intervals"]}),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "coverage_per_parameter"}, indent=2))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "coverage.json").write_text(json.dumps({**summary, "replicates_detail": reps}, indent=1))


if __name__ == "__main__":
    main()
