"""How should the rounds' start share its free components between births and the silos' pieces? (a probe)

The rounds are the pooled model's blocked Gibbs sampler (docs/design.md §16), so their law from a given start
is the pooled sampler's from that start: this probe runs the library's pooled sampler
(``vcmc.mcmc.sampler.run_chain``, prior not fractionated, C+ components) from three starts built from the
one-shot answer (``vcmc.fit --rounds 1``), on the real datasets of ``benchmarks/real_data.py`` (same
preparation) and, with ``--ehr``, on the 13-region cohort of ``benchmarks/ehr.py`` (one-shot at
``--ehr-iterations``; the chains run ``--iterations`` there too):

- ``pieces``: the start of the default rounds before births (``vcmc.rounds.stage.start_components`` capped at
  C+: the one-shot clusters plus the silos' own versions of them in the free components);
- ``births``: every free component a birth (``vcmc.rows.births.misfits`` in each silo, share 0.01, the columns
  held by at least 10 misfits over the silos, most first), no pieces;
- ``half``: births in at most half of the free components, pieces in the rest;
- ``extra``: the pieces of ``pieces`` and, in components beyond C+, as many births as ``half`` makes.

Scored by the modal component of each row over the kept draws (10,000 iterations, burn-in half, every 10th;
K = components holding at least 10 rows on average) against full-data MCMC's six seeds (median ARI), as
real_data.py scores the rounds. No split-merge moves and no relabelling: a probe of the start, not of the
whole rounds (benchmarks/real_data.py measures those).

    python benchmarks/births_probe.py --data-python /tmp/rdenv/bin/python --out docs/results/real/rounds/births
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
from real_data import DATASETS, pooled_codes, prepare

STARTS = ("pieces", "births", "half", "extra")
SHARE = 0.01


def start_allocation(kind: str, labels, silo_of, partition_counts, profiles, codes_by_silo, rows_by_silo, n_mod,
                     n_components: int, min_size: int = 10):
    """The start of one kind: the component of every pooled row, and the births made (columns)."""
    from vcmc.rounds.stage import start_components
    from vcmc.rows.births import misfits

    k = profiles.shape[0]
    free = max(n_components - k, 0)
    budget = {"pieces": 0, "births": free, "half": (free + 1) // 2, "extra": (free + 1) // 2}[kind]
    chosen, found = [], []
    if budget:
        per_silo = [misfits(codes, n_mod, labels[rows], profiles, SHARE)
                    for codes, rows in zip(codes_by_silo, rows_by_silo, strict=True)]
        counts = sum(np.bincount(w, minlength=profiles.shape[1]) for _, w in per_silo)
        chosen = [int(j) for j in np.argsort(-counts, kind="stable")[:budget] if counts[j] >= min_size]
        found = [(rows[r], w) for (r, w), rows in zip(per_silo, rows_by_silo, strict=True)]
    cap = {"births": k, "extra": n_components + len(chosen)}.get(kind, n_components)
    starts, used = start_components(partition_counts, max_components=max(cap - len(chosen), k))
    z = starts[silo_of, labels]
    for i, col in enumerate(chosen):
        for rows, worst in found:
            z[rows[worst == col]] = used + i
    return z, max(n_components, used + len(chosen)), chosen


def run_start(codes, n_mod, z0, n_components: int, seed: int, iterations: int):
    from vcmc.config import PriorConfig, SamplerConfig
    from vcmc.mcmc.sampler import run_chain

    draws = []
    run_chain(codes, n_mod, prior=PriorConfig(n_components=n_components, fractionate=False),
              sampler=SamplerConfig(n_iter=iterations, burn_in=iterations // 2, thin=10, block_size=500),
              rng=np.random.default_rng([seed, 7]), on_block=lambda b: draws.append(b.z.astype(np.int64)),
              initial_allocation=z0)
    z = np.concatenate(draws)
    count = np.zeros((codes.shape[0], n_components))
    for d in z:
        count[np.arange(codes.shape[0]), d] += 1
    keep = np.flatnonzero(count.sum(axis=0) / z.shape[0] >= 10)
    return keep[np.argmax(count[:, keep], axis=1)], int(keep.size)


def one_shot(silos, iterations: int, jobs: int):
    import vcmc
    from vcmc.config import AggregationConfig, AssessmentConfig, FitConfig, SamplerConfig

    cfg = FitConfig(sampler=SamplerConfig(n_iter=iterations, burn_in=iterations // 2),
                    aggregation=AggregationConfig(rounds=1), assessment=AssessmentConfig(enabled=False))
    return vcmc.fit(silos, config=cfg, rng=1, jobs=jobs, show_progress=False)


def probe(name, silos, index, n_rows, codes, n_mod, references, seeds, iterations, jobs, truth=None,
          starts=STARTS, chain_iterations=None):
    from vcmc.config import PriorConfig
    from vcmc.metrics import adjusted_rand_index, best_f1

    res = one_shot(silos, iterations, jobs)
    labels = np.empty(n_rows, dtype=np.int64)
    silo_of = np.empty(n_rows, dtype=np.int64)
    rows_by_silo = []
    for s, (nm, a) in enumerate(zip(res.silos, res.assignments, strict=True)):
        labels[index[nm]] = a
        silo_of[index[nm]] = s
        rows_by_silo.append(np.asarray(index[nm]))
    codes_by_silo = [codes[r] for r in rows_by_silo]
    c_plus = PriorConfig().n_components if truth is None else 30
    entry = {"one_shot_k": int(res.n_clusters), "starts": {}}
    for kind in starts:
        z0, n_comp, chosen = start_allocation(kind, labels, silo_of, np.asarray(res.partition_counts),
                                              np.asarray(res.profiles), codes_by_silo, rows_by_silo, n_mod, c_plus)
        runs = []
        for seed in seeds:
            t0 = time.perf_counter()
            lab, k = run_start(codes, n_mod, z0, n_comp, seed, chain_iterations or iterations)
            run = {"seed": seed, "k": k, "seconds": round(time.perf_counter() - t0, 1)}
            if references:
                aris = [adjusted_rand_index(r, lab) for r in references]
                run.update(ari_to_seeds=aris, ari_median=float(np.median(aris)))
            if truth is not None:
                f1 = best_f1(lab, truth, n_estimated=int(lab.max()) + 1, n_true=int(truth.max()) + 1)
                run.update(recovered=[int(c + 1) for c in np.flatnonzero(f1 >= 0.8)], best_f1=f1.round(3).tolist(),
                           ari_truth=float(adjusted_rand_index(truth, lab)))
            runs.append(run)
            print(f"{name:18s} {kind:7s} seed {seed}: K {k}, " + (f"median ARI {run['ari_median']:.3f}"
                  if references else f"recovered {len(run['recovered'])}, F1 of 27 {run['best_f1'][26]:.2f}"),
                  flush=True)
        entry["starts"][kind] = {"births": chosen, "components": n_comp, "runs": runs}
    return entry


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-python", default=sys.executable)
    ap.add_argument("--datasets", nargs="*", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--reference-seeds", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--ehr", action="store_true", help="also the 13-region cohort of benchmarks/ehr.py")
    ap.add_argument("--ehr-iterations", type=int, default=4000, help="the cohort's one-shot pass's iterations")
    ap.add_argument("--ehr-allocation", default="region", choices=("region", "uniform"))
    ap.add_argument("--starts", nargs="+", default=list(STARTS), choices=STARTS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("docs/results/real/rounds/births"))
    args = ap.parse_args(argv)
    from vcmc.config import SamplerConfig
    from vcmc.data import Schema, read_csv
    from vcmc.research.baselines.full_mcmc import fit_full_mcmc

    out = {"command": " ".join(["births_probe.py", *(argv or sys.argv[1:])]), "commit": commit(),
           "iterations": args.iterations, "share": SHARE, "datasets": {}}
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vcmc-births-") as tmp:
        for name in args.datasets:
            folder = Path(tmp) / name
            data = prepare(name, DATASETS[name], args.data_python, folder)
            schema = Schema.from_json(folder / "schema.json")
            silos = [read_csv(p, schema=schema) for p in data["files"]]
            codes, n_mod = pooled_codes(data, folder)
            refs = []
            for seed in range(1, args.reference_seeds + 1):
                ref = fit_full_mcmc([s.codes for s in silos], n_mod, rng=seed, silo_names=[s.name for s in silos],
                                    sampler=SamplerConfig(n_iter=args.iterations, burn_in=args.iterations // 2))
                lab = np.empty(data["n_rows"], dtype=np.int64)
                for nm, a in zip(ref.silos, ref.assignments, strict=True):
                    lab[data["index"][nm]] = a
                refs.append(lab)
            out["datasets"][name] = probe(name, silos, data["index"], data["n_rows"], codes, n_mod, refs, args.seeds,
                                          args.iterations, args.jobs, starts=args.starts)
            (args.out / "births-probe.json").write_text(json.dumps(out, indent=1))
        if args.ehr:
            from vcmc.research.ehr import simulate_ehr

            cohort = simulate_ehr(n=289_821, allocation=args.ehr_allocation, rng=1)
            index, start = {}, 0
            for s in cohort.silos:
                index[s.name] = np.arange(start, start + s.n_rows)
                start += s.n_rows
            codes = np.concatenate([s.codes for s in cohort.silos])
            key = f"ehr_{args.ehr_allocation}"
            out[key] = probe(key, cohort.silos, index, start, codes, cohort.schema.n_modalities,
                                      [], args.seeds, args.ehr_iterations, args.jobs,
                                      truth=np.concatenate(cohort.labels), starts=args.starts,
                                      chain_iterations=args.iterations)
            out[key]["one_shot_iterations"] = args.ehr_iterations
    (args.out / "births-probe.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
