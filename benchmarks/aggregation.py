"""Speed of the aggregate step on a paper-sized problem (one JSON line on stdout).

S = 4 silos of 1,000 rows (the nested heterogeneous design of the paper's Table 1), C = 6 global clusters,
10 variables (4 binary, 6 ternary: P = 26), T = 5,000 draws per silo (50,000 iterations, 25,000 burn-in,
thinning 5), contingency strategy with the default configuration. The draws are exact conjugate
subposterior draws given the true partition, so the benchmark measures aggregation only.
Target (issue 5): at most 2 s. Reports the median over ``--repeats`` runs.

    .venv/bin/python benchmarks/aggregation.py [--repeats 5] [--strategy contingency]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from vcmc.aggregation import aggregate
from vcmc.config import AggregationConfig, PriorConfig
from vcmc.matching.types import MatchedDraws
from vcmc.model import beta_per_column, fractionate, one_hot_counts, profile_offsets

N_MOD = (2, 2, 2, 2, 3, 3, 3, 3, 3, 3)
NESTED = np.array([[1 / 6] * 6, [0.2] * 5 + [0], [1 / 3] * 3 + [0] * 3, [0.5] * 2 + [0] * 4])


def _dirichlet_blocks(gen, conc, n_draws):
    g = gen.gamma(np.broadcast_to(conc, (n_draws, *conc.shape)))
    off = profile_offsets(N_MOD)
    tot = np.add.reduceat(g, off[:-1], axis=-1)
    return g / np.repeat(tot, N_MOD, axis=-1)


def paper_sized_problem(seed: int = 0, n_draws: int = 5000, n_rows: int = 1000) -> MatchedDraws:
    gen = np.random.default_rng(seed)
    s, c = NESTED.shape
    k = np.asarray(N_MOD)
    off = profile_offsets(N_MOD)
    prior = PriorConfig()
    true = _dirichlet_blocks(gen, np.full((c, int(k.sum())), 0.3), 1)[0]
    a_loc = float(fractionate(prior.alpha, s))
    b_loc = fractionate(beta_per_column(prior.beta, N_MOD), s)
    pis, profs, sizes, counts = [], [], [], []
    for i in range(s):
        lab = gen.choice(c, size=n_rows, p=NESTED[i])
        u = gen.random((n_rows, k.size))
        x = np.column_stack([np.minimum((u[:, q, None] > np.cumsum(true[lab, off[q]:off[q + 1]], 1)).sum(1),
                                        k[q] - 1) for q in range(k.size)])
        n_c = np.bincount(lab, minlength=c)
        pres = n_c > 0
        cnt = one_hot_counts(x, lab, c, N_MOD)
        pi = np.zeros((n_draws, c))
        g = gen.gamma(np.broadcast_to(n_c[pres] + a_loc, (n_draws, int(pres.sum()))))
        pi[:, pres] = g / g.sum(1, keepdims=True)
        prof = _dirichlet_blocks(gen, cnt + b_loc, n_draws)
        prof[:, ~pres] = np.repeat(1.0 / k, k)
        pis.append(pi)
        profs.append(prof)
        sizes.append(n_c)
        counts.append(cnt)
    return MatchedDraws(pi=tuple(pis), profiles=tuple(profs), present=np.array(sizes) > 0,
                        sizes=np.array(sizes), counts=np.array(counts), n_rows=np.full(s, n_rows),
                        n_modalities=N_MOD, silos=tuple(f"silo{i}" for i in range(s)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--strategy", default="contingency", choices=["contingency", "design"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    matched = paper_sized_problem(args.seed)
    cfg = AggregationConfig(strategy=args.strategy)
    aggregate(matched, config=cfg, rng=args.seed)          # warm-up (imports, caches)
    times, iters = [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        res = aggregate(matched, config=cfg, rng=args.seed + r)
        times.append(time.perf_counter() - t0)
        iters.append(res.n_iter)
    print(json.dumps({
        "benchmark": "aggregation", "strategy": args.strategy, "n_silos": 4, "n_clusters": 6, "P": 26,
        "draws_per_silo": 5000, "repeats": args.repeats, "median_s": float(np.median(times)),
        "min_s": float(np.min(times)), "max_s": float(np.max(times)), "target_s": 2.0,
        "median_iterations": float(np.median(iters)), "elbo_last": res.elbo,
        "python": platform.python_version(),
    }))


if __name__ == "__main__":
    main()
