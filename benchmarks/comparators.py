"""Quick comparison of the comparators (fed-kmodes, fedmerdel, discgs) on the paper's simulated designs.

For each scenario (design x separability) and seed, simulates the paper's data (4 silos of 1,000 rows,
4 binary + 6 ternary variables), runs each method and records wall time, number of non-empty clusters,
ARI and VI (natural log) against the truth, and, after a Hungarian alignment of estimated to true clusters
(docs/design.md §9.2), the relative bias of the smallest true cluster's weight and, where the method gives
intervals, the 95% coverage of the weights and profiles. Prints a markdown table beside the paper's
Table 3 values (mean (sd) over seeds).

    .venv/bin/python benchmarks/comparators.py --seeds 10 --json comparators.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from vcmc.metrics import (
    adjusted_rand_index,
    align_clusters,
    coverage,
    relative_bias,
    variation_of_information,
)
from vcmc.research.baselines.discgs import fit_discgs
from vcmc.research.baselines.fed_kmodes import fit_fed_kmodes
from vcmc.research.baselines.fedmerdel import fit_fedmerdel
from vcmc.research.simulate import simulate_design

SCENARIOS = [(d, s) for d in ("homogeneous", "nested", "non_nested") for s in ("easy", "poor")]
PAPER_KEY = {"fed-kmodes": "fed_kmodes", "fedmerdel": "fedmerdel", "discgs": None}
DEFAULT_TABLES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "paper_tables.json"


def run_method(name, silos, mods, n_true, seed):
    if name == "fed-kmodes":
        return fit_fed_kmodes(silos, mods, n_clusters=n_true, rng=seed)
    if name == "fedmerdel":
        return fit_fedmerdel(silos, mods, rng=seed)
    return fit_discgs(silos, mods, rng=seed)


def evaluate(res, data, elapsed):
    truth_w = data.global_weights
    present = np.flatnonzero(truth_w > 0)
    est = np.concatenate(res.assignments)
    true = data.pooled_labels
    out = {"time": elapsed, "n_clusters": res.n_clusters, "ari": adjusted_rand_index(true, est),
           "vi": variation_of_information(true, est)}
    align = align_clusters(est, true, n_estimated=res.weights.size, n_true=truth_w.size)
    small = present[np.argmin(truth_w[present])]
    c = align[small]
    out["rb_smallest_pi"] = float(relative_bias(res.weights[c], truth_w[small])) if c >= 0 else np.nan
    if res.weights_ci is not None:
        ok = align[present] >= 0
        cols = align[present][ok]
        out["cov_pi"] = float(np.mean(coverage(res.weights_ci[cols, 0], res.weights_ci[cols, 1],
                                               truth_w[present][ok])))
        out["cov_p"] = float(np.mean(coverage(res.profiles_ci[cols, :, 0], res.profiles_ci[cols, :, 1],
                                              data.profiles[present][ok])))
    return out


def _fmt(values):
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "na"
    return f"{v.mean():.3g} ({v.std(ddof=1) if v.size > 1 else 0:.2g})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="datasets per scenario (default 3)")
    ap.add_argument("--methods", nargs="+", default=["fed-kmodes", "fedmerdel", "discgs"])
    ap.add_argument("--scenarios", nargs="+", default=[f"{d}/{s}" for d, s in SCENARIOS])
    ap.add_argument("--json", type=Path, help="write every run's metrics here")
    ap.add_argument("--paper-tables", type=Path, default=DEFAULT_TABLES)
    args = ap.parse_args(argv)
    paper = {}
    if args.paper_tables.exists():
        paper = json.loads(args.paper_tables.read_text())["table3_runtime_clustering"]
    records = []
    for scen in args.scenarios:
        design, sep = scen.split("/")
        for seed in range(args.seeds):
            data = simulate_design(design, sep, rng=1000 + seed)
            silos = [s.codes for s in data.silos]
            n_true = int(np.count_nonzero(data.global_weights > 0))
            for m in args.methods:
                t = time.perf_counter()
                res = run_method(m, silos, data.n_modalities, n_true, seed)
                rec = evaluate(res, data, time.perf_counter() - t)
                rec.update(scenario=scen, method=m, seed=seed)
                records.append(rec)
    print("| scenario | method | time s | #clusters | ARI | VI (nats) | RB smallest pi | cov pi | cov p |"
          " paper: time / #clusters / ARI |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for scen in args.scenarios:
        for m in args.methods:
            rs = [r for r in records if r["scenario"] == scen and r["method"] == m]
            pk = PAPER_KEY.get(m)
            pp = paper.get(scen, {}).get(pk) if pk else None
            ptxt = "-"
            if pp:
                ptxt = f"{pp['time_s'][0]} / {pp['n_clusters'][0]} / {pp['ari'][0]} ({pp['ari'][1]})"
            cols = [_fmt([r[k] for r in rs]) for k in ("time", "n_clusters", "ari", "vi", "rb_smallest_pi")]
            cols += [_fmt([r.get(k, np.nan) for r in rs]) for k in ("cov_pi", "cov_p")]
            print(f"| {scen} | {m} | " + " | ".join(cols) + f" | {ptxt} |")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
