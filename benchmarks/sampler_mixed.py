"""Time per Gibbs iteration of a silo with Gaussian items against the all-binary silo of the same width (issue 45).

The EHR-like silo of ``benchmarks/sampler.py`` case (c) (9,700 rows, 80 binary conditions, C+ = 30), against the
same rows with the last 10 conditions replaced by 10 continuous items (standard normal, shifted by the rows'
first conditions so that they carry cluster information): 70 binary + 10 continuous. Each case is timed
alternately ``--repeats`` times (``run_chain``'s own timing, compilation excluded); prints the medians and their
ratio as one JSON object (``--out FILE`` also writes it).

    OPENBLAS_NUM_THREADS=1 python benchmarks/sampler_mixed.py [--iterations 400] [--repeats 5] [--out FILE]

``--items G1 G2 ...`` instead times 70 binary items with G continuous ones for each G (0: the 70 binary items
alone, on the sparse path), to separate the cost of a Gaussian item from the fixed cost of the mixed kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from _provenance import commit
from sampler import make_ehr_codes

from vcmc.atomic import atomic_write_text
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.mcmc.sampler import run_chain


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path)
    p.add_argument("--items", type=int, nargs="+", default=None, metavar="G")
    args = p.parse_args(argv)
    codes = make_ehr_codes(9700, 80, seed=3)
    rng = np.random.default_rng(0)
    values = rng.standard_normal((9700, 10)) + codes[:, :10].astype(float)
    prior = PriorConfig(n_components=30)
    sampler = SamplerConfig(n_iter=args.iterations, burn_in=args.iterations - 1, thin=1)
    cases = {"binary_80": dict(codes=codes, values=None),
             "binary_70_continuous_10": dict(codes=np.ascontiguousarray(codes[:, :70]), values=values)}
    if args.items is not None:
        seventy = np.ascontiguousarray(codes[:, :70])
        cases = {f"binary_70_continuous_{g}": dict(codes=seventy, values=np.ascontiguousarray(values[:, :g]) if g
                                                   else None) for g in args.items}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for rep in range(args.repeats + 1):
        for name, case in cases.items():
            ch = run_chain(case["codes"], [2] * case["codes"].shape[1], prior=prior, sampler=sampler, rng=rep,
                           values=case["values"])
            if rep:                                    # the first round compiles or loads the kernels
                times[name].append(ch.seconds / args.iterations * 1e3)
    med = {k: float(np.median(v)) for k, v in times.items()}
    out = {"command": "python benchmarks/sampler_mixed.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "commit": commit(), "ms_per_iteration": med, "all_ms_per_iteration": times}
    if "binary_80" in med:
        out["ratio"] = med["binary_70_continuous_10"] / med["binary_80"]
    print(json.dumps(out))  # noqa: T201
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
