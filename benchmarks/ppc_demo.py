"""The demo's posterior predictive checks on its correctly specified simulation (issue 46): the share of
checks flagged (ppp outside [0.025, 0.975]) after the default rounds, each silo checked at its own weights
(``round_labels = "silo"``, the default) against the pooled weights (``round_labels = "pooled"``).

For each seed: ``vcmc simulate --design nested --separability easy`` (vcmc demo's design: 4 silos x 1,000 rows,
6 true clusters), then ``vcmc fit`` with the default protocol and rounds, once per labelling. Every table of
``diagnostics.ppc`` counts (pooled and per silo: 26 prevalences x 5, 213 pairs x 5).

    python benchmarks/ppc_demo.py --seeds 2026,1,2 --out docs/results/ppc-demo
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _provenance import commit

LOW = 0.025


def flagged(result: Path) -> dict:
    d = json.loads(result.read_text())["diagnostics"]
    out = {"weights": (d.get("rounds") or {}).get("assessment", {}).get("weights")}
    for key in ("prevalence", "pairs"):
        table = d["ppc"][key]["table"]
        bad = [r for r in table if r.get("ppp") is not None and not LOW <= r["ppp"] <= 1 - LOW]
        out[key] = {"flagged": len(bad), "checks": len(table), "share": len(bad) / len(table),
                    "statistic": d["ppc"][key]["statistic"], "p_value": d["ppc"][key]["p_value"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="2026,1,2")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    vcmc = str(Path(sys.executable).parent / "vcmc")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            data = Path(tmp) / f"data{seed}"
            subprocess.run([vcmc, "simulate", "--design", "nested", "--separability", "easy", "--seed", str(seed),
                            "--out", str(data)], check=True, capture_output=True)
            files = sorted(str(p) for p in data.glob("silo_*.csv"))
            for labels in ("silo", "pooled"):
                out = Path(tmp) / f"fit{seed}-{labels}"
                subprocess.run([vcmc, "fit", *files, "--out", str(out), "--seed", str(seed), "--jobs",
                                str(args.jobs), "--set", f"aggregation.round-labels={labels}"], check=True,
                               capture_output=True)
                runs.append({"seed": seed, "round_labels": labels, **flagged(out / "result.json")})
                r = runs[-1]
                print(f"seed {seed} labels {labels:6s} (checked at {r['weights']} weights): prevalence "
                      f"{r['prevalence']['flagged']}/{r['prevalence']['checks']}, pairs "
                      f"{r['pairs']['flagged']}/{r['pairs']['checks']}", flush=True)
    doc = {"command": "python benchmarks/ppc_demo.py " + " ".join(sys.argv[1:]), "commit": commit(),
           "nominal_share": 2 * LOW, "runs": runs}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ppc-demo.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
