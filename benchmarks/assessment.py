"""Cost of the model-assessment round inside one silo, next to the apply step and the assign round.

One silo of the synthetic EHR cohort (``vcmc simulate --design ehr``: 80 binary conditions, 27 clusters of
Table 7's sizes) with ``--rows`` rows. The assessment gets what the pipeline sends: ``--replicates`` draws of
the 27 global clusters (Dirichlet draws around the true parameters, 2,000 pseudo-counts per block: the size
of a real request) and the 500 most frequent pairs. Timed, each ``--runs`` times (median; numba compiled
first): ``vcmc.rows.ppc.assess_rows`` (the assess request), ``memberships_to_target`` on the same draws (the
assign request: as many of them as its Monte Carlo target needs; the number is printed) and the apply step
(``run_apply_step``, C+ = 30) at ``--iterations``. CPU
time of this process is reported next to wall time, as the machine may be shared. Prints ONE JSON line.

    OPENBLAS_NUM_THREADS=1 python benchmarks/assessment.py [--rows 10000] [--iterations 50000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _timed(fn, runs: int) -> dict:
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"wall_s": round(float(np.median(wall)), 3), "cpu_s": round(float(np.median(cpu)), 3)}


def main() -> None:
    from vcmc.assessment import choose_pairs
    from vcmc.config import PriorConfig, SamplerConfig
    from vcmc.mcmc.apply import run_apply_step
    from vcmc.research.ehr import simulate_ehr
    from vcmc.rows.memberships import memberships_to_target
    from vcmc.rows.ppc import assess_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--max-pairs", type=int, default=500)
    ap.add_argument("--iterations", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    data = simulate_ehr(n=args.rows, n_silos=1, rng=args.seed)
    silo, schema = data.silos[0], data.schema
    w, prof = np.asarray(data.global_weights), np.asarray(data.profiles)
    rng = np.random.default_rng(0)
    r = args.replicates
    pis = rng.dirichlet(2000 * w, size=r)
    profs = np.empty((r, *prof.shape))
    for q in range(len(schema.n_modalities)):
        block = slice(2 * q, 2 * q + 2)
        for c in range(prof.shape[0]):
            profs[:, c, block] = rng.dirichlet(2000 * prof[c, block], size=r)
    pairs = choose_pairs(w, prof, schema.n_modalities, args.max_pairs)
    n_mod = schema.n_modalities
    assess_rows(silo.codes[:50], n_mod, pis[:2], profs[:2], pairs, rng=1)      # compile
    out = {"rows": silo.n_rows, "variables": len(n_mod), "clusters": int(prof.shape[0]), "replicates": r,
           "pairs": int(pairs.shape[0]), "iterations": args.iterations}
    out["assess"] = _timed(lambda: assess_rows(silo.codes, n_mod, pis, profs, pairs, rng=1), args.runs)
    out["assign"] = _timed(lambda: memberships_to_target(silo.codes, n_mod, pis, profs), args.runs)
    out["assign_draws_used"] = memberships_to_target(silo.codes, n_mod, pis, profs)[1].n_draws
    sampler = SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2, thin=5)
    run_apply_step(silo.codes, n_mod, prior=PriorConfig(n_components=30),
                   sampler=SamplerConfig(n_iter=200, burn_in=100, thin=5), n_silos=30, rng=1)   # compile
    out["apply"] = _timed(lambda: run_apply_step(silo.codes, n_mod, prior=PriorConfig(n_components=30),
                                                 sampler=sampler, n_silos=30, rng=1), min(args.runs, 2))
    out["assess_over_apply"] = round(out["assess"]["cpu_s"] / out["apply"]["cpu_s"], 4)
    print(json.dumps(out))  # noqa: T201


if __name__ == "__main__":
    main()
