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
from vcmc.report.figures import class_label, forest_figure, item_figure

__all__ = ["CRITERIA", "LcaTables", "class_label", "comparison_figure", "forest_figure", "is_lca_folder",
           "item_figure", "lca_memberships", "lca_report_from_folder", "write_analysis", "write_comparison",
           "write_csv", "write_lca_report"]

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


def lca_memberships(codes, n_modalities, pi, profiles, values=None, gaussian=None) -> np.ndarray:
    """Each row's class memberships (n, K) at the fitted model (StepMix's ``predict_proba``: probabilities
    clipped as in its E-step; a missing cell contributes nothing); with Gaussian items, ``values`` (n, G)
    standardised and ``gaussian`` (K, 2G) the classes' means and variances (docs/design.md §17.5)."""
    from vcmc.rows.lca import one_hot, responsibilities

    extra = None
    if gaussian is not None:
        from vcmc.family import GAUSSIAN

        gaussian = np.asarray(gaussian, dtype=np.float64)
        extra = GAUSSIAN.log_likelihood_rows(values, gaussian, gaussian.shape[1] // 2)
    return responsibilities(one_hot(np.asarray(codes), n_modalities), np.asarray(pi, float),
                            np.asarray(profiles, float), extra)[0]


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
        from vcmc.rows.memberships import write_membership_files

        member_rows = []
        for silo in silos:
            m = lca_memberships(silo.data.codes, f.n_modalities, f.pi, f.profiles,
                                values=getattr(silo, "values", None) if f.gaussian is not None else None,
                                gaussian=f.gaussian)
            member_rows.append((silo.name, m, np.argmax(m, axis=1)))
        sizes = np.sum([np.bincount(r[2], minlength=f.k) for r in member_rows], axis=0)
        paths.update(write_membership_files(out, member_rows, n_clusters=f.k, rows=rows))
    profiles = analysis.profiles_table()
    paths["item_probabilities"] = write_csv(profiles, out / "item_probabilities.csv")
    paths["item_figure"] = atomic_write_bytes(out / "item_probabilities.png",
                                              png(item_figure(profiles, weights=f.pi, sizes=sizes)))
    continuous = analysis.continuous_table() if hasattr(analysis, "continuous_table") else None
    if continuous is not None:        # the Gaussian items' class means and sds (docs/design.md §17.5)
        paths["continuous"] = write_csv(continuous, out / "continuous.csv")
    paths.update(write_three_step_files(analysis, out))
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
           # the Gaussian items' means, then variances, standardised (docs/design.md §17.5): vcmc predict's
           **({} if f.gaussian is None else {"gaussian": [[float(v) for v in row] for row in f.gaussian]}),
           "standard_errors": None if items is None else items.method,
           "statistics": {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                          for k, v in f.statistics.items()},
           "converged": bool(f.converged), "em_iterations": int(f.n_iter), "em_rounds": int(f.n_rounds),
           "start_log_likelihoods": [float(v) for v in f.start_logliks],
           "starts_at_best": int(f.n_best), "best_tolerance": float(f.best_tolerance),
           "reference_cluster": 1 if analysis.covariates is not None else None,
           "classification_error": None if analysis.error is None else np.asarray(analysis.error).tolist(),
           "warnings": list(analysis.warnings),
           "settings": settings or {}}
    paths["lca"] = atomic_write_json(out / "lca.json", doc, indent=2)
    return paths


def _num(v):
    v = float(v)
    return v if np.isfinite(v) else None


def write_lca_report(out, *, comparison: pd.DataFrame | None = None, analysis=None, html_path=None) -> Path:
    """``report.html``: the guide to K, fit statistics, item-response probabilities, covariates, outcomes.

    From the fitted objects (``--report`` at fit time); ``lca_report_from_folder`` builds the same page from
    the files the commands wrote (``vcmc report DIR``).
    """
    if analysis is not None:
        return lca_report_from_folder(out, out=html_path, comparison=comparison)
    return _render_report(Path(out), LcaTables(comparison=comparison), html_path)


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
    weights_ci: list | None = None
    sizes: list | None = None
    starts: int | None = None
    starts_at_best: int | None = None
    warnings: tuple = ()
    standard_errors: str | None = None


def is_lca_folder(folder) -> bool:
    """Whether ``folder`` holds a latent class analysis (``vcmc fit --k``'s ``lca.json`` or ``vcmc compare``'s
    ``comparison.csv``) rather than a Bayesian fit (``result.json``)."""
    folder = Path(folder)
    return not (folder / "result.json").exists() and ((folder / "lca.json").is_file()
                                                      or (folder / "comparison.csv").is_file())


