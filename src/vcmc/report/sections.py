"""The sections of ``report.html``, one function each: ``section(ctx) -> Section``.

Each reads what the fit's folder holds and says plainly what it does not hold ("not available in this
result"), so one report code serves today's result files and richer ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vcmc.report import figures as F
from vcmc.report.characterise import MIN_EXPECTED, MIN_ODDS_RATIO, Contrast, characterisation
from vcmc.report.html import Cell, Section, esc, figure, fmt, fmt_prob, fmt_ratio, kv, note, pct, table, unavailable
from vcmc.report.load import MAX_DRAWS, FitOutputs

RHAT_MAX = F.RHAT_MAX
ESS_MIN = F.ESS_MIN
#: Posterior predictive p-values outside [PPP_LOW, 1 - PPP_LOW] are flagged.
PPP_LOW = 0.025
#: Rows of a long table shown before "... and N more".
MAX_ROWS = 40
_POOLED = {None, "", "pooled", "all", "*", "overall", "total"}


@dataclass
class Context:
    fit: FitOutputs
    labels: dict[int, str]
    con: Contrast
    keep: list[int]                                  # positions (in fit.clusters) of the clusters shown
    figures: dict[str, bytes] = field(default_factory=dict)

    def name(self, cid: int) -> str:
        """A cluster's name in figures: its number, and its label when given."""
        label = self.labels.get(int(cid))
        return f"{cid}: {label}" if label else str(cid)

    def long_name(self, cid: int) -> str:
        """A cluster's name with its share of the rows and its size: ``2: frail (31%, n = 480)``."""
        i = self.fit.cluster_ids.index(int(cid))
        n = int(self.fit.sizes[i])
        total = max(int(self.fit.sizes.sum()), 1)
        return f"{self.name(cid)} ({pct(n / total)}, n = {n:,})"

    def label_cells(self, cid: int) -> list:
        return [int(cid)] + ([self.labels.get(int(cid), "")] if self.labels else [])

    @property
    def label_headers(self) -> list[str]:
        return ["Cluster"] + (["Name"] if self.labels else [])

    def add(self, key: str, fig, *, alt: str, caption: str) -> str:
        data = F.png(fig)
        self.figures[key] = data
        return figure(data, alt=alt, caption=caption, file=f"figures/{key}.png")


def _num(v):
    return None if v is None else float(v)


def _mapping(x) -> dict:
    """``x`` when it is a mapping, else ``{}``: the comparators' diagnostics have shapes of their own."""
    return x if isinstance(x, dict) else {}


def local_diagnostics(fit: FitOutputs) -> dict[str, dict]:
    """Per-silo sampler diagnostics (``diagnostics.local``); for a sampler on the pooled rows (full MCMC),
    whose R-hat and ESS sit at the top level, one row named ``pooled``."""
    out = {str(s): d for s, d in _mapping(fit.diagnostics.get("local")).items() if isinstance(d, dict)}
    if not out and any(k in fit.diagnostics for k in ("rhat_log_posterior", "ess_bulk_log_posterior")):
        out = {"pooled": fit.diagnostics}
    return out


def k_distribution(ncp) -> tuple[dict | None, dict[str, dict]]:
    """(global, per silo) posterior of the number of clusters from ``diagnostics.n_clusters_posterior``:
    the mapping ``{"global": {"values", "probabilities"}, "local": {silo: ...}}``, or a pooled sampler's
    list of P(K = k) for k = 0, 1, ..."""
    def ok(d):
        return isinstance(d, dict) and isinstance(d.get("values"), list) and isinstance(d.get("probabilities"), list)

    if isinstance(ncp, list) and ncp and all(isinstance(p, int | float) for p in ncp):
        values = [k for k, p in enumerate(ncp) if p > 0]
        return {"values": values, "probabilities": [float(ncp[k]) for k in values]}, {}
    ncp = _mapping(ncp)
    g = ncp.get("global")
    return (g if ok(g) else None), {str(s): d for s, d in _mapping(ncp.get("local")).items() if ok(d)}


def fixed_by_matching(fit: FitOutputs, global_k: dict) -> bool:
    """True when the global posterior of K is a point mass at the result's own number of global clusters for a
    method whose global clusters come from matching the silos' clusters (VCMC, consensus): then it holds by
    construction. A pooled sampler's occupied components (full MCMC) are a real posterior, whatever they show."""
    if str(fit.result.get("method", "")) not in ("vcmc", "consensus"):
        return False
    if _mapping(fit.diagnostics.get("n_clusters_posterior")).get("definition") == \
            "occupied components of the pooled chain":       # after the global-informed rounds (vcmc.rounds)
        return False
    probs = [float(p) for p in global_k.get("probabilities", [])]
    return len(probs) == 1 and probs[0] >= 1.0 - 1e-12


def _average_probability(fit: FitOutputs) -> list | None:
    """diagnostics.classification.average_probability when it has one entry per global cluster."""
    avg = _mapping(fit.diagnostics.get("classification")).get("average_probability")
    return list(avg) if isinstance(avg, list) and len(avg) == len(fit.clusters) else None


def _int(v):
    return None if v is None else int(round(float(v)))


def _count(v) -> str:
    """A whole number for prose: thousands separated, "–" when missing."""
    return "–" if v is None else f"{_int(v):,}"


