"""How well the report's characterisation finds the conditions the EHR generator made characteristic.

Simulates the synthetic multimorbidity cohort (``vcmc.research.ehr``: per cluster Table 8's high/low conditions and
the secondary ones are *designed*, every other condition is within an odds ratio of 2.5 of the cohort),
fits it with ``vcmc fit`` (or reads a folder already fitted), writes the report, and compares the listed
conditions of every fitted cluster with the designed ones of the true cluster it matches (its majority
true cluster; a fitted cluster is scored when it holds most of that true cluster's people and most of its
own people are from it, i.e. best F1 >= 0.8):

- true listed: designed conditions listed, in the designed direction;
- missed: designed conditions not listed, split by the first criterion they fail: the posterior cannot
  support a difference (the 95% interval of the odds ratio contains 1), too few people (fewer than 5 net
  of the prior), or the odds ratio below the threshold (3);
- extra: listed conditions that are not designed for the cluster (or listed in the wrong direction).

    python benchmarks/characterisation.py --n 30000 --silos 5 --iterations 4000     # ~1 min on 2 cores
    python benchmarks/characterisation.py --fit-dir DIR --data-dir DATA              # an existing fit
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from vcmc.report.characterise import MIN_EXPECTED


def score(fit_dir: Path, data_dir: Path, *, min_f1: float = 0.8) -> dict:
    truth = json.loads((data_dir / "truth.json").read_text())
    true_lab = pd.read_csv(data_dir / "truth.csv")
    est = pd.read_csv(fit_dir / "assignments.csv")
    joined = true_lab.merge(est, on=["silo", "row"], suffixes=("_true", "_fit"))
    table = pd.crosstab(joined["cluster_fit"], joined["cluster_true"])
    char = pd.read_csv(fit_dir / "characterisation.csv", keep_default_na=False)
    per_cluster = []
    totals = {"designed": 0, "true_listed": 0, "missed": 0, "missed_unsupported": 0, "missed_few_people": 0,
              "missed_below_threshold": 0, "extra": 0, "listed": 0}
    for f in table.index:
        row = table.loc[f]
        t = int(row.idxmax())
        n_f, n_t, both = int(row.sum()), int(table[t].sum()), int(row.max())
        f1 = 2 * both / (n_f + n_t)
        design = truth["characterisation"][f"cluster_{t}"]
        want = {(v, 1) for v in design["high"] + design["secondary_high"]} | \
               {(v, -1) for v in design["low"] + design["secondary_low"]}
        mine = char[char["cluster"] == f]
        listed = {(r.variable, 1 if r.listed == "high" else -1) for r in mine.itertuples() if r.listed}
        item = {"fitted": int(f), "true": t, "size": n_f, "f1": round(f1, 3), "designed": len(want),
                "true_listed": len(listed & want), "missed": sorted(v for v, _ in want - listed),
                "extra": sorted(f"{v}{'+' if d > 0 else '-'}" for v, d in listed - want)}
        why = {"unsupported": 0, "few_people": 0, "below_threshold": 0}
        for v, d in want - listed:
            r = mine[mine["variable"] == v].iloc[0]
            if r.odds_ratio_ci95_low <= 1.0 <= r.odds_ratio_ci95_high:
                why["unsupported"] += 1
            elif (r.cases_net_of_prior if d > 0 else r.expected_cases_net_of_prior) < MIN_EXPECTED:
                why["few_people"] += 1
            else:
                why["below_threshold"] += 1
        item["missed_why"] = why
        per_cluster.append(item)
        if f1 >= min_f1:
            totals["designed"] += len(want)
            totals["true_listed"] += item["true_listed"]
            totals["missed"] += len(item["missed"])
            for k, v in why.items():
                totals[f"missed_{k}"] += v
            totals["extra"] += len(item["extra"])
            totals["listed"] += len(listed)
    scored = [c for c in per_cluster if c["f1"] >= min_f1]
    return {"scored_clusters": len(scored), "fitted_clusters": len(per_cluster), "totals": totals,
            "clusters": per_cluster}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30_000)
    ap.add_argument("--silos", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=4000)
    ap.add_argument("--components", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="characterisation-bench", help="folder for data, fit and score")
    ap.add_argument("--fit-dir", default=None, help="score this fit (with --data-dir) instead of fitting")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    vcmc = [sys.executable, "-m", "vcmc"]
    if args.fit_dir:
        fit_dir, data_dir = Path(args.fit_dir), Path(args.data_dir)
    else:
        out = Path(args.out)
        data_dir, fit_dir = out / "data", out / "fit"
        subprocess.run([*vcmc, "simulate", "--design", "ehr", "--n", str(args.n), "--silos", str(args.silos),
                        "--seed", str(args.seed), "--out", str(data_dir)], check=True)
        subprocess.run([*vcmc, "fit", *sorted(str(p) for p in data_dir.glob("silo_*.csv")), "--out", str(fit_dir),
                        "--components", str(args.components), "--iterations", str(args.iterations),
                        "--seed", str(args.seed), "--jobs", str(args.jobs)], check=True)
    subprocess.run([*vcmc, "report", str(fit_dir)], check=True)
    result = score(fit_dir, data_dir)
    result["command"] = " ".join([sys.executable, *sys.argv])
    (fit_dir / "characterisation-score.json").write_text(json.dumps(result, indent=1))
    t = result["totals"]
    print(f"{result['scored_clusters']} of {result['fitted_clusters']} fitted clusters match a true cluster "  # noqa: T201
          f"(best F1 >= 0.8); designed {t['designed']}: true listed {t['true_listed']}, missed {t['missed']} "
          f"({t['missed_unsupported']} not supported by the posterior, {t['missed_few_people']} on fewer than 5 "
          f"people, {t['missed_below_threshold']} below the odds-ratio threshold); extra {t['extra']} of "
          f"{t['listed']} listed")
    for c in result["clusters"]:
        print(f"  fitted {c['fitted']:2d} -> true {c['true']:2d} (F1 {c['f1']:.2f}, N {c['size']}): "  # noqa: T201
              f"{c['true_listed']}/{c['designed']} listed; missed {c['missed']}; extra {c['extra']}")


if __name__ == "__main__":
    main()
