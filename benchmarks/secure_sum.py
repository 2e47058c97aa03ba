"""What secure aggregation of the rounds' tables costs (aggregation.round_secure_sum, docs/design.md §16).

Two measurements:

1. End to end, in one process: the same run (one-shot pass, then R - 1 rounds) with and without the secure
   sum, alternately, ``--runs`` times each; the rounds stage's seconds (``diagnostics.rounds.seconds``), their
   median ratio, and whether the two results are the same to the bit (they must be: the masks cancel).
2. The masking alone at a given shape (silos, components, modality columns): CPU seconds of one silo's mask
   per round (median of ``--repeats``), e.g. the application's 30 silos x 120 components x 160 columns.

    python benchmarks/secure_sum.py --out docs/results/real/rounds/secure-sum
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _provenance import commit  # noqa: E402


def _end_to_end(design: str, scenario: str, n_per_silo: int, rounds: int, runs: int) -> dict:
    from vcmc.config import config_from_mapping
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import run_vcmc
    from vcmc.research.simulate import simulate_design
    from vcmc.silo.local import LocalSilo

    sim = simulate_design(design, scenario, rng=3, n_per_silo=n_per_silo)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    results = {}
    for _ in range(runs):
        for secure in (False, True):
            cfg = config_from_mapping({"sampler.n-iter": 2000, "aggregation.rounds": rounds,
                                       "assessment.enabled": False, "aggregation.round-secure-sum": secure})
            with InProcessTransport([LocalSilo(d) for d in sim.silos]) as tr:
                res = run_vcmc(tr, cfg, rng=11)
            seconds[secure].append(float(res.diagnostics["rounds"]["seconds"]))
            results[secure] = res
    a, b = results[False], results[True]
    same = bool(np.array_equal(a.weights, b.weights) and np.array_equal(a.profile_draws, b.profile_draws)
                and all(np.array_equal(x, y) for x, y in zip(a.assignments, b.assignments, strict=True)))
    ratios = [s / p for p, s in zip(seconds[False], seconds[True], strict=True)]
    return {"design": f"{design}/{scenario}", "n_per_silo": n_per_silo, "n_silos": len(sim.silos), "rounds": rounds,
            "components": int(a.diagnostics["rounds"]["components"]), "plain_seconds": seconds[False],
            "secure_seconds": seconds[True], "median_ratio": statistics.median(ratios), "same_result": same}


def _mask_alone(n_silos: int, n_components: int, n_columns: int, repeats: int) -> dict:
    from vcmc.protocol.rounds import pack_counts
    from vcmc.silo import secure_sum as ss

    private = [ss.new_private_key() for _ in range(n_silos)]
    public = np.stack([ss.public_key(p) for p in private])
    secrets = ss.pair_secrets(private[0], public, 0)
    rng = np.random.default_rng(0)
    packed = pack_counts(rng.integers(0, 100, n_components), rng.integers(0, 100, (n_components, n_columns)))
    times = []
    for r in range(repeats):
        t = time.process_time()
        ss.mask(packed, secrets, 0, r.to_bytes(8, "little"))
        times.append(time.process_time() - t)
    return {"n_silos": n_silos, "n_components": n_components, "n_columns": n_columns,
            "entries": int(packed.size), "median_cpu_seconds_per_silo_round": statistics.median(times)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="nested/easy")
    ap.add_argument("--n-per-silo", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", nargs="+", default=["4x60x30", "30x120x160"],
                    help="SILOSxCOMPONENTSxCOLUMNS of the masking alone")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("docs/results/real/rounds/secure-sum"))
    args = ap.parse_args(argv)
    design, scenario = args.design.split("/")
    out = {"command": " ".join(["python benchmarks/secure_sum.py", *(argv or sys.argv[1:])]), "commit": commit(),
           "end_to_end": _end_to_end(design, scenario, args.n_per_silo, args.rounds, args.runs),
           "mask_alone": [_mask_alone(*map(int, s.split("x")), args.repeats) for s in args.shapes]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "secure-sum.json").write_text(json.dumps(out, indent=1) + "\n")
    e = out["end_to_end"]
    lines = [f"Command: `{out['command']}` at commit {out['commit']}.", "",
             f"End to end ({e['design']}, {e['n_silos']} silos x {e['n_per_silo']}, {e['rounds']} rounds, "
             f"{e['components']} components, in one process): rounds stage plain "
             f"{statistics.median(e['plain_seconds']):.2f} s, secure {statistics.median(e['secure_seconds']):.2f} s "
             f"(medians of {len(e['plain_seconds'])}); median ratio {e['median_ratio']:.2f}; same result to the bit: "
             f"{'yes' if e['same_result'] else 'NO'}.", "",
             "| silos | components | columns | entries | CPU ms per silo and round |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {m['n_silos']} | {m['n_components']} | {m['n_columns']} | {m['entries']} | "
              f"{1000 * m['median_cpu_seconds_per_silo_round']:.2f} |"
              for m in out["mask_alone"]]
    (args.out / "secure-sum.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