# ----------------------------------------------------------------------------------------------- overview
def overview(ctx: Context) -> str:
    r = ctx.fit.result
    diag = ctx.fit.diagnostics
    warnings = [w for w in diag.get("warnings") or [] if isinstance(w, str)] \
        if isinstance(diag.get("warnings"), list) else []
    pairs = [("method", r.get("method", "?")), ("clusters holding rows", r.get("n_clusters", len(ctx.keep))),
             ("global clusters", r.get("n_global_clusters", len(ctx.fit.clusters))),
             ("rows", f"{int(r.get('n_rows', 0)):,}"), ("silos", len(ctx.fit.silos)),
             ("seed", r.get("seed")), ("vcmc version", r.get("vcmc_version", "?")),
             ("folder", str(ctx.fit.folder))]
    if ctx.labels:
        pairs.append(("cluster names", "from --labels (the number is kept beside every name)"))
    out = kv(pairs)
    if warnings:
        out += (f'<div class="warn"><strong>{len(warnings)} warning(s)</strong> from the fit: see '
                '<a href="#warnings">Warnings</a>.</div>')
    for n in ctx.fit.notes:
        out += note(esc(n))
    return out


# ------------------------------------------------------------------------------------------------- sizes
#: A cluster whose weight's 95% interval reaches below this is weakly identified: the posterior keeps it
#: possible that the cluster does not exist (docs/design.md §8).
WEAK_WEIGHT = 1e-3


def weakly_identified(clusters: list[dict], shown=None) -> list[str]:
    """One warning per cluster whose weight's 95% interval reaches below ``WEAK_WEIGHT``."""
    out = []
    for c in clusters:
        ci = c.get("weight_ci95")
        if (shown is not None and c.get("cluster") not in shown) or not ci or ci[0] is None:
            continue
        if float(ci[0]) < WEAK_WEIGHT:
            out.append(f"cluster {c['cluster']} (N = {int(c.get('size') or 0):,}, weight {fmt_prob(c.get('weight'))}, "
                       f"95% interval [{fmt_prob(ci[0])}, {fmt_prob(ci[1])}]) is weakly identified: its weight's "
                       "interval reaches 0, so the data do not establish that it exists; report it with that caveat, "
                       "or describe it as a possible subgroup of the cluster it is closest to.")
    return out


def sizes(ctx: Context) -> Section:
    fit = ctx.fit
    avg = _average_probability(fit)
    n_rows = max(int(fit.sizes.sum()), 1)
    rows = []
    for k in ctx.keep:
        c = fit.clusters[k]
        ci = c.get("weight_ci95")
        per = c.get("size_per_silo") or {}
        rows.append(ctx.label_cells(c["cluster"]) + [
            int(c.get("size") or 0), Cell(pct((c.get("size") or 0) / n_rows), "num"),
            Cell(fmt_prob(c.get("weight") or 0), "num"),
            Cell("–" if not ci else f"[{fmt_prob(ci[0])}, {fmt_prob(ci[1])}]", "num"),
            Cell("–" if avg is None or avg[k] is None else fmt(avg[k]), "num"),
            Cell(f"{sum(1 for v in per.values() if v)} / {len(per)}", "num")])
    body = ("<p>Number of rows (N) assigned to each cluster (each row to its most probable cluster, as in "
            "<code>assignments.csv</code>) and the cluster's weight: posterior mean and equal-tailed 95% "
            "interval of the global draws.</p>")
    body += table(ctx.label_headers + ["N", "% of rows", "weight", "95% interval", "average probability of "
                                       "assignment", "silos holding it"], rows)
    empty = [int(c["cluster"]) for i, c in enumerate(fit.clusters) if i not in set(ctx.keep)]
    if empty:
        body += note(f"Global cluster(s) {', '.join(map(str, empty))} hold no row (components of the "
                     "over-fitted mixture that kept a little weight); the other sections leave them out, "
                     "but their weights enter the population prevalence.")
    for w in weakly_identified(fit.clusters, [fit.clusters[k]["cluster"] for k in ctx.keep]):
        body += f'<div class="warn">{esc(w)}</div>'
    names = [ctx.name(fit.clusters[k]["cluster"]) for k in ctx.keep]
    fig = F.sizes_figure(names, fit.weights[ctx.keep], [fit.clusters[k].get("weight_ci95") for k in ctx.keep],
                         fit.sizes[ctx.keep])
    body += ctx.add("sizes", fig, alt="cluster weights with 95% intervals",
                    caption="Cluster weights (bars: 95% interval) and sizes N.")
    return Section("sizes", "Cluster sizes and weights", body)


# ----------------------------------------------------------------------------------------------- heatmap
def _source_text(ctx: Context) -> str:
    con, fit = ctx.con, ctx.fit
    if con.source == "draws":
        return (f"{con.n_draws:,} global posterior draws of <code>posterior.nc</code>"
                 + (f" (thinned from its {fit.n_draws_total:,} to at most {MAX_DRAWS:,})"
                    if con.n_draws < fit.n_draws_total else "")
                 + (f", {fit.n_chains} chains pooled" if fit.n_chains > 1 else ""))
    if con.source == "intervals":
        return "the posterior means and 95% intervals of <code>profiles.csv</code> (no posterior.nc)"
    return "the point estimates of <code>profiles.csv</code> (no posterior.nc and no intervals)"