def lca_report_from_folder(folder, out=None, *, comparison: pd.DataFrame | None = None) -> Path:
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

    comparison = table("comparison.csv") if comparison is None else comparison
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
            distal_tests=table("distal_tests.csv", dtype={"outcome": str}),
            weights_ci=doc.get("weights_ci95"), sizes=doc.get("sizes"),
            starts=len(doc.get("start_log_likelihoods") or []) or None, starts_at_best=doc.get("starts_at_best"),
            warnings=tuple(doc.get("warnings") or ()), standard_errors=doc.get("standard_errors"))
    elif comparison is None:
        raise DataError(f"{folder}: neither lca.json (vcmc fit --k) nor comparison.csv (vcmc compare)")
    return _render_report(folder, tables, out)


def _p(v) -> str:
    """A probability for the page: three decimals, '<0.001' below (never 1e-87)."""
    from vcmc.report.html import fmt_prob

    return fmt_prob(v)


def guide_section(comparison: pd.DataFrame):
    """The guide to K: the criteria side by side, where they disagree and why, and what to report."""
    from vcmc.lca.guide import k_guide
    from vcmc.report import html
    from vcmc.report.figures import png

    g = k_guide(comparison)
    heads = ["K", "log-likelihood", "BIC", "SABIC", "AIC", "CAIC", "WAIC", "relative entropy", "smallest class",
             "EM starts at best"] + (["Bayesian P(K)"] if "p_bayes" in comparison else [])
    chosen = g["choices"]
    rows = []
    for r in comparison.sort_values("k").itertuples():
        def crit(col, name, r=r):
            v = getattr(r, col, float("nan"))
            mark = " *" if chosen.get(name) == int(r.k) else ""
            return html.Cell(html.fmt(v, 1) + mark, "num")
        starts = (f"{int(r.starts_at_best)} / {int(r.starts)}" if hasattr(r, "starts_at_best")
                  and pd.notna(r.starts_at_best) else "–")
        rows.append([int(r.k), html.Cell(html.fmt(r.log_likelihood, 2), "num"), crit("bic", "BIC"),
                     crit("sabic", "SABIC"), crit("aic", "AIC"), crit("caic", "CAIC"), crit("waic", "WAIC"),
                     html.Cell(html.fmt(r.relative_entropy, 3), "num"),
                     html.Cell(html.pct(r.smallest_class) if hasattr(r, "smallest_class") else "–", "num"),
                     html.Cell(starts, "num")]
                    + ([html.Cell(html.fmt_prob(r.p_bayes), "num")] if "p_bayes" in comparison else []))
    body = ("<p>Every criterion of the number of classes K side by side (lower is better; * the K each chooses), "
            "with the relative entropy (1: every row certain of its class), the smallest class's share of the "
            "rows, how many EM starts reached each K's best log-likelihood"
            + (" and the over-fitted Bayesian fit's posterior probability of K" if "p_bayes" in comparison else "")
            + ".</p>")
    body += html.table(heads, rows)
    body += "<h3>Where they agree, where they do not, and why</h3><ul>" + "".join(
        f"<li>{html.esc(f)}</li>" for f in g["findings"]) + "</ul>"
    if g["recommendation"]:
        body += f'<div class="rule"><strong>What to report.</strong> {html.esc(g["recommendation"])}</div>'
    body += html.note("The rule behind the recommendation is stated in docs/design.md §15.5; the worked example on "
                      "NHEFS is in docs/nhefs.md.")
    body += html.figure(png(comparison_figure(comparison)), alt="criteria by K",
                        caption="Information criteria and relative entropy by number of classes (* each criterion's "
                                "minimum).", file="comparison.png")
    return html.Section("comparison", "Choosing the number of classes", body)


