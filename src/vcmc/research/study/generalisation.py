"""Tables and figure of the generalisation suite (``vcmc study --profile generalisation``).

Per design and method, over replicates: mean ARI, its difference to full-data MCMC on the same data, the
number of clusters K and how often it is within 1 of full MCMC's, how many true clusters are recovered
(best F1 >= 0.8, ``vcmc.metrics.best_f1``) and the **fragments**: extra global clusters that are pieces of
one true cluster (``vcmc.metrics.majority_pieces`` minus one), counted for the true clusters that full MCMC
recovers and that live in several silos (the failure that matching can cause and pooled data cannot). The
library's default passes a design when its mean ARI is within 0.03 of full MCMC's, its K is within 1 of
full MCMC's in at least 90% of replicates and it leaves no such fragment.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from vcmc.atomic import atomic_path, atomic_write_text
from vcmc.research.study.runner import SENSITIVITY_LEVELS, atomic_write_json, load_cells
from vcmc.research.study.tables import method_label

__all__ = ["DEFAULT_METHOD", "RECOVERED_F1", "suite_frame", "suite_table", "write_suite_tables"]

DEFAULT_METHOD = "vcmc-calibrated"
REFERENCE = "full-mcmc"
RECOVERED_F1 = 0.8
ARI_MARGIN = 0.03
K_WITHIN = 1
K_SHARE = 0.9


def suite_frame(cells: list[dict]) -> pd.DataFrame:
    """One row per (design, replicate, method) with the suite's metrics, relative to full MCMC."""
    rows = []
    for cell in cells:
        methods = cell.get("methods", {})
        ref = methods.get(REFERENCE) or {}
        ref_f1 = np.asarray(ref.get("f1") or [], dtype=float)
        n_silos = np.asarray(cell["truth"].get("n_silos") or [], dtype=int)
        true_k = int(np.count_nonzero(np.asarray(cell["truth"]["sizes"]) > 0))
        for name, m in methods.items():
            f1 = np.asarray(m.get("f1") or [], dtype=float)
            pieces = np.asarray(m.get("pieces") or [], dtype=int)
            spread = n_silos >= 2 if n_silos.size == pieces.size else np.ones(pieces.size, bool)
            by_ref = ref_f1 >= RECOVERED_F1 if ref_f1.size == pieces.size else np.ones(pieces.size, bool)
            extra = np.maximum(pieces - 1, 0)
            me = m.get("matching_estimated") or {}
            mt = m.get("matching_true") or {}
            row = {"design": cell["scenario"], "replicate": cell["replicate"], "method": name,
                   "true_k": true_k, "ari": m.get("ari"), "n_clusters": m.get("n_clusters"),
                   "ari_full": ref.get("ari"), "k_full": ref.get("n_clusters"),
                   "recovered": int(np.sum(f1 >= RECOVERED_F1)) if f1.size else np.nan,
                   "fragments": int(extra[spread & by_ref].sum()) if pieces.size else np.nan,
                   "fragments_any": int(extra.sum()) if pieces.size else np.nan,
                   "time_s": m.get("time_s"), "time_parallel_s": m.get("time_parallel_s"),
                   "correct_true": mt.get("correct"), "ari_match": me.get("ari"),
                   "k_match": me.get("n_global")}
            for level, ev in (m.get("matching_levels") or {}).items():
                row[f"ari_at_{level}"] = ev.get("ari")
                row[f"k_at_{level}"] = ev.get("n_global")
            rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for c in df.columns:
        if c not in ("design", "method"):
            df[c] = pd.to_numeric(df[c], errors="coerce")
    df["d_ari"] = df["ari"] - df["ari_full"]
    df["k_ok"] = (df["n_clusters"] - df["k_full"]).abs() <= K_WITHIN
    return df