def heatmap(ctx: Context) -> Section:
    con = ctx.con
    body = (
        "<div class=\"rule\"><strong>Scaled difference</strong> of cluster <i>c</i> on a modality: "
        "(θ<sub>c</sub> − p̄) / √(p̄ (1 − p̄)), where θ<sub>c</sub> is the cluster's prevalence of the modality "
        "and p̄ = Σ<sub>k</sub> π<sub>k</sub> θ<sub>k</sub> the whole population's (the weight-averaged "
        "profile), computed in every draw; the cell shows its posterior mean, from "
        f"{_source_text(ctx)}. The denominator is the standard deviation of the modality's indicator in the "
        "population, so the value is a standardised difference (0.2, 0.5, 0.8: Cohen's small, medium, large) "
        "and rare and common conditions share one scale. The paper's Figure 4 shows a scaled difference "
        "of the same two prevalences without writing its scaling down; this is the report's definition. "
        "A binary variable is shown by its \"present\" modality (yes, 1, true, present, positive; else the "
        "second): the other modality's value is exactly the negative. A framed cell is listed in the "
        "characterisation table below.</div>")
    cols = [ctx.long_name(ctx.fit.clusters[k]["cluster"]) for k in ctx.keep]
    fig = F.heatmap_figure(con.scaled[ctx.keep].T, con.shown.names, cols, con.listed[ctx.keep].T)
    body += ctx.add("heatmap", fig, alt="heatmap of scaled prevalence differences",
                    caption=f"Scaled difference between each cluster's prevalence and the whole population's, "
                            f"{len(con.shown.names)} modalities x {len(cols)} clusters; red: higher in the "
                            "cluster, blue: lower; framed: listed in the characterisation (+ high, − low, when the "
                            "cells carry no value). A low prevalence of a rare modality stays pale: the scaled "
                            "difference cannot go below −√(p̄/(1 − p̄)).")
    return Section("heatmap", "Clusters against the population (heatmap)", body)


# ------------------------------------------------------------------------------------- item-response plot
def items(ctx: Context) -> Section:
    """The item-response plot of a latent class paper: each cluster's probability of each item, with its 95%
    interval (from ``profiles.csv``), one line per cluster, shares and sizes in the legend."""
    import pandas as pd

    fit = ctx.fit
    if fit.profiles_ci is None:
        return Section("items", "Item-response probabilities",
                       unavailable("the profiles' intervals (ci95_low, ci95_high of profiles.csv)"))
    rows = []
    for k in ctx.keep:
        cid = fit.clusters[k]["cluster"]
        for j, (v, m) in enumerate(fit.columns.labels):
            rows.append({"cluster": cid, "variable": v, "modality": m, "estimate": float(fit.profiles[k, j]),
                         "ci95_low": float(fit.profiles_ci[k, j, 0]), "ci95_high": float(fit.profiles_ci[k, j, 1])})
    frame = pd.DataFrame(rows)
    total = max(float(fit.sizes.sum()), 1.0)
    fig = F.item_figure(frame, weights=[fit.sizes[k] / total for k in ctx.keep], sizes=[fit.sizes[k] for k in ctx.keep],
                        estimate="estimate", what="cluster")
    body = ("<p>Each cluster's probability of each item (posterior mean, equal-tailed 95% interval of the global "
            "draws; <code>profiles.csv</code>): a binary item by the probability of its second modality (e.g. yes), "
            "any other variable by each modality. The legend gives each cluster's share of the rows and its size N "
            "(rows assigned to it).</p>")
    body += ctx.add("items", fig, alt="item-response probabilities by cluster",
                    caption="Item-response probabilities by cluster with 95% intervals.")
    return Section("items", "Item-response probabilities", body)


def three_step_section(ctx: Context) -> Section | None:
    """Covariates and outcomes at the clusters (``covariates.csv``, ``distal.csv``), when the fit has them."""
    import pandas as pd

    folder = ctx.fit.folder
    cov = pd.read_csv(folder / "covariates.csv", dtype={"term": str}) if (folder / "covariates.csv").is_file() \
        else None
    dis = pd.read_csv(folder / "distal.csv", dtype={"outcome": str, "level": str}) \
        if (folder / "distal.csv").is_file() else None
    info = _mapping(ctx.fit.result.get("three_step"))
    if cov is None and dis is None and not info:
        return None
    body = ("<p>Bias-adjusted (ML) three-step models at the fit's clusters (its posterior-mean weights and "
            "profiles; classification error corrected, docs/design.md §15.3). Clusters are numbered as above; "
            "the reference of the odds ratios is cluster 1.</p>")
    body += "".join(f'<div class="warn">{esc(w)}</div>' for w in info.get("warnings") or [])
    if cov is not None:
        body += "<h3>Covariates of cluster membership</h3>" + table(
            ["cluster", "term", "log odds", "se", "odds ratio", "95% interval"],
            [[int(r.cluster), r.term, Cell(fmt(r.estimate), "num"), Cell(fmt(r.se), "num"),
              Cell("–" if r.term == "intercept" else fmt_ratio(np.exp(r.estimate)), "num"),
              Cell("–" if r.term == "intercept" else
                   f"[{fmt_ratio(np.exp(r.ci95_low))}, {fmt_ratio(np.exp(r.ci95_high))}]", "num")]
             for r in cov.itertuples()])
    if dis is not None:
        body += "<h3>Outcomes by cluster</h3>" + table(
            ["cluster", "outcome", "level", "estimate", "se", "95% interval"],
            [[int(r.cluster), r.outcome, r.level, Cell(fmt(r.estimate), "num"), Cell(fmt(r.se), "num"),
              Cell(f"[{fmt(r.ci95_low)}, {fmt(r.ci95_high)}]", "num")] for r in dis.itertuples()])
    if cov is not None or dis is not None:
        body += ctx.add("forest", F.forest_figure(cov, dis, what="cluster"), alt="forest plot",
                        caption="Covariates: odds ratios against cluster 1 (log scale, intercept left out); outcomes: "
                                "probability or mean by cluster; 95% intervals.")
    return Section("three-step", "Covariates and outcomes by cluster", body)


