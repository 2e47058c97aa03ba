"""Files of the latent class analysis: tables (CSV), figures (PNG) and a report page, all written atomically.

``write_comparison``: ``comparison.csv`` (``k, log_likelihood, n_parameters, aic, bic, sabic, caic, entropy,
relative_entropy, waic``) and ``comparison.png``. ``write_analysis``: ``lca.json`` (settings, weights,
fit statistics), ``fit_statistics.csv``, ``item_probabilities.csv`` and ``.png`` (poLCA's plot),
``covariates.csv`` (``cluster, term, estimate, se, ci95_low, ci95_high``), ``distal.csv`` (``cluster, outcome,
level, estimate, se, ci95_low, ci95_high``), ``distal_tests.csv`` and ``forest.png``. ``write_lca_report``:
``report.html`` with the sections of docs/design.md §15.5, from the fitted objects or (``vcmc report DIR``,
``lca_report_from_folder``) from the files above.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vcmc.atomic import atomic_path, atomic_write_bytes, atomic_write_json, atomic_write_text

CRITERIA = ("aic", "bic", "sabic", "caic", "waic")


def _csv(df: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return path


def comparison_figure(table: pd.DataFrame):
    """Information criteria against K (lower is better; the minimum of each marked) and relative entropy."""
    from vcmc.report.figures import new_figure

    fig = new_figure(8.0, 3.4)
    ax, ax2 = fig.subplots(1, 2, width_ratios=[2, 1])
    for crit in CRITERIA:
        y = table[crit].to_numpy(dtype=float)
        if not np.any(np.isfinite(y)):
            continue
        line, = ax.plot(table["k"], y, marker="o", ms=3, label=crit.upper())
        best = int(np.nanargmin(y))
        ax.plot(table["k"].iloc[best], y[best], marker="*", ms=11, color=line.get_color())
    ax.set_xlabel("number of classes K")
    ax.set_ylabel("criterion (lower is better; * minimum)")
    ax.legend(fontsize=7)
    ax2.plot(table["k"], table["relative_entropy"], marker="o", ms=3, color="#55a868")
    ax2.set_ylim(0, 1.02)
    ax2.set_xlabel("number of classes K")
    ax2.set_ylabel("relative entropy")
    return fig


def write_comparison(table: pd.DataFrame, out) -> dict[str, Path]:
    from vcmc.report.figures import png

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return {"comparison": _csv(table, out / "comparison.csv"),
            "figure": atomic_write_bytes(out / "comparison.png", png(comparison_figure(table)))}


def item_figure(profiles: pd.DataFrame):
    """poLCA's plot: per class (panel) and variable (group), the modality probabilities stacked, with the
    95% interval of each modality's probability beside a point."""
    from vcmc.report.figures import new_figure

    classes = sorted(profiles["cluster"].unique())
    variables = list(dict.fromkeys(profiles["variable"]))
    fig = new_figure(max(6.0, 0.45 * len(variables) + 2.0), 1.6 + 1.6 * len(classes))
    axes = np.atleast_1d(fig.subplots(len(classes), 1, sharex=True))
    cmap = __import__("matplotlib").colormaps["tab10"]
    for ax, c in zip(axes, classes, strict=True):
        sub = profiles[profiles["cluster"] == c]
        for j, v in enumerate(variables):
            rows = sub[sub["variable"] == v]
            bottom = 0.0
            for m, r in enumerate(rows.itertuples()):
                ax.bar(j, r.probability, bottom=bottom, color=cmap(m % 10), width=0.7, edgecolor="white")
                bottom += r.probability
            last = rows.iloc[-1]     # the last modality's probability and its interval, drawn from the top
            ax.errorbar(j, 1.0 - last.probability, yerr=[[last.ci95_high - last.probability],
                                                         [last.probability - last.ci95_low]],
                        fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"class {c}", fontsize=8)
    axes[-1].set_xticks(range(len(variables)), variables, rotation=60, ha="right", fontsize=7)
    return fig


def forest_figure(covariates: pd.DataFrame | None, distal: pd.DataFrame | None):
    """Estimates with 95% intervals: covariates' log odds (against class 1) and outcomes by class."""
    from vcmc.report.figures import new_figure

    panels = [(t, d) for t, d in (("covariates: log odds against class 1", covariates),
                                  ("distal outcomes by class", distal)) if d is not None and len(d)]
    n_rows = sum(len(d) for _, d in panels)
    fig = new_figure(7.0, 1.0 + 0.22 * n_rows + 0.5 * len(panels))
    axes = np.atleast_1d(fig.subplots(len(panels), 1, height_ratios=[max(len(d), 1) for _, d in panels]))
    for ax, (title, d) in zip(axes, panels, strict=True):
        labels = [f"class {r.cluster}: " + (f"{r.term}" if "term" in d else f"{r.outcome}={r.level}")
                  for r in d.itertuples()]
        y = np.arange(len(d))[::-1]
        est = d["estimate"].to_numpy(float)
        ax.errorbar(est, y, xerr=[est - d["ci95_low"].to_numpy(float), d["ci95_high"].to_numpy(float) - est],
                    fmt="o", ms=3, color="#4c72b0", ecolor="black", elinewidth=0.8, capsize=2)
        if "term" in d:
            ax.axvline(0.0, color="grey", lw=0.8, ls="--")
        ax.set_yticks(y, labels, fontsize=7)
        ax.set_title(title, fontsize=9)
    return fig