def _order(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    from vcmc.research.study.designs import GENERALISATION_DESIGNS
    from vcmc.research.study.profiles import GENERALISATION_METHODS

    designs = [d for d in GENERALISATION_DESIGNS if d in set(df["design"])]
    designs += sorted(set(df["design"]) - set(designs))
    methods = [m for m in GENERALISATION_METHODS if m in set(df["method"])]
    methods += sorted(set(df["method"]) - set(methods))
    return designs, methods


def suite_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (design, method): the means and the default's verdict (module docstring)."""
    rows = []
    designs, methods = _order(df)
    for d in designs:
        for m in methods:
            g = df[(df["design"] == d) & (df["method"] == m)]
            if g.empty:
                continue
            row = {"design": d, "method": m, "n_replicates": int(len(g)), "true_k": float(g["true_k"].mean()),
                   "ari_mean": float(g["ari"].mean()), "ari_sd": float(g["ari"].std(ddof=1)) if len(g) > 1
                   else float("nan"), "d_ari_vs_full": float(g["d_ari"].mean()),
                   "k_mean": float(g["n_clusters"].mean()), "k_full_mean": float(g["k_full"].mean()),
                   "k_within_1_of_full_pct": 100.0 * float(g["k_ok"].mean()),
                   "recovered_mean": float(g["recovered"].mean()),
                   "fragments_total": int(np.nansum(g["fragments"])),
                   "fragments_any_total": int(np.nansum(g["fragments_any"])),
                   "correct_with_true_partitions_pct": 100.0 * float(g["correct_true"].mean())
                   if g["correct_true"].notna().any() else float("nan"),
                   "time_s_mean": float(g["time_s"].mean())}
            if m != REFERENCE:
                row["passes"] = bool(row["d_ari_vs_full"] >= -ARI_MARGIN
                                     and row["k_within_1_of_full_pct"] >= 100 * K_SHARE
                                     and row["fragments_total"] == 0)
            rows.append(row)
    return pd.DataFrame(rows)


def sensitivity_table(df: pd.DataFrame) -> pd.DataFrame:
    """Calibrated matching at other levels on the same summaries: pre-aggregation ARI and K."""
    g = df[df["method"] == DEFAULT_METHOD]
    rows = []
    from vcmc.closeness import DEFAULT_LEVEL

    levels = [(f"{DEFAULT_LEVEL} (default)", "ari_match", "k_match")] + [
        (str(lv), f"ari_at_{lv}", f"k_at_{lv}") for lv in SENSITIVITY_LEVELS]
    for d, sub in g.groupby("design", sort=False):
        for label, ari, k in levels:
            if ari not in sub or sub[ari].isna().all():
                continue
            rows.append({"design": d, "level": label, "ari_mean": float(sub[ari].mean()),
                         "k_mean": float(sub[k].mean()),
                         "k_within_1_of_full_pct": 100.0 * float(((sub[k] - sub["k_full"]).abs() <= 1).mean())})
    return pd.DataFrame(rows)



def _fmt(x, nd=2) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{nd}f}"