# ---------------------------------------------------------------------------------------- characterisation
def _item_html(it) -> str:
    return (f"<strong>{esc(it.name)}</strong> {pct(it.cluster_prevalence)} vs {pct(it.population_prevalence)} "
            f"<span class=\"muted\">(OR {fmt_ratio(it.odds_ratio)})</span>")


def rule_text(ctx: Context) -> str:
    con = ctx.con
    t = MIN_ODDS_RATIO
    if con.source == "none":
        return unavailable("a characterisation", "The result has neither posterior draws (posterior.nc) nor "
                           "95% intervals in profiles.csv, so no rule can tell which differences the posterior "
                           "supports; nothing is listed.")
    first = ("the 95% equal-tailed posterior interval of the difference θ<sub>c</sub> − p̄ (computed draw by "
             "draw, the population p̄ recomputed in each draw) lies entirely above 0, i.e. the posterior "
             "probability that the cluster's prevalence exceeds the population's is at least 0.975"
             if con.source == "draws" else
             "the cluster's 95% interval of θ<sub>c</sub> (profiles.csv) lies entirely above the population's "
             "prevalence p̄ (point estimate: no posterior.nc, so p̄'s own, much smaller, uncertainty is ignored)")
    third = ""
    if con.cases_net is not None:
        third = (f"; and (3) the difference rests on at least {MIN_EXPECTED:g} people: N<sub>c</sub> θ<sub>c</sub> "
                 "(the cluster's rows times its posterior mean prevalence) less the prior's pseudo-counts is at "
                 f"least {MIN_EXPECTED:g} (for low: the number expected at the population's prevalence, likewise "
                 "net of the prior)")
    why3 = ""
    if con.cases_net is not None:
        why3 = (" (3) is Cochran's rule of thumb (expected counts of at least 5) and keeps out differences the "
                "prior makes rather than the data: the global draws combine the silos' local posteriors, each "
                "under the fractionated prior β' = (β − 1)/S + 1 per modality, and keep about β' pseudo-people "
                "per modality from every silo holding the cluster, so a small cluster with no case of a rare "
                "condition still has a visible posterior prevalence of it (the heatmap shows it; the rule "
                "does not list it).")
    return (
        "<div class=\"rule\"><strong>Rule.</strong> A modality is listed as of <strong>high</strong> prevalence "
        f"in a cluster when (1) {first}; (2) the posterior median odds ratio "
        f"θ<sub>c</sub>(1 − p̄) / ((1 − θ<sub>c</sub>) p̄) is at least {t:g}{third}. <strong>Low</strong> is the "
        f"mirror image (interval below 0, odds ratio at most 1/{t:g}). Why: (1) is the level of every interval "
        "this fit reports and keeps out a difference the posterior cannot support (a small cluster's difference "
        "on a rare condition, however large its point estimate); (2) keeps out differences the posterior is "
        "sure of but too small to characterise a cluster (in a large cluster a 10% relative difference is "
        "certain): Chen, Cohen &amp; Chen (2010) equate odds ratios of 1.68, 3.47 and 6.71 with Cohen's small, "
        f"medium and large standardised differences at a 1% base rate, so {t:g} asks for about a medium effect; "
        "the odds ratio, unlike the difference, treats rare and common conditions alike and makes high and "
        f"low symmetric.{why3} Each entry reads: cluster prevalence vs population prevalence (odds ratio). "
        "Every cell, listed or not, with its interval and counts, is in <code>characterisation.csv</code>.</div>")


def characterisation_section(ctx: Context) -> Section:
    fit, con = ctx.fit, ctx.con
    body = rule_text(ctx)
    if con.source == "none":
        return Section("characterisation", "Characterisation of the clusters", body)
    items = characterisation(con)
    n_rows = max(int(fit.sizes.sum()), 1)
    rows = []
    n_high = n_low = 0
    for k in ctx.keep:
        c = fit.clusters[k]
        low, high = items[k]
        n_high += len(high)
        n_low += len(low)
        if not low and not high:
            low_cell = Cell("<span class=\"muted\">no specific modality</span>", "items", raw=True)
            high_cell = Cell("", "items")
        else:
            low_cell = Cell("; ".join(_item_html(i) for i in low), "items", raw=True)
            high_cell = Cell("; ".join(_item_html(i) for i in high), "items", raw=True)
        rows.append(ctx.label_cells(c["cluster"]) + [
            Cell(f"{int(c.get('size') or 0):,} ({pct((c.get('size') or 0) / n_rows)})", "num"), low_cell, high_cell])
    body += (f"<p>{n_high} high and {n_low} low listings over {len(ctx.keep)} clusters and "
             f"{len(con.shown.names)} modalities.</p>")
    body += table(ctx.label_headers + ["N", "Low prevalence", "High prevalence"], rows)
    return Section("characterisation", "Characterisation of the clusters", body)


# ----------------------------------------------------------------------------------------------- K posterior
#: Where the report sends a reader who must choose K for a paper (docs/design.md §15.5).
K_GUIDE = ("<div class=\"rule\"><strong>Choosing K for a paper.</strong> This posterior counts the groups the "
           "over-fitted model's sparse prior cannot empty, small ones included; information criteria charge each "
           "class for its parameters and may choose fewer. <code>vcmc compare FILES --k 1-8 --bayesian DIR --report"
           "</code> puts both side by side, says where and why they disagree, and what to report (docs/nhefs.md "
           "is a worked example).</div>")


