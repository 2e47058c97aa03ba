"""The federated latent class analysis against StepMix on the pooled data (docs/design.md §15).

For each dataset, vcmc fits K = 1..--k-max by federated EM over 5 silos (best of --starts) and StepMix
(``measurement="categorical_nan"``, best of the same number of starts, its defaults otherwise) fits the
pooled rows, in a separate Python environment (StepMix is not a vcmc dependency: give its interpreter with
--stepmix-python or VCMC_STEPMIX_PYTHON; it is called by subprocess). Reported per K: both maximum
log-likelihoods and their relative difference (must be <= 0.1%), the K each BIC chooses (must agree), and
wall times. On the simulated dataset with covariate and distal effects, both fit the bias-adjusted
three-step models (StepMix ``n_steps=3, correction="ML"``) at the true K, and vcmc's estimates are
compared with StepMix's in units of vcmc's standard error (must be < 1). Then --replicates small
simulated replicates (vcmc only) give the coverage of the 95% intervals of the covariate and distal
effects (must be >= 90%).

Datasets: ``simulated`` (vcmc.lca.simulate: 3 classes, 8 binary items, 5% missing cells, covariates age and
sex, outcomes death and score), ``nested`` (vcmc.research.simulate's nested design, easy: 6 categorical variables
of 2-4 modalities) and ``ability`` (the real SAPA ability items shipped with vcmc, 1,525 rows, 16 binary
items with missing answers), each split into 5 silos.

    OPENBLAS_NUM_THREADS=1 python benchmarks/lca.py --stepmix-python PATH [--k-max 8] [--starts 10]
        [--replicates 50] [--out docs/results/lca]

Writes OUT/lca.json (with the command and commit) and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _provenance import commit  # noqa: E402

STEPMIX_SCRIPT = r"""
import json, sys, time, warnings
import numpy as np
from stepmix.stepmix import StepMix
warnings.filterwarnings("ignore")
z = np.load(sys.argv[1], allow_pickle=False)
cfg = json.loads(str(z["config"]))
X = z["X"]
out = {"fits": {}}
for k in cfg["ks"]:
    t = time.perf_counter()
    m = StepMix(n_components=k, measurement="categorical_nan", n_init=cfg["starts"], random_state=cfg["seed"],
                progress_bar=0, verbose=0)
    m.fit(X)
    out["fits"][str(k)] = {"loglik": float(m.score(X) * X.shape[0]), "bic": float(m.bic(X)),
                           "aic": float(m.aic(X)), "n_parameters": float(m.n_parameters),
                           "entropy": float(m.entropy(X)), "seconds": time.perf_counter() - t}
if "Z" in z.files:
    k = cfg["k_structural"]
    t = time.perf_counter()
    m = StepMix(n_components=k, measurement="categorical_nan", structural="covariate", n_steps=3,
                correction="ML", n_init=cfg["starts"], random_state=cfg["seed"], progress_bar=0, verbose=0,
                structural_params={"method": "newton-raphson", "max_iter": 1})
    m.fit(X, z["Z"])
    p = m.get_parameters()
    out["covariate"] = {"beta": np.asarray(p["structural"]["beta"]).tolist(),
                        "pis": np.asarray(p["measurement"]["pis"]).tolist(), "seconds": time.perf_counter() - t}
    t = time.perf_counter()
    desc = {"death": {"model": "binary_nan", "n_columns": 1}, "score": {"model": "continuous_nan", "n_columns": 1}}
    m = StepMix(n_components=k, measurement="categorical_nan", structural=desc, n_steps=3, correction="ML",
                n_init=cfg["starts"], random_state=cfg["seed"], progress_bar=0, verbose=0)
    import pandas as pd
    m.fit(X, pd.DataFrame({"death": z["Y"][:, 0], "score": z["Y"][:, 1]}))
    p = m.get_parameters()
    out["distal"] = {"death": np.asarray(p["structural"]["death"]["pis"]).tolist(),
                     "score": np.asarray(p["structural"]["score"]["means"]).tolist(),
                     "pis": np.asarray(p["measurement"]["pis"]).tolist(), "seconds": time.perf_counter() - t}
