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


def write_csv(df: pd.DataFrame, path: Path) -> Path:
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
    return {"comparison": write_csv(table, out / "comparison.csv"),
            "figure": atomic_write_bytes(out / "comparison.png", png(comparison_figure(table)))}


#: A binary item's modality shown in the item-response plot without naming it (its "yes").
_YES = {"1", "yes", "y", "true", "present"}


def class_label(cluster, weight=None, size=None) -> str:
    """``class 2 (31%, n = 480)``: a class's number with its share and size, as legends and tables name it."""
    parts = [] if weight is None or not np.isfinite(float(weight)) else [f"{100 * float(weight):.0f}%"]
    if size is not None:
        parts.append(f"n = {int(size):,}")
    return f"class {cluster}" + (f" ({', '.join(parts)})" if parts else "")


def item_figure(profiles: pd.DataFrame, *, weights=None, sizes=None, estimate: str = "probability",
                what: str = "class"):
    """The item-response plot of a latent class paper: one line per class across the items, with 95% intervals.

    A binary item shows the probability of its second modality (its "yes"; the tick names the modality when it
    is not 1/yes/true), any other variable one point per modality (``variable=modality``). The legend names
    each class with its share (``weights``) and size (``sizes``); ``estimate`` is the column of the point
    estimate (``probability`` in ``item_probabilities.csv``, ``estimate`` in a Bayesian fit's ``profiles.csv``)."""
    from vcmc.report.figures import FONT, new_figure

    classes = list(dict.fromkeys(profiles["cluster"]))
    variables = list(dict.fromkeys(profiles["variable"]))
    first = profiles[profiles["cluster"] == classes[0]]
    ticks, keys = [], []
    for v in variables:
        mods = [str(m) for m in first.loc[first["variable"] == v, "modality"]]
        if len(mods) == 2:
            ticks.append(str(v) if mods[1].strip().lower() in _YES else f"{v}={mods[1]}")
            keys.append((v, mods[1]))
        else:
            ticks += [f"{v}={m}" for m in mods]
            keys += [(v, m) for m in mods]
    n = len(keys)
    fig = new_figure(max(6.0, 0.32 * n + 2.5), 3.6)
    ax = fig.add_subplot()
    cmap = __import__("matplotlib").colormaps["tab10" if len(classes) <= 10 else "tab20"]
    x = np.arange(n)
    offset = np.linspace(-0.18, 0.18, len(classes)) if len(classes) > 1 else np.zeros(1)
    for i, c in enumerate(classes):
        sub = profiles[profiles["cluster"] == c].assign(variable=lambda d: d["variable"].astype(str),
                                                        modality=lambda d: d["modality"].astype(str))
        sub = sub.set_index(["variable", "modality"])
        rows = sub.loc[[(str(v), str(m)) for v, m in keys]]
        est = rows[estimate].to_numpy(float)
        lo = rows["ci95_low"].to_numpy(float)
        hi = rows["ci95_high"].to_numpy(float)
        w = None if weights is None else weights[i]
        size = None if sizes is None else sizes[i]
        label = class_label(c, w, size).replace("class", what, 1)
        ax.errorbar(x + offset[i], est, yerr=[np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)], fmt="-o",
                    ms=3.5, lw=1.2, elinewidth=0.8, capsize=1.5, color=cmap(i % cmap.N), label=label)
    ax.set_xticks(x, ticks, rotation=60, ha="right", fontsize=FONT)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("probability (95% interval)", fontsize=FONT)
    ax.set_xlabel("item (binary items: probability of the second modality, e.g. yes)", fontsize=FONT)
    ax.tick_params(axis="y", labelsize=FONT)
    ax.grid(axis="y", lw=0.3, alpha=0.6)
    ax.legend(fontsize=FONT - 0.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              title=f"{what} (share, size)" if sizes is not None else f"{what} (share)", title_fontsize=FONT)
    return fig


def forest_figure(covariates: pd.DataFrame | None, distal: pd.DataFrame | None):
    """Forest plot: covariates as odds ratios against class 1 (log axis, the intercept left out), and each
    distal outcome's probability (or mean) by class, with 95% intervals and labelled axes."""
    from vcmc.report.figures import FONT, new_figure

    panels = []
    if covariates is not None and len(covariates):
        cov = covariates[covariates["term"].astype(str) != "intercept"]
        if len(cov):
            panels.append(("covariates", "covariates of class membership", cov))
    if distal is not None and len(distal):
        for name, d in distal.groupby("outcome", sort=False):
            panels.append(("distal", f"outcome {name} by class", d))
    if not panels:
        fig = new_figure(4.0, 1.0)
        fig.text(0.5, 0.5, "no covariate or outcome estimate", ha="center", va="center", fontsize=FONT)
        return fig
    n_rows = sum(len(d) for _, _, d in panels)
    fig = new_figure(7.0, 1.0 + 0.24 * n_rows + 0.7 * len(panels))
    axes = np.atleast_1d(fig.subplots(len(panels), 1, height_ratios=[max(len(d), 1) for _, _, d in panels]))
    for ax, (kind, title, d) in zip(axes, panels, strict=True):
        y = np.arange(len(d))[::-1]
        est, lo, hi = (d[c].to_numpy(float) for c in ("estimate", "ci95_low", "ci95_high"))
        if kind == "covariates":
            est, lo, hi = np.exp(est), np.exp(lo), np.exp(hi)
            labels = [f"class {r.cluster} vs 1: {r.term}" for r in d.itertuples()]
            ax.set_xscale("log")
            ax.axvline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xlabel("odds ratio against class 1 (95% interval; log scale)", fontsize=FONT)
        else:
            labels = [f"class {r.cluster}: " + ("mean" if str(r.level) == "mean" else f"P({r.outcome} = {r.level})")
                      for r in d.itertuples()]
            numeric = set(map(str, d["level"])) == {"mean"}
            ax.set_xlabel("mean (95% interval)" if numeric else "probability (95% interval)", fontsize=FONT)
        ax.errorbar(est, y, xerr=[np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)], fmt="o", ms=3.5,
                    color="#4c72b0", ecolor="black", elinewidth=0.8, capsize=2)
        ax.set_yticks(y, labels, fontsize=FONT - 0.5)
        ax.tick_params(axis="x", labelsize=FONT)
        ax.set_title(title, fontsize=FONT + 1)
        ax.grid(axis="x", lw=0.3, alpha=0.6)
    return fig