def k_posterior(ctx: Context) -> Section:
    diag = ctx.fit.diagnostics
    g, loc = k_distribution(diag.get("n_clusters_posterior"))
    local = local_diagnostics(ctx.fit)
    body = K_GUIDE
    if not g and not loc:
        body += unavailable("the posterior distribution of the number of clusters "
                            "(diagnostics.n_clusters_posterior)", "Shown instead: the fit's point values.")
        rows = [[s, _int(d.get("n_clusters")), _int(d.get("k_hat"))] for s, d in local.items()]
        body += kv([("global clusters holding rows", ctx.fit.result.get("n_clusters"))])
        if rows:
            body += table(["silo", "local clusters sent (after post-processing)",
                           "occupied components (posterior mode)"], rows)
        return Section("k-posterior", "Posterior of the number of clusters K", body)
    if g and fixed_by_matching(ctx.fit, g):
        # The global clusters of a matched method are the matching's: the aggregated posterior has exactly
        # those C clusters, every draw gives each of them rows, so "P(K = C) = 1" holds by construction and
        # measures nothing; the uncertainty about K is in the silos' local posteriors (below).
        body += (f"<p>The number of global clusters, {int(g['values'][0])}, is fixed by the matching of the silos' "
                 "clusters: every draw of the aggregated posterior has these clusters and gives each of them rows, so "
                 "this result has no posterior distribution of the global K (a probability of 1 here would be "
                 "true by construction, not a measured certainty). The posterior uncertainty about K is in each "
                 "silo's own posterior of its number of occupied components"
                 + (", below." if loc else " (not recorded in this result).") + "</p>")
        g = None
    elif g:
        vals, probs = list(g["values"]), [float(p) for p in g["probabilities"]]
        pooled = isinstance(diag.get("n_clusters_posterior"), list) or _mapping(
            diag.get("n_clusters_posterior")).get("definition") == "occupied components of the pooled chain"
        body += ("<p>Posterior probability of each number of clusters, as the method defines it ("
                 + ("the pooled sampler's number of occupied components over its kept draws" if pooled else
                    "diagnostics.n_clusters_posterior.global") + ").</p>")
        body += table(["K", *vals], [["probability", *[Cell(fmt(p), "num") for p in probs]]])
    if loc:
        rows = []
        for s, d in loc.items():
            v, p = np.asarray(d["values"]), np.asarray(d["probabilities"], dtype=float)
            m = int(np.argmax(p)) if p.size else 0
            support = v[p >= 0.01] if p.size else v
            rows.append([s, int(v[m]) if v.size else None, Cell(fmt(float(p[m])) if p.size else "–", "num"),
                         Cell(f"{int(support.min())}–{int(support.max())}" if support.size else "–", "num")])
        body += "<h3>Per silo (local number of clusters)</h3>"
        body += table(["silo", "mode", "P(mode)", "values with probability ≥ 0.01"], rows, tall=len(rows) > 20)
    if not g and not loc:
        return Section("k-posterior", "Posterior of the number of clusters K", body)
    fig = F.k_posterior_figure(g, loc)
    body += ctx.add("k_posterior", fig, alt="posterior of the number of clusters",
                    caption="Posterior of the number of clusters: " + ", ".join(
                        x for x in ("global (bars)" if g else "", "per silo (colour)" if loc else "") if x) + ".")
    return Section("k-posterior", "Posterior of the number of clusters K", body)


# ------------------------------------------------------------------------------------------------ membership
def membership(ctx: Context) -> Section:
    fit = ctx.fit
    cls = _mapping(fit.diagnostics.get("classification"))
    body = ""
    if cls:
        body += ("<p>Relative entropy 1 − E / (n log K) (as Mplus and StepMix report it; E the sum over rows of "
                 "the entropy of their membership probabilities): 1 when every row is certain, 0 when "
                 "memberships are uniform; above 0.8 is commonly read as a clear classification.</p>")
        body += kv([("relative entropy (all rows)", fmt(cls.get("relative_entropy")))])
        per = cls.get("relative_entropy_per_silo") or {}
        if per:
            body += table(["silo", "relative entropy"],
                          [[s, Cell(fmt(v), "num fail" if v is not None and v < 0.8 else "num")]
                           for s, v in per.items()], tall=len(per) > 20)
    else:
        body += unavailable("classification quality (diagnostics.classification)")
    if fit.max_probability is not None:
        x = fit.max_probability
        body += ("<h3>Certainty of each row</h3><p>From " + esc(fit.membership_source) + ": median "
                 f"{fmt(float(np.median(x)))}; {pct(float(np.mean(x < 0.8)))} of rows below 0.8, "
                 f"{pct(float(np.mean(x < 0.5)))} below 0.5.</p>")
    avg = _average_probability(fit)
    if fit.max_probability is None:
        body += unavailable("each row's membership probabilities (memberships.csv, or a probability column in "
                            "assignments.csv)", "The distribution of the maximum probability cannot be drawn"
                            + ("; the average probability of assignment per cluster is shown." if avg else "."))
    names = [ctx.name(fit.clusters[k]["cluster"]) for k in ctx.keep]
    avg_kept = [avg[k] for k in ctx.keep] if avg else None
    if fit.max_probability is not None or avg_kept is not None:
        fig = F.membership_figure(fit.max_probability, names, avg_kept)
        body += ctx.add("membership", fig, alt="membership certainty",
                        caption="Left (when memberships are saved): each row's probability of its assigned "
                                "cluster. Right: average probability of assignment per cluster.")
    return Section("membership", "Membership certainty", body)


