"""The latent class analysis with Gaussian items against StepMix on the pooled data (docs/design.md §17).

Simulated mixed designs (4 categorical variables, continuous items in their own units, 3 silos; homogeneous or
heterogeneous silo weights), seeded: vcmc fits K = 1..--k-max by federated EM over the silos (best of --starts
random starts, ``vcmc.lca.analysis.compare``) and StepMix fits the pooled rows with ``categorical_nan`` +
``gaussian_diag`` (``gaussian_diag_nan`` with missing values; ``n_init`` = --starts, ``abs_tol`` 1e-10).
Reported per K: both maximised log-likelihoods, their relative difference, and both BIC choices of K. Needs
StepMix in the running environment (``pip install stepmix``; it is not a vcmc dependency). Prints one JSON
object; ``--out FILE`` also writes it.

    OPENBLAS_NUM_THREADS=1 python benchmarks/lca_gaussian.py [--k-max 5] [--starts 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from _provenance import commit

from vcmc.data.schema import ContinuousVariable, Schema
from vcmc.lca.analysis import compare
from vcmc.research.simulate_mixed import simulate_mixed
from vcmc.silo.local import LocalSilo

DESIGNS = {
    "homogeneous": dict(n_rows=[300, 400, 500], weights=[0.5, 0.3, 0.2], missing=0.0,
                        means=[[35, 50, 120], [50, 65, 130], [65, 40, 140]], sds=[[5, 7, 10], [6, 5, 12], [4, 6, 9]]),
    "heterogeneous": dict(n_rows=[300, 400, 500], weights=[[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.2, 0.7]],
                          missing=0.05, means=[[35, 50], [45, 60], [65, 40]], sds=[[5, 7], [6, 5], [4, 6]]),
    "overlapping": dict(n_rows=[500, 500, 500], weights=[0.4, 0.35, 0.25], missing=0.0,
                        means=[[0.0, 0.0], [1.0, 0.5], [2.0, -0.5]], sds=[[1.0, 1.0], [0.8, 1.2], [1.0, 0.7]]),
}


def _silos(design: dict, seed: int):
    silos, _ = simulate_mixed(design["n_rows"], design["weights"], design["means"], design["sds"],
                              missing=design["missing"], rng=seed)
    x = np.vstack([s.values for s in silos])
    cont = tuple(ContinuousVariable(f"X{g + 1}", float(np.nanmean(x[:, g])), float(np.nanstd(x[:, g])))
                 for g in range(x.shape[1]))
    schema = Schema(silos[0].schema.variables, continuous=cont)
    return [dataclasses.replace(s, schema=schema) for s in silos]


def _stepmix(silos, ks, starts: int) -> list[float]:
    from stepmix.stepmix import StepMix

    codes = np.vstack([s.codes for s in silos])
    x = np.vstack([s.values for s in silos])
    data = np.column_stack([np.where(codes < 0, np.nan, codes).astype(float), x])
    out = []
    for k in ks:
        model = StepMix(n_components=k, n_init=starts, max_iter=1000, abs_tol=1e-10, random_state=0, verbose=0,
                        progress_bar=0, measurement={
                            "categorical": {"model": "categorical_nan", "n_columns": codes.shape[1]},
                            "continuous": {"model": "gaussian_diag_nan" if np.isnan(x).any() else "gaussian_diag",
                                           "n_columns": x.shape[1]}})
        model.fit(data)
        out.append(float(model.score(data) * data.shape[0]))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k-max", type=int, default=5)
    p.add_argument("--starts", type=int, default=10)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    ks = list(range(1, args.k_max + 1))
    result = {"command": "python benchmarks/lca_gaussian.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "commit": commit(), "designs": {}}
    for i, (name, design) in enumerate(DESIGNS.items()):
        silos = _silos(design, args.seed + i)
        table, _ = compare([LocalSilo(s) for s in silos], ks, n_starts=args.starts, rng=args.seed, waic_draws=0)
        ours = table["log_likelihood"].tolist()
        theirs = _stepmix(silos, ks, args.starts)
        n = sum(s.n_rows for s in silos)
        bic_theirs = [-2 * ll + p * np.log(n) for ll, p in zip(theirs, table["n_parameters"], strict=True)]
        result["designs"][name] = {
            "true_k": len(design["means"]), "rows": n, "k": ks, "vcmc_loglik": ours, "stepmix_loglik": theirs,
            "relative_difference": [(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True)],
            "vcmc_bic_k": ks[int(np.argmin(table["bic"]))], "stepmix_bic_k": ks[int(np.argmin(bic_theirs))]}
    text = json.dumps(result, indent=1)
    print(text)  # noqa: T201
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