json.dump(out, open(sys.argv[2], "w"))
"""


def _text(df: pd.DataFrame) -> pd.DataFrame:
    return df.astype(object).where(df.notna(), "").astype(str).replace("<NA>", "")


def _split(df: pd.DataFrame, n_silos: int, rng) -> dict[str, pd.DataFrame]:
    order = rng.permutation(len(df))
    return {f"silo{i + 1}": _text(df.iloc[np.sort(part)].reset_index(drop=True))
            for i, part in enumerate(np.array_split(order, n_silos))}


def datasets(seed: int, ability_csv: Path):
    from vcmc.lca.simulate import simulate_lca
    from vcmc.research.simulate import simulate_design

    rng = np.random.default_rng(seed)
    sim = simulate_lca((300,) * 5, missing=0.05, rng=rng)
    yield "simulated", {f"silo{i + 1}": _text(df) for i, df in enumerate(sim.frames)}, ["age", "sex", "death", "score"]
    nested = simulate_design("nested", "easy", rng=seed, n_per_silo=300)
    frames = {s.name: _text(s.to_frame()) for s in nested.silos[:5]}
    yield "nested", frames, []
    ability = pd.read_csv(ability_csv, dtype=object, keep_default_na=False).iloc[:, 1:]
    ability = ability.replace("NA", "")
    yield "ability", _split(ability, 5, rng), []


def _stepmix(python: str, X: np.ndarray, config: dict, extra: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.json"
        np.savez(inp, X=X, config=np.asarray(json.dumps(config)), **(extra or {}))
        subprocess.run([python, "-c", STEPMIX_SCRIPT, str(inp), str(out)], check=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        return json.loads(out.read_text())


def _pooled_codes(silos) -> np.ndarray:
    codes = np.vstack([s.codes for s in silos]).astype(float)
    codes[codes < 0] = np.nan
    return codes


def _match_by_profiles(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """StepMix class of each vcmc class (binary items: StepMix's pis are laid out like vcmc's profiles)."""
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(ours[:, None, :] - theirs[None, :, : ours.shape[1]]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    return cols[np.argsort(rows)]


def compare_dataset(name, frames, exclude, args) -> dict:
    from vcmc.lca.analysis import analyse, compare, lca_silos

    ks = list(range(1, args.k_max + 1))
    aux = dict(covariates="age,sex", distal="death,score") if name == "simulated" else {}
    silos, cov, dis = lca_silos(frames, exclude=[c for c in exclude if not aux], **aux)
    t = time.perf_counter()
    table, _ = compare(silos, ks, n_starts=args.starts, rng=args.seed, waic_draws=0)
    vcmc_seconds = time.perf_counter() - t
    X = _pooled_codes(silos)
    config = {"ks": ks, "starts": args.starts, "seed": args.seed, "k_structural": 3}
    extra = None
    if name == "simulated":
        aux_frame = pd.concat([s.auxiliary for s in silos], ignore_index=True)
        extra = {"Z": np.column_stack([aux_frame["age"].astype(float), (aux_frame["sex"] == "m").astype(float)]),
                 "Y": np.column_stack([pd.to_numeric(aux_frame["death"]), pd.to_numeric(aux_frame["score"])])}
    t = time.perf_counter()
    sm = _stepmix(args.stepmix_python, X, config, extra)
    stepmix_seconds = time.perf_counter() - t
    per_k = []
    for row in table.itertuples():
        theirs = sm["fits"][str(row.k)]
        per_k.append({"k": int(row.k), "vcmc_loglik": row.log_likelihood, "stepmix_loglik": theirs["loglik"],
                      "relative_difference": abs(row.log_likelihood - theirs["loglik"]) / abs(theirs["loglik"]),
                      "vcmc_bic": row.bic, "stepmix_bic": theirs["bic"], "vcmc_n_parameters": int(row.n_parameters),
                      "stepmix_n_parameters": theirs["n_parameters"], "stepmix_seconds": theirs["seconds"]})
    out = {"dataset": name, "n_rows": int(X.shape[0]), "n_variables": int(X.shape[1]), "n_silos": len(silos),
           "per_k": per_k,
           "max_relative_difference": max(r["relative_difference"] for r in per_k),
           "vcmc_bic_k": int(table.k[table.bic.idxmin()]),
           "stepmix_bic_k": int(min(sm["fits"], key=lambda k: sm["fits"][k]["bic"])),
           "vcmc_seconds": vcmc_seconds, "stepmix_seconds": stepmix_seconds}
    if name == "simulated":
        t = time.perf_counter()
        res = analyse(silos, 3, covariates=cov, distal=dis, n_starts=args.starts, rng=args.seed)
        out["vcmc_three_step_seconds"] = time.perf_counter() - t
        ours_items = res.fit.profiles
        # covariates: StepMix's full (K, D) betas -> log odds against the class matched to vcmc's class 1
        m = _match_by_profiles(ours_items, np.asarray(sm["covariate"]["pis"]))
        beta = np.asarray(sm["covariate"]["beta"])
        theirs = beta[m[1:]] - beta[m[0]]
        se = np.sqrt(np.diag(res.covariates.cov)).reshape(theirs.shape)
        z_cov = (res.covariates.coef - theirs) / se
        md = _match_by_profiles(ours_items, np.asarray(sm["distal"]["pis"]))
        table_d = res.distal.table()
        death_ours = table_d[(table_d.outcome == "death") & (table_d.level == "1")]
        score_ours = table_d[table_d.outcome == "score"]
        death_theirs = np.asarray(sm["distal"]["death"]).reshape(3, -1)[md, -1]
        score_theirs = np.asarray(sm["distal"]["score"]).reshape(3, -1)[md, 0]
        z_death = (death_ours.estimate.to_numpy() - death_theirs) / death_ours.se.to_numpy()
        z_score = (score_ours.estimate.to_numpy() - score_theirs) / score_ours.se.to_numpy()
        out["three_step"] = {
            "covariates": {"vcmc": res.covariates.coef.tolist(), "stepmix": theirs.tolist(), "vcmc_se": se.tolist(),
                           "difference_in_se": z_cov.tolist()},
            "death": {"vcmc": death_ours.estimate.tolist(), "stepmix": death_theirs.tolist(),
                      "difference_in_se": z_death.tolist()},
            "score": {"vcmc": score_ours.estimate.tolist(), "stepmix": score_theirs.tolist(),
                      "difference_in_se": z_score.tolist()},
            "max_abs_difference_in_se": float(np.max(np.abs(np.concatenate([z_cov.ravel(), z_death, z_score])))),
            "stepmix_seconds": sm["covariate"]["seconds"] + sm["distal"]["seconds"]}
    return out


def coverage(args) -> dict:
    """Share of replicates whose 95% intervals cover the true covariate and distal effects."""
    from scipy.optimize import linear_sum_assignment

    from vcmc.lca.analysis import analyse, lca_silos
    from vcmc.lca.simulate import _PROFILES, TRUE_BETA, TRUE_DEATH, TRUE_SCORE, simulate_lca

    root = np.random.default_rng(args.seed + 1)
    hits, failures = [], 0
    full = np.vstack([np.zeros(3), TRUE_BETA])
    t = time.perf_counter()
    for _ in range(args.replicates):
        sim = simulate_lca((args.replicate_rows,) * 3, rng=root)
        silos, cov, dis = lca_silos({f"s{i}": _text(df) for i, df in enumerate(sim.frames)},
                                    covariates="age,sex", distal="death,score")
        try:
            res = analyse(silos, 3, covariates=cov, distal=dis, n_starts=3, rng=int(root.integers(2**31)))
        except Exception:  # noqa: BLE001 - a failed replicate is counted, not hidden
            failures += 1
            continue
        cost = np.abs(res.fit.profiles[:, 1::2][:, None, :] - _PROFILES[None]).sum(axis=2)
        rows, cols = linear_sum_assignment(cost)
        truth = cols[np.argsort(rows)]
        cov_t = res.covariates.table()
        expected = (full[truth[1:]] - full[truth[0]]).ravel()
        cov_hit = (cov_t.ci95_low.to_numpy() <= expected) & (expected <= cov_t.ci95_high.to_numpy())
        d = res.distal.table()
        death = d[(d.outcome == "death") & (d.level == "1")]
        score = d[d.outcome == "score"]
        death_hit = (death.ci95_low.to_numpy() <= TRUE_DEATH[truth]) & (TRUE_DEATH[truth] <= death.ci95_high.to_numpy())
        score_hit = (score.ci95_low.to_numpy() <= TRUE_SCORE[truth]) & (TRUE_SCORE[truth] <= score.ci95_high.to_numpy())
        hits.append(np.concatenate([cov_hit, death_hit, score_hit]))
    hits = np.asarray(hits, dtype=float)
    names = ([f"covariate class {c} vs 1: {t}" for c in (2, 3) for t in ("intercept", "age", "sex=m")]
             + [f"P(death | class {c})" for c in (1, 2, 3)] + [f"mean score | class {c}" for c in (1, 2, 3)])
    return {"replicates": args.replicates, "rows_per_replicate": 3 * args.replicate_rows, "failed": failures,
            "per_parameter": dict(zip(names, hits.mean(axis=0).round(3).tolist(), strict=True)),
            "overall": float(hits.mean()), "min_per_parameter": float(hits.mean(axis=0).min()),
            "seconds": time.perf_counter() - t}


def _document(args, started_at, results, cov, *, complete: bool) -> dict:
    return {"command": "python benchmarks/lca.py " + " ".join(a for a in sys.argv[1:] if "python" not in a
                                                              and not a.startswith("/")),
            "commit": started_at, "complete": complete,
            "settings": {k: v for k, v in vars(args).items() if k not in ("stepmix_python", "out")},
            "datasets": results, "coverage": cov,
            "checks": {"loglik_within_0.1%": all(r["max_relative_difference"] <= 1e-3 for r in results),
                       "same_bic_choice": all(r["vcmc_bic_k"] == r["stepmix_bic_k"] for r in results),
                       "three_step_within_one_se": all(r["three_step"]["max_abs_difference_in_se"] < 1
                                                       for r in results if "three_step" in r),
                       "coverage_at_least_90%": None if cov is None else cov["min_per_parameter"] >= 0.9}}


def _write(out: Path, doc: dict) -> None:
    from vcmc.atomic import atomic_write_json

    atomic_write_json(out / "lca.json", doc, indent=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepmix-python", default=os.environ.get("VCMC_STEPMIX_PYTHON"),
                    help="the Python interpreter of an environment with stepmix installed")
    ap.add_argument("--k-max", type=int, default=8)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--replicates", type=int, default=50)
    ap.add_argument("--replicate-rows", type=int, default=300, help="rows per silo of a replicate (3 silos)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--datasets", default="simulated,nested,ability")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "results" / "lca"))
    args = ap.parse_args()
    if not args.stepmix_python:
        ap.error("give --stepmix-python (or VCMC_STEPMIX_PYTHON): an interpreter with stepmix installed")
    ability = Path(__file__).resolve().parents[1] / "src" / "vcmc" / "research" / "datasets" / "ability.csv"
    if not ability.is_file():     # checked before the first fit: the datasets are made one after another
        ap.error(f"the shipped ability data are not at {ability}")
    wanted = set(args.datasets.split(","))
    started_at = commit()    # the code measured: the checkout's commit when the run starts
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    # lca.json is rewritten after each dataset ("complete": false until the coverage is in), so a long run
    # that is stopped keeps what it measured
    for n, f, e in datasets(args.seed, ability):
        if n in wanted:
            results.append(compare_dataset(n, f, e, args))
            doc = _document(args, started_at, results, None, complete=False)
            _write(out, doc)
    cov = coverage(args) if args.replicates > 0 else None
    doc = _document(args, started_at, results, cov, complete=True)
    _write(out, doc)
    for r in results:
        print(f"{r['dataset']:10s} n={r['n_rows']:5d}  max |dLL|/LL = {r['max_relative_difference']:.2e}  "  # noqa: T201
              f"BIC K vcmc {r['vcmc_bic_k']} / StepMix {r['stepmix_bic_k']}  time vcmc {r['vcmc_seconds']:.1f} s"
              f" / StepMix {r['stepmix_seconds']:.1f} s")
        if "three_step" in r:
            print(f"           three-step: max |vcmc - StepMix| = "  # noqa: T201
                  f"{r['three_step']['max_abs_difference_in_se']:.3f} s.e.")
    if cov:
        print(f"coverage of the 95% intervals over {cov['replicates']} replicates: overall {cov['overall']:.3f}, "  # noqa: T201
              f"lowest parameter {cov['min_per_parameter']:.3f}")
    print(json.dumps(doc["checks"]))  # noqa: T201


if __name__ == "__main__":
    main()
