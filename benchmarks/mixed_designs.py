"""Simulated mixed designs with known truth: default VCMC against full-data MCMC, and the coverage of the clusters'
means (issue 45; docs/design.md §17).

Each replicate simulates silos of categorical and Gaussian items (``vcmc.research.simulate_mixed``, seeded), fits
them with ``vcmc.fit`` at its defaults (but ``--iterations``) and with full-data MCMC on the pooled rows (the same
sampler, no fractionation), and records both ARIs to the truth, the number of clusters, and for every true cluster
(matched to a global cluster by the Hungarian assignment of the pooled confusion matrix) whether each item's 95%
interval of its mean covers the true mean. Prints one JSON object per design; ``--out DIR`` also writes
``DIR/<design>.json``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/mixed_designs.py --design heterogeneous [--replicates 50]
        [--iterations 2000] [--out docs/results/mixed]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _provenance import commit
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score

import vcmc
from vcmc.atomic import atomic_write_text
from vcmc.config import FitConfig, SamplerConfig
from vcmc.research.baselines.full_mcmc import fit_full_mcmc
from vcmc.research.simulate_mixed import simulate_mixed

MEANS3 = [[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]]
SDS3 = [[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]]
DESIGNS = {
    "homogeneous": dict(n_rows=[400, 400, 400], weights=[0.5, 0.3, 0.2], means=MEANS3, sds=SDS3),
    "heterogeneous": dict(n_rows=[300, 400, 500], weights=[[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.2, 0.7]],
                          means=MEANS3, sds=SDS3),
    "absent": dict(n_rows=[400, 400, 400, 400],
                   weights=[[0.5, 0.5, 0.0, 0.0], [0.4, 0.3, 0.3, 0.0], [0.3, 0.3, 0.2, 0.2], [0.4, 0.0, 0.3, 0.3]],
                   means=[[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0], [0.0, -1.5]], sds=[[0.5, 0.7], [0.6, 0.5], [0.4, 0.6],
                                                                              [0.5, 0.5]]),
}


def _covered(labels, truth, draws, means) -> list[bool]:
    """Per true cluster and item: the 95% interval of its matched global cluster's mean holds the true mean."""
    c = max(int(labels.max()) + 1, draws.shape[1])
    confusion = np.zeros((means.shape[0], c))
    np.add.at(confusion, (truth, labels), 1)
    rows, cols = linear_sum_assignment(confusion, maximize=True)
    g = means.shape[1]
    lo, hi = np.quantile(draws[:, :, :g], [0.025, 0.975], axis=0)
    out = []
    for k, j in zip(rows, cols, strict=True):
        for item in range(g):
            out.append(bool(j < draws.shape[1] and lo[j, item] <= means[k, item] <= hi[j, item]))
    return out


def run(design: str, replicates: int, iterations: int, seed: int, deployment: bool = False) -> dict:
    spec = DESIGNS[design]
    means = np.asarray(spec["means"], dtype=float)
    config = FitConfig(sampler=SamplerConfig(n_iter=iterations))
    rows = []
    for r in range(replicates):
        silos, truth = simulate_mixed(spec["n_rows"], spec["weights"], means, spec["sds"], missing=0.03,
                                      rng=[seed, r])
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # a deployment: the silos built as a SuperNode's node config builds them, the operators' defaults
            res = vcmc.fit(silos, config=config, rng=seed * 10_000 + 2 * r, silo_policy={} if deployment else None)
        t1 = time.perf_counter()
        full = fit_full_mcmc([s.codes for s in silos], silos[0].n_modalities, sampler=config.sampler,
                             rng=seed * 10_000 + 2 * r + 1, values=[s.values for s in silos])
        t2 = time.perf_counter()
        ours, theirs = np.concatenate(res.assignments), np.concatenate(full.assignments)
        rows.append({"ari_vcmc": adjusted_rand_score(truth.labels, ours),
                     "ari_full": adjusted_rand_score(truth.labels, theirs),
                     "k_vcmc": res.n_clusters, "k_full": full.n_clusters,
                     "covered_vcmc": _covered(ours, truth.labels, res.gaussian_draws, means),
                     "covered_full": _covered(theirs, truth.labels, full.gaussian_draws, means),
                     "seconds_vcmc": t1 - t0, "seconds_full": t2 - t1})
    ari_v = np.array([x["ari_vcmc"] for x in rows])
    ari_f = np.array([x["ari_full"] for x in rows])
    cov_v = np.concatenate([x["covered_vcmc"] for x in rows])
    cov_f = np.concatenate([x["covered_full"] for x in rows])
    return {"design": design, "mode": "deployment" if deployment else "analyst", "true_k": int(means.shape[0]),
            "replicates": replicates, "iterations": iterations,
            "seed": seed, "mean_ari_vcmc": float(ari_v.mean()), "mean_ari_full": float(ari_f.mean()),
            "mean_ari_difference": float((ari_v - ari_f).mean()),
            "k_correct_vcmc": float(np.mean([x["k_vcmc"] == means.shape[0] for x in rows])),
            "k_correct_full": float(np.mean([x["k_full"] == means.shape[0] for x in rows])),
            "coverage_vcmc": float(cov_v.mean()), "coverage_full": float(cov_f.mean()), "replicate_rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--design", choices=sorted(DESIGNS), required=True)
    p.add_argument("--replicates", type=int, default=50)
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--deployment", action="store_true",
                   help="fit as a deployment would (vcmc.fit's silo_policy: the operators' default node config)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    result = {"command": "python benchmarks/mixed_designs.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "commit": commit(), **run(args.design, args.replicates, args.iterations, args.seed, args.deployment)}
    summary = {k: v for k, v in result.items() if k != "replicate_rows"}
    print(json.dumps(summary))  # noqa: T201
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        name = f"{args.design}-deployment" if args.deployment else args.design
        atomic_write_text(args.out / f"{name}.json", json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