def lca_memberships(codes, n_modalities, pi, profiles) -> np.ndarray:
    """Each row's class memberships (n, K) at the fitted model (StepMix's ``predict_proba``: probabilities
    clipped as in its E-step; a missing cell contributes nothing)."""
    from vcmc.silo.lca import one_hot, responsibilities

    return responsibilities(one_hot(np.asarray(codes), n_modalities), np.asarray(pi, float),
                            np.asarray(profiles, float))[0]


def write_analysis(analysis, out, *, settings: dict | None = None, silos=None, rows: dict | None = None,
                   schema=None) -> dict[str, Path]:
    """Every table and figure of one K (the three-step models' only when they were fitted). With ``silos``
    (the analyst's own, in process), also each row's memberships and most probable class
    (``memberships.csv``, ``assignments.csv``: the formats of ``vcmc fit``; ``rows`` the row numbers in each
    silo's file) and ``schema.json`` (``schema``), so that ``vcmc predict`` scores new rows with the fit."""
    from vcmc.report.figures import png

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    f = analysis.fit
    paths: dict[str, Path] = {}
    stats = pd.DataFrame([{"k": f.k, **f.statistics}])
    paths["fit_statistics"] = write_csv(stats, out / "fit_statistics.csv")
    sizes = None
    if silos is not None:
        from vcmc.silo.memberships import write_membership_files

        member_rows = []
        for silo in silos:
            m = lca_memberships(silo.data.codes, f.n_modalities, f.pi, f.profiles)
            member_rows.append((silo.name, m, np.argmax(m, axis=1)))
        sizes = np.sum([np.bincount(r[2], minlength=f.k) for r in member_rows], axis=0)
        paths.update(write_membership_files(out, member_rows, n_clusters=f.k, rows=rows))
    profiles = analysis.profiles_table()
    paths["item_probabilities"] = write_csv(profiles, out / "item_probabilities.csv")
    paths["item_figure"] = atomic_write_bytes(out / "item_probabilities.png",
                                              png(item_figure(profiles, weights=f.pi, sizes=sizes)))
    cov = analysis.covariates.table() if analysis.covariates is not None else None
    dis = analysis.distal.table() if analysis.distal is not None else None
    if cov is not None:
        paths["covariates"] = write_csv(cov, out / "covariates.csv")
    if dis is not None:
        paths["distal"] = write_csv(dis, out / "distal.csv")
        paths["distal_tests"] = write_csv(analysis.distal.equality_tests(), out / "distal_tests.csv")
    if cov is not None or dis is not None:
        paths["forest"] = atomic_write_bytes(out / "forest.png", png(forest_figure(cov, dis)))
    if schema is not None:
        paths["schema"] = out / "schema.json"
        schema.to_json(paths["schema"])
    items = analysis.items
    doc = {"method": "maximum-likelihood latent class model, federated EM (docs/design.md §15)",
           "k": f.k, "n_rows": f.n_rows, "weights": [float(v) for v in f.pi],
           "weights_se": None if items is None else [_num(v) for v in items.weight_se],
           "weights_ci95": None if items is None else [[_num(a), _num(b)] for a, b in items.weight_ci],
           "sizes": None if sizes is None else [int(v) for v in sizes],
           "profiles": [[float(v) for v in row] for row in f.profiles],
           "n_modalities": [int(m) for m in f.n_modalities],
           "standard_errors": None if items is None else items.method,
           "statistics": {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                          for k, v in f.statistics.items()},
           "converged": bool(f.converged), "em_iterations": int(f.n_iter), "em_rounds": int(f.n_rounds),
           "start_log_likelihoods": [float(v) for v in f.start_logliks],
           "starts_at_best": int(f.n_best), "best_tolerance": float(f.best_tolerance),
           "reference_cluster": 1 if cov is not None else None,
           "classification_error": None if analysis.error is None else np.asarray(analysis.error).tolist(),
           "warnings": list(analysis.warnings),
           "settings": settings or {}}
    paths["lca"] = atomic_write_json(out / "lca.json", doc, indent=2)
    return paths


def _num(v):
    v = float(v)
    return v if np.isfinite(v) else None


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
