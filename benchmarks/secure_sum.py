"""What the secure sums of a deployment's rounds cost (docs/federation.md, "The rounds").

Two measurements:

1. End to end, in one process: the same run (one-shot pass, then R - 1 rounds) with the analyst's own silos
   (plain vectors) and with a deployment's (``SiloPolicy()``, pinned keys, ``reproducible-rounds`` so that the
   chains can be compared), alternately, ``--runs`` times each; the rounds stage's seconds
   (``diagnostics.rounds.seconds``), their median ratio, and whether the two results are the same to the bit
   (they must be: the pads and masks cancel in every silo's sum).
2. One silo's share of a round at a given shape (silos, components, modality columns): CPU seconds to mask
   and tag its vector and to verify, sum and unpad every participant's (median of ``--repeats``), e.g. the
   application's 30 silos x 120 components x 160 columns.

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
    from vcmc.silo.policy import SiloPolicy
    from vcmc.silo.secure_sum import new_key

    sim = simulate_design(design, scenario, rng=3, n_per_silo=n_per_silo)
    keys = {d.name: new_key() for d in sim.silos}
    peers = {n: k[1] for n, k in keys.items()}
    seconds: dict[bool, list[float]] = {False: [], True: []}
    results = {}
    cfg = config_from_mapping({"sampler.n-iter": 2000, "aggregation.rounds": rounds, "assessment.enabled": False})
    for _ in range(runs):
        for secure in (False, True):
            policy = SiloPolicy(reproducible_rounds=True)
            silos = ([LocalSilo(d, policy=policy, run_key="run", rounds_key=keys[d.name][0], rounds_peers=peers)
                      for d in sim.silos] if secure else [LocalSilo(d) for d in sim.silos])
            with InProcessTransport(silos) as tr:
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
    from vcmc.protocol.rounds import pack
    from vcmc.silo import secure_sum as ss

    context = ss.context_digest("run", {})
    keys = [ss.new_key() for _ in range(n_silos)]
    publics = [k[1] for k in keys]
    secrets = [ss.pair_secrets(k[0], publics, i, context) for i, k in enumerate(keys)]
    group = b"g" * 32
    rng = np.random.default_rng(0)
    tables = [pack([(rng.integers(0, 100, n_components), rng.integers(0, 100, (n_components, n_columns)))])
              for _ in range(n_silos)]
    vectors = np.stack([ss.mask(t, secrets[i], group, i, context, 1) for i, t in enumerate(tables)])
    tags = np.stack([ss.tag(group, context, 1, i, vectors[i]) for i in range(n_silos)])
    send, receive = [], []
    for r in range(repeats):
        t = time.process_time()
        v = ss.mask(tables[0], secrets[0], group, 0, context, 2 + r)
        ss.tag(group, context, 2 + r, 0, v)
        send.append(time.process_time() - t)
        t = time.process_time()
        ss.unmasked_sum(vectors, tags, group, context, 1, silo="s")
        receive.append(time.process_time() - t)
    return {"n_silos": n_silos, "n_components": n_components, "n_columns": n_columns,
            "entries": int(tables[0].size), "median_cpu_seconds_per_silo_round": statistics.median(send) +
            statistics.median(receive), "mask_and_tag_seconds": statistics.median(send),
            "verify_and_sum_seconds": statistics.median(receive)}


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
             f"{e['components']} components, in one process): rounds stage, the analyst's own silos (plain) "
             f"{statistics.median(e['plain_seconds']):.2f} s, a deployment's (secure) "
             f"{statistics.median(e['secure_seconds']):.2f} s "
             f"(medians of {len(e['plain_seconds'])}); median ratio {e['median_ratio']:.2f}; same result to the bit: "
             f"{'yes' if e['same_result'] else 'NO'}.", "",
             "| silos | components | columns | entries | CPU ms per silo and round: mask and tag "
             "| verify, sum, unpad |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {m['n_silos']} | {m['n_components']} | {m['n_columns']} | {m['entries']} | "
              f"{1000 * m['mask_and_tag_seconds']:.2f} | {1000 * m['verify_and_sum_seconds']:.2f} |"
              for m in out["mask_alone"]]
    (args.out / "secure-sum.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