def write_analysis(analysis, out, *, settings: dict | None = None) -> dict[str, Path]:
    """Every table and figure of one K (the three-step models' only when they were fitted)."""
    from vcmc.report.figures import png

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    f = analysis.fit
    paths: dict[str, Path] = {}
    stats = pd.DataFrame([{"k": f.k, **f.statistics}])
    paths["fit_statistics"] = _csv(stats, out / "fit_statistics.csv")
    profiles = analysis.profiles_table()
    paths["item_probabilities"] = _csv(profiles, out / "item_probabilities.csv")
    paths["item_figure"] = atomic_write_bytes(out / "item_probabilities.png", png(item_figure(profiles)))
    continuous = analysis.continuous_table() if hasattr(analysis, "continuous_table") else None
    if continuous is not None:        # the Gaussian items' class means and sds (docs/design.md §17.5)
        paths["continuous"] = _csv(continuous, out / "continuous.csv")
    cov = analysis.covariates.table() if analysis.covariates is not None else None
    dis = analysis.distal.table() if analysis.distal is not None else None
    if cov is not None:
        paths["covariates"] = _csv(cov, out / "covariates.csv")
    if dis is not None:
        paths["distal"] = _csv(dis, out / "distal.csv")
        paths["distal_tests"] = _csv(analysis.distal.equality_tests(), out / "distal_tests.csv")
    if cov is not None or dis is not None:
        paths["forest"] = atomic_write_bytes(out / "forest.png", png(forest_figure(cov, dis)))
    doc = {"method": "maximum-likelihood latent class model, federated EM (docs/design.md §15)",
           "k": f.k, "n_rows": f.n_rows, "weights": [float(v) for v in f.pi],
           "statistics": {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                          for k, v in f.statistics.items()},
           "converged": bool(f.converged), "em_iterations": int(f.n_iter), "em_rounds": int(f.n_rounds),
           "start_log_likelihoods": [float(v) for v in f.start_logliks],
           "reference_cluster": 1 if cov is not None else None,
           "classification_error": None if analysis.error is None else np.asarray(analysis.error).tolist(),
           "settings": settings or {}}
    paths["lca"] = atomic_write_json(out / "lca.json", doc, indent=2)
    return paths


def write_lca_report(out, *, comparison: pd.DataFrame | None = None, analysis=None, html_path=None) -> Path:
    """``report.html``: fit statistics, the K comparison, item-response probabilities, covariates, outcomes.

    From the fitted objects (``--report`` at fit time); ``lca_report_from_folder`` builds the same page from
    the files the commands wrote (``vcmc report DIR``).
    """
    tables = LcaTables(comparison=comparison)
    if analysis is not None:
        f = analysis.fit
        tables = LcaTables(
            comparison=comparison, k=f.k, statistics=dict(f.statistics), n_rows=f.n_rows, em_iterations=f.n_iter,
            converged=f.converged, weights=[float(w) for w in f.pi], profiles=analysis.profiles_table(),
            covariates=analysis.covariates.table() if analysis.covariates is not None else None,
            distal=analysis.distal.table() if analysis.distal is not None else None,
            distal_tests=analysis.distal.equality_tests() if analysis.distal is not None else None)
    return _render_report(Path(out), tables, html_path)


@dataclass(frozen=True)
class LcaTables:
    """What the report shows, as the tables the commands write (so the page is the same from either)."""

    comparison: pd.DataFrame | None = None
    k: int | None = None
    statistics: dict | None = None
    n_rows: int | None = None
    em_iterations: int | None = None
    converged: bool | None = None
    weights: list | None = None
    profiles: pd.DataFrame | None = None
    covariates: pd.DataFrame | None = None
    distal: pd.DataFrame | None = None
    distal_tests: pd.DataFrame | None = None


def is_lca_folder(folder) -> bool:
    """Whether ``folder`` holds a latent class analysis (``vcmc fit --k``'s ``lca.json`` or ``vcmc compare``'s
    ``comparison.csv``) rather than a Bayesian fit (``result.json``)."""
    folder = Path(folder)
    return not (folder / "result.json").exists() and ((folder / "lca.json").is_file()
                                                      or (folder / "comparison.csv").is_file())