# ---------------------------------------------------------------------------------------------- per silo
def contributions(ctx: Context) -> Section:
    fit = ctx.fit
    local = local_diagnostics(fit)
    silos = fit.silos or list(local)
    cids = [fit.clusters[k]["cluster"] for k in ctx.keep]
    counts = np.array([[int((fit.clusters[k].get("size_per_silo") or {}).get(s, 0)) for k in ctx.keep]
                       for s in silos], dtype=np.int64).reshape(len(silos), len(ctx.keep))
    body = ("<p>Rows of each silo in each global cluster (<code>size_per_silo</code>), and what disclosure "
            "control did inside each silo: local clusters withheld (under the minimum size, their members "
            "reallocated inside the silo before anything left it) and count cells suppressed.</p>")
    rows = []
    for i, s in enumerate(silos):
        d = local.get(s, {})
        rows.append([s, int(counts[i].sum()), _int(d.get("n_clusters")), _int(d.get("n_withheld")),
                     _int(d.get("counts_suppressed"))]
                    + [int(v) for v in counts[i]])
    heads = ["silo", "rows", "local clusters", "withheld", "counts suppressed"] + \
        [ctx.name(c) for c in cids]
    body += table(heads, rows, tall=len(rows) > 25)
    min_size = ((fit.result.get("config") or {}).get("privacy") or {}).get("min_cluster_size")
    if min_size is not None:
        small = int(np.count_nonzero((counts > 0) & (counts < int(min_size))))
        body += note(f"Disclosure control: no local cluster (a silo's own cluster, before matching) under "
                     f"{esc(min_size)} people left a silo."
                     + (f" {small} cell(s) of the table above are under {esc(min_size)}: they count each silo's rows "
                        "by the global cluster each row was finally assigned to, on the analyst's own machine, which "
                        "that minimum does not govern." if small else ""))
    if silos and cids:
        fig = F.contributions_figure(counts, silos, [ctx.name(c) for c in cids])
        body += ctx.add("contributions", fig, alt="rows per silo and cluster",
                        caption="Rows of each silo (rows) in each global cluster (columns); colour on a log "
                                "scale, grey: none.")
    return Section("contributions", "Per-silo contributions after disclosure control", body)


_CONV_KEYS = [("n_chains", "chains"), ("iterations_run", "iterations run"), ("n_kept", "kept draws"),
              ("rhat_log_posterior", "R-hat log posterior"), ("ess_bulk_log_posterior", "ESS bulk log post."),
              ("ess_tail_log_posterior", "ESS tail log post."), ("rhat_pi_max", "R-hat weights (max)"),
              ("ess_bulk_pi_min", "ESS bulk weights (min)"), ("ess_tail_pi_min", "ESS tail weights (min)"),
              ("rhat_n_occupied", "R-hat occupied"), ("ess_bulk_n_occupied", "ESS bulk occupied"),
              ("ess_tail_n_occupied", "ESS tail occupied"), ("converged", "converged")]


def _conv_cell(key: str, value):
    if value is None:
        return Cell("–", "num")
    if key.startswith("rhat"):
        v = float(value)
        return Cell(f"{v:.3f}", "num fail" if v > RHAT_MAX else "num",
                    title=f"fails R-hat <= {RHAT_MAX}" if v > RHAT_MAX else None)
    if key.startswith("ess"):
        v = float(value)
        return Cell(f"{v:,.0f}", "num fail" if v < ESS_MIN else "num",
                    title=f"fails ESS >= {ESS_MIN:.0f}" if v < ESS_MIN else None)
    if key == "converged":
        return Cell(str(bool(value)).lower(), "num" if value else "num fail")
    return Cell(f"{int(float(value)):,}", "num")


def convergence(ctx: Context) -> Section:
    local = local_diagnostics(ctx.fit)
    if not local:
        return Section("convergence", "Convergence of the local chains",
                       unavailable("per-silo convergence diagnostics (diagnostics.local)"))
    keys = [(k, h) for k, h in _CONV_KEYS if any(k in d for d in local.values())]
    rows, fails = [], 0
    for s, d in local.items():
        cells = [_conv_cell(k, d.get(k)) for k, _ in keys]
        fails += sum(1 for c in cells if c.cls and "fail" in c.cls)
        rows.append([s, *cells])
    body = (f"<p>Split R-hat and bulk/tail effective sample sizes (ArviZ) of each silo's chains: of its log "
            f"posterior, of its largest weight (R-hat) and smallest weight (ESS). Highlighted: R-hat above "
            f"{RHAT_MAX} or ESS below {ESS_MIN:.0f} (the targets of <code>--iterations auto</code>). "
            f"{fails} failing value(s).</p>")
    body += table(["silo", *[h for _, h in keys]], rows, tall=len(rows) > 25)
    silos = list(local)
    rhat = {h: [local[s].get(k) for s in silos] for k, h in keys if k.startswith("rhat")}
    ess = {h: [local[s].get(k) for s in silos] for k, h in keys if k.startswith("ess")}
    if rhat or ess:
        fig = F.convergence_figure(silos, rhat, ess)
        body += ctx.add("convergence", fig, alt="R-hat and ESS per silo",
                        caption="R-hat (left) and effective sample sizes (right, log scale) of each silo's chains; "
                                "dashed: the thresholds.")
    body += note("Trace and rank plots need each silo's draws of its log posterior, which result.json does not "
                 "hold (they stay in the silo summaries, saved only with <code>--save-summaries</code>).")
    return Section("convergence", "Convergence of the local chains", body)


