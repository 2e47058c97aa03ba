"""Speed of the aggregate step on a paper-sized problem (one JSON line on stdout).

S = 4 silos of 1,000 rows (the nested heterogeneous design of the paper's Table 1), C = 6 global clusters,
10 variables (4 binary, 6 ternary: P = 26), T = 5,000 draws per silo (50,000 iterations, 25,000 burn-in,
thinning 5), contingency strategy with the default configuration. The draws are exact conjugate
subposterior draws given the true partition, so the benchmark measures aggregation only.
Target: at most 2 s. Reports the median over ``--repeats`` runs.

    .venv/bin/python benchmarks/aggregation.py [--repeats 5] [--strategy contingency]

Case ``--case application``: the shape of the paper's EHR application (section 6) without running any
sampler. 289,821 people in 27 true clusters of the sizes of the paper's Table 7, 80 binary conditions, a
uniform random allocation to 30 silos (~9,660 rows each); each silo's summary holds exact conjugate draws
given its true local partition (``vcmc.research.study.oracle``), local clusters below ``--min-size`` members being
absorbed by the largest one, as a sampler would. Ball matching with a numeric radius gives about 27 global
clusters (``--radius 0.6``) or about 130 (``--radius 0.27``). Each server stage is timed separately
(Ball matching, ``build_matched_draws``, the optimiser, the push-forward) with the peak of the memory it
makes the process reach (resident set sampled every 2 ms, summaries included), the size of the summaries
themselves and the RSS once they are built. Target: matching + aggregation <= 10 s, server memory <= 2 GB.

    .venv/bin/python benchmarks/aggregation.py --case application --draws 800 --radius 0.6

Measured on the 2-core development machine (contingency strategy, paper's stopping rule), server =
matching + build_matched_draws + aggregate, before -> after the lean representation:
T = 800, 26 global clusters: 17.1 s -> 3.6 s, peak RSS 2.58 GB -> 1.01 GB (summaries: 0.53 GB);
T = 800, 132 global clusters: 174.7 s -> 7.1 s, 10.45 GB -> 1.15 GB;
T = 5,000, 24 global clusters: 71.2 s -> 9.6 s, 13.05 GB -> 3.90 GB (summaries: 3.34 GB).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import threading
import time

import numpy as np

from vcmc.aggregation import aggregate
from vcmc.config import AggregationConfig, PriorConfig
from vcmc.matching import match_ball
from vcmc.matching.types import MatchedDraws, build_matched_draws
from vcmc.model import beta_per_column, fractionate, one_hot_counts, profile_offsets
from vcmc.research.study.oracle import oracle_summary

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


# Table 7 of the paper: members of the 27 clusters found in the THIN cohort (N = 289,821)
APP_SIZES = np.array([138607, 3687, 11332, 22410, 28395, 12080, 28078, 3830, 21121, 5207, 2136, 2404, 3435,
                      3205, 100, 1007, 263, 1000, 89, 215, 31, 61, 478, 233, 259, 92, 66])


def application_summaries(seed: int = 0, n_draws: int = 800, n_silos: int = 30, n_vars: int = 80,
                          min_size: int = 10, prior: PriorConfig | None = None) -> list:
    """Oracle ``SiloSummary`` objects of the application's shape (see the module docstring).

    Profiles: a sparse baseline prevalence per condition (Beta(0.5, 25), mean 2%), halved in the largest
    cluster ("no specific condition"), and 2 to 6 conditions of high prevalence (U(0.4, 0.9)) per other
    cluster.
    """
    gen = np.random.default_rng(seed)
    prior = prior or PriorConfig(n_components=30)
    c = APP_SIZES.size
    prof = np.tile(gen.beta(0.5, 25, size=n_vars), (c, 1))
    prof[0] *= 0.5
    for k in range(1, c):
        high = gen.choice(n_vars, size=int(gen.integers(2, 7)), replace=False)
        prof[k, high] = gen.uniform(0.4, 0.9, size=high.size)
    labels = np.repeat(np.arange(c), APP_SIZES)
    gen.shuffle(labels)
    silo_of = gen.integers(0, n_silos, size=labels.size)
    out = []
    for s in range(n_silos):                      # a loop over silos only
        lab = labels[silo_of == s]
        x = (gen.random((lab.size, n_vars)) < prof[lab]).astype(np.int64)
        small = np.bincount(lab, minlength=c)[lab] < min_size
        lab = np.where(small, 0, lab)
        out.append(oracle_summary(x, (2,) * n_vars, lab, silo=f"silo{s:02d}", prior=prior, n_silos=n_silos,
                                  n_draws=n_draws, rng=gen))
    return out


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def _stage(fn, *args, **kwargs):
    """Run ``fn``; return (result, seconds, peak RSS in MB while it ran).

    A thread samples the resident set every 2 ms (numpy releases the GIL in its loops); unlike
    tracemalloc it does not slow the allocations down, and unlike ru_maxrss it is not the peak of the whole
    process (which includes generating the summaries).
    """
    gc.collect()
    peak = [_rss_mb()]
    done = threading.Event()

    def sample():
        while not done.wait(0.002):
            peak[0] = max(peak[0], _rss_mb())

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    sec = time.perf_counter() - t0
    done.set()
    th.join()
    return out, sec, max(peak[0], _rss_mb())


def application_case(args) -> dict:
    t0 = time.perf_counter()
    summaries = application_summaries(args.seed, n_draws=args.draws)
    gen_s = time.perf_counter() - t0
    input_mb = sum(s.pi_draws.nbytes + s.profile_draws.nbytes for s in summaries) / 2 ** 20
    gc.collect()
    rss_before = _rss_mb()
    radius = args.radius if args.radius in ("overfitted", "finite") else float(args.radius)
    matching, t_match, m_match = _stage(match_ball, summaries, radius=radius)
    matched, t_build, m_build = _stage(build_matched_draws, summaries, matching)
    cfg = AggregationConfig(strategy=args.strategy, **({"stop": args.stop} if args.stop else {}))
    res, t_agg, m_agg = _stage(aggregate, matched, config=cfg, prior=PriorConfig(n_components=30),
                               rng=args.seed)
    timings = dict(getattr(res, "timings", {}) or {})
    trace = np.asarray(res.elbo_trace)
    out = {
        "benchmark": "aggregation", "case": "application", "strategy": args.strategy, "n_silos": 30,
        "n_rows": int(APP_SIZES.sum()), "local_clusters": int(sum(s.n_clusters for s in summaries)),
        "n_global": int(matching.n_global), "radius": args.radius, "P": 160, "draws_per_silo": args.draws,
        "generate_s": gen_s, "summaries_mb": input_mb, "rss_with_summaries_mb": rss_before,
        "matching_s": t_match, "matching_peak_rss_mb": m_match,
        "build_matched_s": t_build, "build_matched_peak_rss_mb": m_build,
        "aggregate_s": t_agg, "aggregate_peak_rss_mb": m_agg,
        "optimise_s": timings.get("optimise"), "push_forward_s": timings.get("push_forward"),
        "server_s": t_match + t_build + t_agg, "n_iter": int(res.n_iter), "converged": bool(res.converged),
        "elbo": float(res.elbo), "elbo_start": float(trace[0]) if trace.size else None,
        "process_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "python": platform.python_version(),
    }
    if args.trace:
        with open(args.trace, "w") as fh:
            json.dump({"trace": trace.tolist(), "weights": res.weights.to_dict(), **out}, fh)
    return out


def paper_case(args) -> dict:
    matched = paper_sized_problem(args.seed)
    cfg = AggregationConfig(strategy=args.strategy)
    aggregate(matched, config=cfg, rng=args.seed)          # warm-up (imports, caches)
    times, iters = [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        res = aggregate(matched, config=cfg, rng=args.seed + r)
        times.append(time.perf_counter() - t0)
        iters.append(res.n_iter)
    return {
        "benchmark": "aggregation", "strategy": args.strategy, "n_silos": 4, "n_clusters": 6, "P": 26,
        "draws_per_silo": 5000, "repeats": args.repeats, "median_s": float(np.median(times)),
        "min_s": float(np.min(times)), "max_s": float(np.max(times)), "target_s": 2.0,
        "median_iterations": float(np.median(iters)), "elbo_last": res.elbo,
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="paper", choices=["paper", "application"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--strategy", default="contingency", choices=["contingency", "design"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=800, help="application case: draws per silo")
    parser.add_argument("--radius", default="0.6", help="application case: Ball radius")
    parser.add_argument("--stop", default=None, help="application case: AggregationConfig.stop")
    parser.add_argument("--trace", default=None, help="application case: write the ELBO trace here")
    args = parser.parse_args()
    print(json.dumps(application_case(args) if args.case == "application" else paper_case(args)))


if __name__ == "__main__":
    main()