def suite_markdown(t: pd.DataFrame, sens: pd.DataFrame) -> str:
    from vcmc.research.study.designs import GENERALISATION_DESIGNS

    lines = ["## Generalisation suite: per design and method (means over replicates)", "",
             "ΔARI = ARI − full-data MCMC's ARI on the same data; K±1 = share of replicates whose number of "
             "clusters is within 1 of full MCMC's; recovered = true clusters with best F1 ≥ 0.8; fragments = "
             "extra global clusters that are pieces of a true cluster full MCMC recovers and that lives in "
             "several silos (total over replicates; in brackets: pieces of any true cluster). "
             "**pass** = ΔARI ≥ −0.03, K±1 ≥ 90% and no fragment.", "",
             "| design | method | reps | true K | ARI (sd) | ΔARI | K (full) | K±1 | recovered | fragments | "
             "correct (true partitions) | time (s) | pass |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    seen = set()
    for r in t.itertuples():
        desc = GENERALISATION_DESIGNS[r.design].description if r.design in GENERALISATION_DESIGNS else ""
        name = f"{r.design}<br><sub>{desc}</sub>" if r.design not in seen else ""
        seen.add(r.design)
        verdict = "" if r.method == REFERENCE else ("**pass**" if r.passes else "fail")
        lines.append(
            f"| {name} | {method_label(r.method)} | {r.n_replicates} | {r.true_k:.0f} | "
            f"{_fmt(r.ari_mean, 3)} ({_fmt(r.ari_sd, 3)}) | {_fmt(r.d_ari_vs_full, 3)} | {_fmt(r.k_mean, 1)} "
            f"({_fmt(r.k_full_mean, 1)}) | {r.k_within_1_of_full_pct:.0f}% | {_fmt(r.recovered_mean, 1)} | "
            f"{r.fragments_total} ({r.fragments_any_total}) | {_fmt(r.correct_with_true_partitions_pct, 0)}% | "
            f"{_fmt(r.time_s_mean, 1)} | {verdict} |")
    if not sens.empty:
        lines += ["", "## Calibrated matching at other levels (same summaries, before aggregation)", "",
                  "| design | level | ARI | K | K±1 of full MCMC |", "| --- | --- | --- | --- | --- |"]
        for r in sens.itertuples():
            lines.append(f"| {r.design} | {r.level} | {_fmt(r.ari_mean, 3)} | {_fmt(r.k_mean, 1)} | "
                         f"{r.k_within_1_of_full_pct:.0f}% |")
    return "\n".join(lines) + "\n"


def suite_figure(t: pd.DataFrame, path: Path) -> Path:
    """ΔARI and K − K(full MCMC) per design, one marker per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    designs = list(dict.fromkeys(t["design"]))
    methods = [m for m in dict.fromkeys(t["method"]) if m != REFERENCE]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(designs) + 1.5), sharey=True)
    y = np.arange(len(designs))
    for j, m in enumerate(methods):
        sub = t[t["method"] == m].set_index("design").reindex(designs)
        off = (j - (len(methods) - 1) / 2) * 0.15
        axes[0].scatter(np.clip(sub["d_ari_vs_full"], -0.6, 0.2), y + off, label=method_label(m), s=22)
        axes[1].scatter(np.clip(sub["k_mean"] - sub["k_full_mean"], -10, 40), y + off, s=22)
    axes[0].axvline(-ARI_MARGIN, color="grey", ls="--", lw=0.8)
    axes[0].axvline(0, color="black", lw=0.6)
    axes[1].axvline(0, color="black", lw=0.6)
    axes[0].set_yticks(y, designs)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("ARI − full MCMC's (clipped at −0.6)")
    axes[1].set_xlabel("K − full MCMC's K (clipped at 40)")
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return path


def write_suite_tables(out, cells: list[dict] | None = None, *, figures: bool = True) -> dict[str, Path]:
    """Write ``tables/generalisation.{csv,md}``, ``tables/generalisation_levels.csv`` and the figure."""
    out = Path(out)
    if cells is None:
        manifest = json.loads((out / "study.json").read_text(encoding="utf-8"))
        cells = load_cells(out, fingerprint=manifest["fingerprint"], seed=manifest["root_seed"])
    df = suite_frame(cells)
    t = suite_table(df)
    sens = sensitivity_table(df) if not df.empty else pd.DataFrame()
    tables = out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    paths = {"csv": tables / "generalisation.csv", "levels": tables / "generalisation_levels.csv",
             "markdown": tables / "generalisation.md", "replicates": tables / "generalisation_replicates.csv"}
    with atomic_path(paths["csv"]) as tmp:
        t.to_csv(tmp, index=False)
    with atomic_path(paths["levels"]) as tmp:
        sens.to_csv(tmp, index=False)
    with atomic_path(paths["replicates"]) as tmp:
        df.to_csv(tmp, index=False)
    atomic_write_text(paths["markdown"], suite_markdown(t, sens))
    if figures and not t.empty:
        paths["figure"] = suite_figure(t, out / "figures" / "generalisation.png")
    atomic_write_json(tables / "generalisation_verdict.json",
                      {"default": DEFAULT_METHOD, "passes": {r.design: bool(r.passes) for r in t.itertuples()
                                                             if r.method == DEFAULT_METHOD}})
    return paths