def lca_report_from_folder(folder, out=None) -> Path:
    """``vcmc report DIR`` on a ``vcmc compare`` or ``vcmc fit --k`` folder: the page ``--report`` writes,
    from the folder's files (``comparison.csv``; ``lca.json``, ``item_probabilities.csv``, ``covariates.csv``,
    ``distal.csv``, ``distal_tests.csv``)."""
    import json

    from vcmc.exceptions import DataError

    folder = Path(folder)

    def table(name, **kw):
        path = folder / name
        if not path.is_file():
            return None
        try:
            return pd.read_csv(path, **kw)
        except (ValueError, pd.errors.ParserError) as exc:
            raise DataError(f"{path}: not a table vcmc wrote ({type(exc).__name__}); rerun the command") from None

    comparison = table("comparison.csv")
    if comparison is not None and "k" not in comparison.columns:
        raise DataError(f"{folder / 'comparison.csv'}: no column 'k'; expected vcmc compare's comparison.csv")
    tables = LcaTables(comparison=comparison)
    if (folder / "lca.json").is_file():
        try:
            doc = json.loads((folder / "lca.json").read_text(encoding="utf-8"))
            k, stats = int(doc["k"]), dict(doc["statistics"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{folder / 'lca.json'}: not vcmc fit --k's lca.json ({type(exc).__name__})") from None
        profiles = table("item_probabilities.csv", dtype={"variable": str, "modality": str})
        if profiles is None:
            raise DataError(f"{folder}: lca.json without item_probabilities.csv; rerun vcmc fit --k")
        tables = LcaTables(
            comparison=comparison, k=k, statistics={n: (float("nan") if v is None else v) for n, v in stats.items()},
            n_rows=doc.get("n_rows"), em_iterations=doc.get("em_iterations"), converged=doc.get("converged"),
            weights=doc.get("weights"), profiles=profiles, covariates=table("covariates.csv", dtype={"term": str}),
            distal=table("distal.csv", dtype={"outcome": str, "level": str}),
            distal_tests=table("distal_tests.csv", dtype={"outcome": str}))
    elif comparison is None:
        raise DataError(f"{folder}: neither lca.json (vcmc fit --k) nor comparison.csv (vcmc compare)")
    return _render_report(folder, tables, out)


def _render_report(out: Path, t: LcaTables, html_path=None) -> Path:
    from vcmc.report import html
    from vcmc.report.figures import png

    sections = []
    comparison = t.comparison
    if comparison is not None:
        rows = [[int(r.k)] + [getattr(r, c) for c in comparison.columns[1:]] for r in comparison.itertuples()]
        best = {c: int(comparison["k"].iloc[int(np.nanargmin(comparison[c]))]) for c in CRITERIA
                if c in comparison and np.any(np.isfinite(comparison[c].to_numpy(float)))}
        body = (html.table(list(comparison.columns), rows)
                + html.note("Lower is better for every criterion; chosen K: "
                            + ", ".join(f"{c.upper()} {k}" for c, k in best.items()) + ".")
                + html.figure(png(comparison_figure(comparison)), alt="criteria by K",
                              caption="Information criteria and relative entropy by number of classes.",
                              file="comparison.png"))
        sections.append(html.Section("comparison", "Choosing the number of classes", body))
    if t.k is not None:
        stats = [[k, v] for k, v in t.statistics.items()]
        sections.append(html.Section("fit", f"Fit statistics (K = {t.k})",
                                     html.table(["statistic", "value"], stats)
                                     + html.kv([("rows", t.n_rows), ("EM iterations", t.em_iterations),
                                                ("converged", t.converged),
                                                ("class weights", ", ".join(f"{w:.3f}" for w in t.weights or []))])))
        profiles = t.profiles
        sections.append(html.Section("items", "Item-response probabilities", html.figure(
            png(item_figure(profiles)), alt="item-response probabilities",
            caption="Per class, the probability of each modality of each variable (stacked), with the 95% "
                    "interval of the last modality's probability.", file="item_probabilities.png")
            + html.table(list(profiles.columns), profiles.values.tolist(), tall=True)))
        cov, dis = t.covariates, t.distal
        if cov is not None:
            sections.append(html.Section("covariates", "Covariates of class membership",
                                         html.note("Multinomial logit, bias-adjusted (ML) three-step; log odds "
                                                   "against the reference class 1.")
                                         + html.table(list(cov.columns), cov.values.tolist())))
        if dis is not None:
            tests = t.distal_tests
            sections.append(html.Section("distal", "Distal outcomes by class",
                                         html.table(list(dis.columns), dis.values.tolist())
                                         + ("" if tests is None else
                                            html.table(list(tests.columns), tests.values.tolist()))))
        if cov is not None or dis is not None:
            sections.append(html.Section("forest", "Forest plot", html.figure(
                png(forest_figure(cov, dis)), alt="forest plot", caption="Estimates with 95% intervals.",
                file="forest.png")))
    text = html.document("vcmc latent class analysis", html.note(
        "Maximum-likelihood latent class model fitted by federated EM rounds of whole-silo sums."), sections)
    return atomic_write_text(Path(html_path) if html_path is not None else out / "report.html", text)