def elbo(ctx: Context) -> Section:
    diag = ctx.fit.diagnostics
    trace = diag.get("elbo_trace")
    if not isinstance(trace, list) or not trace:
        return Section("elbo", "Aggregation: ELBO trace", unavailable("an ELBO trace (diagnostics.elbo_trace)",
                                                                      "This method has no aggregation step."))
    body = kv([("strategy", diag.get("strategy", "?")), ("objective", diag.get("objective", "?")),
               ("iterations", diag.get("n_iter", len(trace) - 1)), ("converged", diag.get("converged", "?")),
               ("final ELBO", fmt(trace[-1], 2))])
    body += ctx.add("elbo", F.elbo_figure(trace), alt="ELBO trace",
                    caption="Relaxed ELBO of the aggregation weights at each iteration of the optimiser.")
    return Section("elbo", "Aggregation: ELBO trace", body)


def rounds(ctx: Context) -> Section:
    """The global-informed rounds (docs/design.md §16): what ran and why, whether the pooled chain settled,
    its trace, and the births of the start with the values they were born of."""
    title = "Global-informed rounds"
    diag = ctx.fit.diagnostics
    plan = diag.get("rounds_plan") if isinstance(diag.get("rounds_plan"), dict) else {}
    rd = diag.get("rounds")
    if not isinstance(rd, dict) or not rd:
        why = (f"This fit is the one-shot pass: {plan['reason']}." if plan.get("reason") else
               "This fit ran no rounds (--rounds 1, or a method without them).")
        return Section("rounds", title, unavailable("the global-informed rounds (diagnostics.rounds)", why))
    per_round = [r for r in rd.get("per_round", []) if isinstance(r, dict)]
    stability = rd.get("stability") if isinstance(rd.get("stability"), dict) else {}
    disclosed = rd.get("disclosed") if isinstance(rd.get("disclosed"), dict) else {}
    pairs = [("rounds", f"{_count(rd.get('n_rounds'))} (burn-in {_count(rd.get('burn_in'))}, "
                        f"kept {_count(rd.get('n_kept'))})"),
             ("why these rounds", plan.get("reason", "–")),
             ("components of the pooled chain", rd.get("components", "–")),
             ("labels", rd.get("labels", "–")),
             ("the server saw of each round", disclosed.get("per_round", "–"))]
    if stability:
        settled = "yes" if stability.get("stable") else "no"
        why = {"settled": "stopped once settled", "cap": "ran to its last round"}.get(stability.get("reason"), "")
        pairs.append(("settled", f"{settled} (log joint R-hat {fmt(stability.get('rhat'))} over the kept rounds"
                                 f"{'; ' + why if why else ''})"))
        if stability.get("chains_agree") is False:
            pairs.append(("two chains", "did not agree: the answer is the chain of higher posterior"))
    sent = int(disclosed.get("bytes_relayed") or sum(int(r.get("bytes_sent") or 0) for r in per_round))
    if sent:
        pairs.append(("relayed by the server", f"{sent / 1e6:,.1f} MB over the rounds"))
    if rd.get("seconds") is not None:
        pairs.append(("seconds", fmt(rd.get("seconds"), 1)))
    body = kv(pairs)
    unsettled = [w for w in diag.get("warnings", []) if "did not settle" in w or "did not agree" in w]
    if stability and not stability.get("stable") and unsettled:
        body += f'<div class="warn">{esc(unsettled[0])}</div>'
    if per_round:
        body += ctx.add("rounds", F.rounds_figure([r.get("round") for r in per_round], [r.get("k") for r in per_round],
                                                  [r.get("log_joint") for r in per_round], int(rd.get("burn_in") or 0)),
                        alt="occupied components and log joint per round",
                        caption="The pooled chain of the rounds: occupied components and log joint per round. A "
                                "log joint still rising after the burn-in means the rounds have not settled.")
    body += _births(ctx, rd.get("births"))
    return Section("rounds", title, body)


def _births(ctx: Context, births) -> str:
    """The start's births: the value each was born of, its rows, and the global cluster it became."""
    if not isinstance(births, dict):
        return ""
    columns = births.get("columns") or []
    if not columns:
        why = births.get("none_because") or "none were asked for"
        return f"<h3>Births</h3><p>No births at the start of the rounds: {esc(why)}.</p>"
    labels = ctx.fit.columns.labels
    rows = []
    for j, n, cid in zip(columns, births.get("rows") or [None] * len(columns),
                         births.get("clusters") or [None] * len(columns), strict=False):
        value = f"{labels[j][0]}={labels[j][1]}" if 0 <= int(j) < len(labels) else f"column {j}"
        became = ctx.name(cid) if cid is not None else Cell("none (emptied, or under the minimum size)", "muted")
        rows.append([value, _int(n), became])
    return ("<h3>Births</h3><p>Components started from each silo's worst-explained rows "
            f"({pct(float(births.get('share') or 0))} of each silo), grouped by the value that explains each least "
            "(docs/design.md §16).</p>" + table(["value", "rows", "global cluster it became"], rows, scroll=False))


# ---------------------------------------------------------------------------------------------------- PPC
def _pooled(rows: list[dict]) -> list[dict]:
    pooled = [r for r in rows if r.get("silo") in _POOLED]
    return pooled or rows


def _ppp_cell(p):
    if p is None:
        return Cell("–", "num")
    p = float(p)
    return Cell(fmt(p), "num fail" if p < PPP_LOW or p > 1 - PPP_LOW else "num")


