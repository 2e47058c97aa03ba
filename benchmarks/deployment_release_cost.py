"""What the deployment's release rules of issue 42 cost: a run through deployed silos (``SiloPolicy()`` of a
SuperNode, in process) against the same run in the analyst's own session (``SiloPolicy.own_data``: scalars exact,
no complementary withholding needed there either way), the same seed and data.

1. The latent class analysis (docs/design.md §15; the simulated design of ``vcmc.lca.simulate``, 3 silos of 300
   rows, 3% missing cells), operators allowing ``lca`` and ``lca-structural``, default limits (minimum cluster
   size 10, nothing else): the log-likelihood and entropy of every E-step on a grid of 10 rows' worth, the
   structural sums on theirs. Reported per K = 1..4: the EM rounds, the exact log-likelihood at each fit's
   parameters (one exact E-step of the own-session silos) and its difference, the largest difference of a
   profile probability and of a weight, the BIC each reports and the K it chooses; at K = 3 the covariate and
   distal estimates' differences in units of the own session's standard errors.
2. The Bayesian fit (vcmc.research.simulate's nested design, easy, 4 silos of 300 rows; and, where global
   clusters are thin in some silo, the same with a fourth silo of 40 rows; one-shot pass, 2,000 iterations):
   the entropy on a grid of 10 x log C, the Monte Carlo error as
   its bound (every draw averaged), the WAIC sums on their grids, occupancy from the minimum cluster size,
   complementary withholding of the assign counts.
   Reported: relative entropy, the WAIC, the Monte Carlo error, the posterior of K and the counts withheld
   (clusters and rows) with and without complements, from the silos' own labels.

    OPENBLAS_NUM_THREADS=1 python benchmarks/deployment_release_cost.py [--seed 1] [--out docs/results/issue42]

Writes OUT/deployment_release_cost.json (with the command and commit) and prints it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _provenance import commit  # noqa: E402

DEPLOYED = dict(allowed_strategies=("contingency", "lca", "lca-structural"))


def _deployed_copies(silos):
    from vcmc.silo.local import LocalSilo
    from vcmc.silo.policy import SiloPolicy

    return [LocalSilo(s.data, privacy=s.privacy, auxiliary=s.auxiliary, policy=SiloPolicy(**DEPLOYED),
                      run_key="bench", secure_noise=False) for s in silos]


def lca_part(seed: int) -> dict:
    from vcmc.federation.transport import InProcessTransport
    from vcmc.lca.analysis import analyse, lca_silos
    from vcmc.lca.em import estep
    from vcmc.lca.simulate import simulate_lca

    sim = simulate_lca((300, 300, 300), missing=0.03, rng=seed)
    frames = {f"site{i + 1}": df.astype(object).where(df.notna(), "").astype(str) for i, df in enumerate(sim.frames)}
    own, cov, dis = lca_silos(frames, covariates="age:numeric,sex", distal="death,score:numeric")
    exact = InProcessTransport(own)
    out = {"per_k": {}}
    for k in (1, 2, 3, 4):
        row = {}
        fits = {}
        # fresh deployed silos per K: each is one run (its request budgets are per run)
        for label, silos in (("own", own), ("deployed", _deployed_copies(own))):
            t0 = time.perf_counter()
            a = analyse(silos, k, n_starts=5, max_iter=1000, rng=seed)
            fits[label] = a
            truth = estep(exact.call, list(exact.silos), a.fit.pi, a.fit.profiles)
            row[label] = {"em_rounds": int(a.fit.n_rounds), "loglik_reported": float(a.fit.loglik),
                          "loglik_exact": float(truth.loglik), "bic_reported": float(a.fit.statistics["bic"]),
                          "entropy_reported": float(a.fit.entropy), "seconds": time.perf_counter() - t0}
            if k == 3:     # the three-step models at the own session's measurement model, so only they differ
                row[label].update(_three_step(silos, fits["own"].fit, cov, dis))
        o, d = fits["own"].fit, fits["deployed"].fit
        row["loglik_exact_difference"] = row["deployed"]["loglik_exact"] - row["own"]["loglik_exact"]
        row["max_profile_difference"] = float(np.max(np.abs(o.profiles - d.profiles)))
        row["max_weight_difference"] = float(np.max(np.abs(o.pi - d.pi)))
        if k == 3:
            for part in ("covariates", "distal"):
                mine, theirs = row["own"].get(part), row["deployed"].get(part)
                if isinstance(mine, dict) and isinstance(theirs, dict):
                    est_o, est_d = np.asarray(mine["estimate"]), np.asarray(theirs["estimate"])
                    se_o, se_d = np.asarray(mine["se"]), np.asarray(theirs["se"])
                    row[f"{part}_max_difference_in_se"] = float(np.max(np.abs(est_o - est_d) / se_o))
                    row[f"{part}_se_ratio_range"] = [float(np.min(se_d / se_o)), float(np.max(se_d / se_o))]
        out["per_k"][str(k)] = row
    for label in ("own", "deployed"):
        bics = {k: out["per_k"][k][label]["bic_reported"] for k in out["per_k"]}
        out[f"k_by_bic_{label}"] = int(min(bics, key=bics.get))
    return out


def _three_step(silos, fit, cov, dis) -> dict:
    """The covariate and the distal model at the measurement model ``fit`` (each, or the reason it failed)."""
    from vcmc.federation.transport import InProcessTransport
    from vcmc.lca.structural import classification_error, fit_covariates, fit_distal

    tr = InProcessTransport(silos)
    names = list(tr.silos)
    out = {}
    error = classification_error(tr.call, names, fit)
    for part, run, spec in (("covariates", fit_covariates, cov), ("distal", fit_distal, dis)):
        try:
            table = run(tr.call, names, fit, spec, error=error).table()
            out[part] = {"estimate": table.estimate.tolist(), "se": table.se.tolist()}
        except Exception as exc:      # noqa: BLE001 - a model the grid leaves singular is reported, not raised
            out[part] = f"{type(exc).__name__}: {exc}"
    return out


def bayes_part(seed: int, design: str = "nested", separability: str = "easy", n_per_silo=300,
               min_size: int = 10) -> dict:
    from vcmc.config import FitConfig, PrivacyConfig, SamplerConfig
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import run_vcmc
    from vcmc.research.simulate import simulate_design
    from vcmc.silo.local import LocalSilo
    from vcmc.silo.policy import SiloPolicy
    from vcmc.silo.release import withheld_entries

    sim = simulate_design(design, separability, rng=seed, n_per_silo=n_per_silo)
    cfg = FitConfig(sampler=SamplerConfig(n_iter=2000))
    cfg = dataclasses.replace(cfg, aggregation=dataclasses.replace(cfg.aggregation, rounds=1))
    out = {}
    for label, policy in (("own", SiloPolicy.own_data()), ("deployed", SiloPolicy())):
        silos = [LocalSilo(d, policy=policy, privacy=PrivacyConfig(min_cluster_size=min_size),
                           run_key=None if label == "own" else "bench") for d in sim.silos]
        t0 = time.perf_counter()
        res = run_vcmc(InProcessTransport(silos), cfg, rng=seed)
        seconds = time.perf_counter() - t0
        d = res.diagnostics
        counts = np.asarray(res.partition_counts)
        withheld = {"primary_clusters": 0, "primary_rows": 0, "with_complements_clusters": 0,
                    "with_complements_rows": 0}
        for silo in silos:
            truth = np.bincount(silo.assignments, minlength=counts.shape[1]).astype(float)
            primary = (truth > 0) & (truth < min_size)
            both = withheld_entries(silo.gate, truth)
            withheld["primary_clusters"] += int(primary.sum())
            withheld["primary_rows"] += int(truth[primary].sum())
            withheld["with_complements_clusters"] += int(both.sum())
            withheld["with_complements_rows"] += int(truth[both].sum())
        k_post = d["n_clusters_posterior"]["global"]
        out[label] = {"n_clusters": int(res.n_clusters), "relative_entropy": d["classification"]["relative_entropy"],
                      "monte_carlo": d["classification"]["monte_carlo"], "waic": d.get("waic"),
                      "k_posterior_global": k_post, "partition_counts": counts.tolist(),
                      "withheld_in_partition_counts": withheld, "seconds": seconds}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("docs/results/issue42"))
    args = parser.parse_args(argv)
    result = {"command": " ".join(["python", "benchmarks/deployment_release_cost.py", *(argv or sys.argv[1:])]),
              "commit": commit(), "seed": args.seed, "lca": lca_part(args.seed),
              "bayes": bayes_part(args.seed),
              # thin clusters in some silos: where complementary withholding acts
              "bayes_thin": bayes_part(args.seed, n_per_silo=(300, 300, 300, 40))}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "deployment_release_cost.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