def _render_report(out: Path, t: LcaTables, html_path=None) -> Path:
    from vcmc.report import html
    from vcmc.report.figures import png

    sections = []
    if t.comparison is not None:
        sections.append(guide_section(t.comparison))
    if t.k is not None:
        stats = [[k, html.Cell(html.fmt(v, 3) if isinstance(v, float) else str(v), "num")]
                 for k, v in t.statistics.items()]
        w = t.weights or []
        ci = t.weights_ci or [None] * len(w)
        sizes = t.sizes or [None] * len(w)
        classes = [[class_label(i + 1), _p(w[i]), "–" if not ci[i] else f"[{_p(ci[i][0])}, {_p(ci[i][1])}]",
                    "–" if sizes[i] is None else f"{int(sizes[i]):,}"] for i in range(len(w))]
        starts = ("–" if t.starts is None else f"{t.starts_at_best} of {t.starts} starts reached the best "
                  "log-likelihood")
        body = (html.table(["statistic", "value"], stats)
                + html.kv([("rows", t.n_rows), ("EM iterations", t.em_iterations), ("converged", t.converged),
                           ("EM starts", starts)])
                + html.table(["class", "weight", "95% interval", "rows assigned (modal class)"], classes))
        body += "".join(f'<div class="warn">{html.esc(x)}</div>' for x in t.warnings)
        sections.append(html.Section("fit", f"Fit statistics (K = {t.k})", body))
        profiles = t.profiles
        shown = profiles.assign(**{c: profiles[c].map(lambda v: html.fmt(v, 4)) for c in ("probability", "se")},
                                **{c: profiles[c].map(_p) for c in ("ci95_low", "ci95_high")})
        sections.append(html.Section("items", "Item-response probabilities", html.figure(
            png(item_figure(profiles, weights=t.weights, sizes=t.sizes)), alt="item-response probabilities",
            caption="Each class's probability of each item (binary items: of the second modality, e.g. yes; other "
                    "variables: of each modality) with its 95% interval; the legend gives each class's share and "
                    "size.", file="item_probabilities.png")
            + (html.note(html.esc(f"Standard errors: {t.standard_errors}; at the boundary (a probability "
                                  "estimated at 0 or 1) a profile-likelihood interval and no standard error."))
               if t.standard_errors else "")
            + html.table(list(shown.columns), shown.values.tolist(), tall=True)))
        cov, dis = t.covariates, t.distal
        if cov is not None:
            sections.append(html.Section("covariates", "Covariates of class membership", covariate_table(cov)))
        if dis is not None:
            tests = t.distal_tests
            sections.append(html.Section("distal", "Distal outcomes by class",
                                         html.table(list(dis.columns), dis.values.tolist())
                                         + ("" if tests is None else
                                            html.table(list(tests.columns), tests.values.tolist()))))
        if cov is not None or dis is not None:
            sections.append(html.Section("forest", "Forest plot", html.figure(
                png(forest_figure(cov, dis)), alt="forest plot",
                caption="Covariates: odds ratios of each class against class 1 (log scale; the intercept left "
                        "out). Outcomes: probability or mean by class. 95% intervals.", file="forest.png")))
    text = html.document("vcmc latent class analysis", html.note(
        "Maximum-likelihood latent class model fitted by federated EM rounds of whole-silo sums."), sections)
    return atomic_write_text(Path(html_path) if html_path is not None else out / "report.html", text)


def covariate_table(cov: pd.DataFrame) -> str:
    """The covariate table with odds ratios beside the log odds (``covariates.csv`` keeps the log odds)."""
    from vcmc.report import html

    rows = [[int(r.cluster), r.term, html.Cell(html.fmt(r.estimate, 3), "num"), html.Cell(html.fmt(r.se, 3), "num"),
             html.Cell("–" if r.term == "intercept" else html.fmt_ratio(np.exp(r.estimate)), "num"),
             html.Cell("–" if r.term == "intercept" else
                       f"[{html.fmt_ratio(np.exp(r.ci95_low))}, {html.fmt_ratio(np.exp(r.ci95_high))}]", "num")]
            for r in cov.itertuples()]
    return (html.note("Multinomial logit, bias-adjusted (ML) three-step; log odds and odds ratios of each class "
                      "against the reference class 1.")
            + html.table(["class", "term", "log odds", "se", "odds ratio", "95% interval"], rows))


def write_three_step_files(analysis, out: Path) -> dict:
    """The covariate and distal-outcome tables of a three-step analysis (``analysis.covariates`` and
    ``analysis.distal``, either None), their equality tests and the forest plot, each written atomically."""
    from vcmc.report.figures import png

    paths: dict = {}
    cov = analysis.covariates.table() if analysis.covariates is not None else None
    dis = analysis.distal.table() if analysis.distal is not None else None
    if cov is not None:
        paths["covariates"] = write_csv(cov, out / "covariates.csv")
    if dis is not None:
        paths["distal"] = write_csv(dis, out / "distal.csv")
        paths["distal_tests"] = write_csv(analysis.distal.equality_tests(), out / "distal_tests.csv")
    if cov is not None or dis is not None:
        paths["forest"] = atomic_write_bytes(out / "forest.png", png(forest_figure(cov, dis)))
    return paths