def _flagged(rows: list[dict]) -> list[dict]:
    bad = [r for r in rows if r.get("ppp") is not None and not PPP_LOW <= float(r["ppp"]) <= 1 - PPP_LOW]
    return sorted(bad, key=lambda r: min(float(r["ppp"]), 1 - float(r["ppp"])))


def ppc(ctx: Context) -> Section:
    diag = ctx.fit.diagnostics
    p = _mapping(diag.get("ppc"))
    body = ""
    if not p:
        body += unavailable("posterior predictive checks (diagnostics.ppc)")
    else:
        body += (f"<p>{esc(p.get('n_replicates', '?'))} replicated data sets drawn inside the silos from the "
                 "global posterior; observed statistics against replicated ones. ppp: posterior predictive "
                 f"p-value, flagged outside [{PPP_LOW}, {1 - PPP_LOW}].</p>")
        panels = []
        for key, title, cols in (
                ("prevalence", "Prevalence of each modality", ["variable", "modality"]),
                ("pairs", "Co-occurrence of pairs", ["variable_a", "modality_a", "variable_b", "modality_b"])):
            part = _mapping(p.get(key))
            if not part:
                body += unavailable(f"the {title.lower()} check (diagnostics.ppc.{key})")
                continue
            rows = part.get("table") or []
            flagged = _flagged(rows)
            body += f"<h3>{esc(title)}</h3>"
            body += kv([("summary statistic", fmt(part.get("statistic"))), ("its p-value", fmt(part.get("p_value"))),
                        ("checks", f"{len(rows):,}"), ("flagged", f"{len(flagged):,}")])
            if flagged:
                shown = flagged[:MAX_ROWS]
                trs = [[r.get(c, "") for c in cols] + [r.get("silo") or "pooled", _num(r.get("observed")),
                                                       _num(r.get("replicated_mean")),
                                                       Cell("[" + ", ".join(fmt(v) for v in (r.get("replicated_ci95")
                                                                                              or [None, None]))
                                                            + "]", "num"), _ppp_cell(r.get("ppp"))] for r in shown]
                body += table(cols + ["silo", "observed", "replicated mean", "replicated 95%", "ppp"], trs,
                              tall=len(trs) > 20)
                if len(flagged) > MAX_ROWS:
                    body += note(f"... and {len(flagged) - MAX_ROWS:,} more flagged checks (all in result.json, "
                                 "diagnostics.ppc).")
            if rows:
                panels.append((title + " (pooled)", _pooled(rows)))
        if panels:
            body += ctx.add("ppc", F.ppc_figure(panels), alt="posterior predictive checks",
                            caption="Observed against replicated statistics over all silos (grey: replicated 95% "
                                    "interval; red: ppp outside [0.025, 0.975]).")
    w = _mapping(diag.get("waic"))
    body += "<h3>Model comparison (WAIC)</h3>"
    if not w:
        body += unavailable("WAIC (diagnostics.waic)")
    else:
        body += kv([("elpd_waic", fmt(w.get("elpd_waic"), 1)), ("se", fmt(w.get("se"), 1)),
                    ("p_waic", fmt(w.get("p_waic"), 1)), ("rows", w.get("n_rows"))])
        if w.get("definition"):
            body += note(esc(w["definition"]))
    return Section("ppc", "Posterior predictive checks and model comparison", body)


# --------------------------------------------------------------------------------------------- warnings
def warnings_section(ctx: Context) -> Section:
    diag = ctx.fit.diagnostics
    warns = diag.get("warnings") if isinstance(diag.get("warnings"), list) else []
    warns = list(warns) + weakly_identified(ctx.fit.clusters, [ctx.fit.clusters[k]["cluster"] for k in ctx.keep])
    body = ""
    if warns:
        body += "".join(f'<div class="warn">{esc(w)}</div>' for w in warns)
    else:
        body += "<p>The fit raised no warning.</p>"
    checks = diag.get("matching_checks")
    if not isinstance(checks, list):
        body += unavailable("matching checks (diagnostics.matching_checks)")
    else:
        body += (f"<p>{len(checks)} finding(s) of the matching checks (evidence that a global cluster may be a "
                 "matching artefact); each is in result.json, diagnostics.matching_checks.</p>")
    return Section("warnings", "Warnings", body)


# ----------------------------------------------------------------------------------------------- config
def _flatten(d, prefix=""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _flatten(v, key + ".")
        else:
            yield key, v


def configuration(ctx: Context) -> Section:
    r = ctx.fit.result
    body = kv([("method", r.get("method")), ("seed", r.get("seed")), ("vcmc version", r.get("vcmc_version")),
               ("result format", r.get("format_version")), ("intervals", r.get("interval")),
               ("point estimates", r.get("point_estimate"))])
    timings = r.get("timings_s") or {}
    if timings:
        body += "<h3>Timings (s)</h3>" + table(list(timings), [[float(v) for v in timings.values()]])
    cfg = r.get("config")
    if isinstance(cfg, dict) and cfg:
        groups = {k: v for k, v in cfg.items() if isinstance(v, dict)}
        loose = {k: v for k, v in cfg.items() if not isinstance(v, dict)}
        if loose:
            groups = {"options": loose, **groups}
        tables = [table([name, "value"], [[k, Cell("null" if v is None else str(v))] for k, v in _flatten(opts)],
                        scroll=False) for name, opts in groups.items()]
        body += "<h3>Options</h3><div class=\"groups\">" + "".join(f"<div>{t}</div>" for t in tables) + "</div>"
    else:
        body += unavailable("the fit's options (config)")
    return Section("configuration", "Configuration, seed and version", body)
