"""Figures of the report (matplotlib, Agg canvas, PNG).

Each function returns a ``matplotlib.figure.Figure`` drawn on an Agg canvas (no pyplot state, no
display); :func:`png` turns it into PNG bytes. Sizes grow with the numbers of clusters, conditions and
silos so that labels keep a readable size at the paper's scale (27 clusters x 80 conditions, 30 silos)
and nothing is stretched at the demo's (6 clusters, 22 modalities, 4 silos).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: Resolution of the PNG files: with the sizes below, tick labels are 8 pt, ~13 px at this resolution.
DPI = 120
FONT = 8.0
#: Threshold lines of the convergence figure (the targets of ``--iterations auto``).
RHAT_MAX = 1.01
ESS_MIN = 400.0


def new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png(fig) -> bytes:
    buf = io.BytesIO()
    # bbox_inches="tight": whatever a figure draws outside its axes (legends, long labels) stays on the canvas
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.05)
    return buf.getvalue()


def _label_width(labels, font=FONT) -> float:
    """Inches taken by the longest tick label (about 0.55 em per character)."""
    longest = max((len(str(s)) for s in labels), default=1)
    return 0.55 * font / 72.0 * longest + 0.2


def sizes_figure(names: list[str], weights, ci, sizes):
    """Weights with their 95% intervals (bars) and sizes (text), one row per cluster."""
    n = len(names)
    fig = new_figure(max(5.0, 3.5 + _label_width(names)), 0.8 + 0.24 * n)
    ax = fig.add_subplot()
    y = np.arange(n)
    w = np.asarray(weights, dtype=float)
    ax.barh(y, w, color="#4c72b0", height=0.7)
    if ci is not None:
        lo = np.asarray([c[0] if c is not None else np.nan for c in ci], dtype=float)
        hi = np.asarray([c[1] if c is not None else np.nan for c in ci], dtype=float)
        ok = np.isfinite(lo) & np.isfinite(hi)
        ax.errorbar(w[ok], y[ok], xerr=[w[ok] - lo[ok], hi[ok] - w[ok]], fmt="none", ecolor="black",
                    elinewidth=1, capsize=2)
    ends = w.copy()
    if ci is not None:
        ends = np.fmax(ends, hi)            # the size is written after the interval, not over it
    xmax = float(np.nanmax(ends)) if n else 1.0
    for i, s in enumerate(sizes):
        ax.text(ends[i] + 0.01 * xmax, i, f" N = {int(s):,}", va="center", fontsize=FONT - 1)
    ax.set_yticks(y, names, fontsize=FONT)
    ax.invert_yaxis()
    ax.set_xlim(0, xmax * 1.4)
    ax.set_xlabel("weight (posterior mean, bar: 95% interval)", fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    return fig


def heatmap_figure(scaled: np.ndarray, row_names: list[str], col_names: list[str], listed: np.ndarray | None,
                   *, annotate: bool | None = None):
    """Scaled difference, modalities as rows and clusters as columns (the paper's Figure 4).

    ``scaled`` and ``listed`` are (J rows, C columns). Cells listed by the characterisation are framed.
    Colours are symmetric about 0 and saturate at the 98th percentile of |value| (at least 1), the
    colour bar's arrows marking values beyond it.
    """
    from matplotlib.patches import Rectangle

    n_r, n_c = scaled.shape
    cell_w = float(np.clip(7.5 / max(n_c, 1), 0.32, 0.75))
    cell_h = 0.19 if n_r > 40 else 0.24
    top = _label_width(col_names) * 0.9 + 0.3          # column labels are written vertically
    width = _label_width(row_names) + n_c * cell_w + 1.4
    height = top + n_r * cell_h + 0.7
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    finite = np.abs(scaled[np.isfinite(scaled)])
    lim = max(1.0, float(np.quantile(finite, 0.98))) if finite.size else 1.0
    im = ax.imshow(scaled, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    ax.set_yticks(range(n_r), row_names, fontsize=FONT)
    ax.set_xticks(range(n_c), col_names, fontsize=FONT, rotation=90)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    if annotate is None:
        annotate = n_r * n_c <= 400
    if annotate:
        for r in range(n_r):
            for c in range(n_c):
                v = scaled[r, c]
                if np.isfinite(v):
                    text = f"{v:.1f}"
                    ax.text(c, r, "0.0" if text == "-0.0" else text, ha="center", va="center", fontsize=FONT - 2,
                            color="white" if abs(v) > 0.6 * lim else "black")
    if listed is not None:
        for r, c in zip(*np.nonzero(listed), strict=True):
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.2))
            if not annotate:      # a sign tells high from low where a rare condition's low stays pale
                v = scaled[r, c]
                ax.text(c, r, "+" if listed[r, c] > 0 else "−", ha="center", va="center", fontsize=FONT,
                        color="white" if np.isfinite(v) and abs(v) > 0.6 * lim else "black")
    cb = fig.colorbar(im, ax=ax, fraction=0.04 if n_r > 40 else 0.08, pad=0.02,
                      extend="both" if finite.size and finite.max() > lim else "neither")
    cb.set_label("(cluster - population) / sd of the population indicator", fontsize=FONT)
    cb.ax.tick_params(labelsize=FONT)
    return fig


def k_posterior_figure(global_k: dict | None, local: dict | None):
    """Posterior of the number of clusters: global (bars) and per silo (probability as colour)."""
    panels = [p for p in (global_k, local) if p]
    silos = list(local) if local else []
    fig = new_figure(max(5.5, 2.5 + 0.3 * _k_span(global_k, local)),
                  2.4 + (0.22 * len(silos) + 0.8 if local else 0.0))
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        height_ratios=[1.0] + ([max(1.0, 0.1 * len(silos))] if local and global_k else []))
    i = 0
    if global_k:
        ax = axes[i, 0]
        i += 1
        ax.bar(global_k["values"], global_k["probabilities"], color="#4c72b0", width=0.7)
        ax.set_xlabel("number of global clusters K", fontsize=FONT)
        ax.set_ylabel("posterior probability", fontsize=FONT)
        ax.set_xticks(global_k["values"])
        ax.tick_params(labelsize=FONT)
    if local:
        ax = axes[i, 0]
        ks = sorted({int(v) for d in local.values() for v in d["values"]})
        grid = np.zeros((len(silos), len(ks)))
        for r, s in enumerate(silos):
            for v, p in zip(local[s]["values"], local[s]["probabilities"], strict=True):
                grid[r, ks.index(int(v))] = p
        im = ax.imshow(grid, aspect="auto", cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks(range(len(ks)), [str(k) for k in ks], fontsize=FONT)
        ax.set_yticks(range(len(silos)), silos, fontsize=FONT)
        ax.set_xlabel("number of local clusters", fontsize=FONT)
        cb = fig.colorbar(im, ax=ax, fraction=0.05)
        cb.set_label("posterior probability", fontsize=FONT)
        cb.ax.tick_params(labelsize=FONT)
    return fig


def _k_span(global_k, local) -> int:
    vals = list(global_k["values"]) if global_k else []
    for d in (local or {}).values():
        vals += list(d["values"])
    return (max(vals) - min(vals) + 1) if vals else 1


def membership_figure(max_probability: np.ndarray | None, names: list[str], average: list | None):
    """Distribution of each row's largest membership probability, and the average probability of
    assignment per cluster."""
    panels = int(max_probability is not None) + int(average is not None)
    fig = new_figure(max(5.5, 3.0 + _label_width(names)) if average is not None else 5.5,
                  2.6 if average is None else max(2.6, 0.8 + 0.22 * len(names)))
    axes = fig.subplots(1, max(panels, 1), squeeze=False)[0]
    i = 0
    if max_probability is not None:
        ax = axes[i]
        i += 1
        x = np.asarray(max_probability, dtype=float)
        lo = max(0.0, float(np.floor(np.nanmin(x) * 20) / 20)) if x.size else 0.0
        ax.hist(x, bins=np.linspace(lo, 1.0, 26), color="#4c72b0")
        ax.set_xlabel("probability of the assigned cluster", fontsize=FONT)
        ax.set_ylabel("rows", fontsize=FONT)
        ax.tick_params(labelsize=FONT)
    if average is not None:
        ax = axes[i]
        y = np.arange(len(names))
        vals = np.array([np.nan if v is None else float(v) for v in average])
        ax.barh(y, np.nan_to_num(vals), color="#55a868", height=0.7)
        ax.set_yticks(y, names, fontsize=FONT)
        ax.invert_yaxis()
        ax.set_xlim(min(0.5, float(np.nanmin(vals)) - 0.05) if np.isfinite(vals).any() else 0, 1.0)
        ax.set_xlabel("average probability of assignment", fontsize=FONT)
        ax.tick_params(labelsize=FONT)
    return fig


def contributions_figure(counts: np.ndarray, silos: list[str], names: list[str]):
    """Rows of each cluster in each silo after disclosure control (colour: log scale)."""
    from matplotlib.colors import LogNorm

    n_s, n_c = counts.shape
    cell_w = float(np.clip(7.5 / max(n_c, 1), 0.32, 0.75))
    annotate = n_s * n_c <= 300
    fig = new_figure(_label_width(silos) + n_c * cell_w + 1.5, _label_width(names) * 0.9 + 0.4 + 0.24 * n_s + 0.6)
    ax = fig.add_subplot()
    masked = np.ma.masked_less_equal(counts.astype(float), 0)
    vmax = max(float(counts.max()), 2.0)
    im = ax.imshow(masked, aspect="auto", cmap="viridis", norm=LogNorm(vmin=1, vmax=vmax),
                   interpolation="nearest")
    ax.set_facecolor("#eeeeee")
    ax.set_xticks(range(n_c), names, rotation=90, fontsize=FONT)
    ax.set_yticks(range(n_s), silos, fontsize=FONT)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    if annotate:
        for r, c in zip(*np.nonzero(counts > 0), strict=True):
            ax.text(c, r, f"{int(counts[r, c])}", ha="center", va="center", fontsize=FONT - 2,
                    color="black" if counts[r, c] > vmax ** 0.6 else "white")
    cb = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02)
    cb.set_label("rows (grey: none)", fontsize=FONT)
    cb.ax.tick_params(labelsize=FONT)
    return fig


def convergence_figure(silos: list[str], rhat: dict[str, list], ess: dict[str, list]):
    """Per-silo R-hat and ESS of the local chains, with the thresholds (R-hat 1.01, ESS 400)."""
    n = len(silos)
    fig = new_figure(8.0, 1.0 + 0.22 * n + 1.2)
    ax_r, ax_e = fig.subplots(1, 2, sharey=True)
    y = np.arange(n)
    markers = "osd^v"
    for k, (name, vals) in enumerate(rhat.items()):
        v = np.array([np.nan if x is None else float(x) for x in vals])
        ax_r.plot(v, y, markers[k % 5], label=name, markersize=4, linestyle="none")
    ax_r.axvline(RHAT_MAX, color="#c44e52", linestyle="--", linewidth=1)
    ax_r.set_xlabel(f"R-hat (dashed: {RHAT_MAX})", fontsize=FONT)
    for k, (name, vals) in enumerate(ess.items()):
        v = np.array([np.nan if x is None else float(x) for x in vals])
        ax_e.plot(v, y, markers[k % 5], label=name, markersize=4, linestyle="none")
    ax_e.axvline(ESS_MIN, color="#c44e52", linestyle="--", linewidth=1)
    ax_e.set_xscale("log")
    ax_e.set_xlabel(f"effective sample size (dashed: {ESS_MIN:.0f})", fontsize=FONT)
    ax_r.set_yticks(y, silos, fontsize=FONT)
    ax_r.invert_yaxis()
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    ax_e.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax_e.xaxis.set_major_formatter(ScalarFormatter())
    ax_e.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = ax_r.get_xlim()
    ax_r.set_xlim(min(lo, 0.998), max(hi, RHAT_MAX + 0.003))
    for ax in (ax_r, ax_e):
        ax.tick_params(labelsize=FONT)
        ax.grid(axis="x", alpha=0.3)
    # one legend for both panels (they plot the same quantities), placed by the constrained layout in a row of
    # its own below the axes: an axes legend anchored below its axes fell outside the canvas and was clipped
    handles, names = ax_r.get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="outside lower center", ncol=min(4, len(handles)), fontsize=FONT - 1,
                   frameon=False)
    return fig


def elbo_figure(trace: list[float]):
    fig = new_figure(5.5, 2.6)
    ax = fig.add_subplot()
    t = np.asarray([np.nan if v is None else float(v) for v in trace])
    ax.plot(np.arange(t.size), t, marker="o" if t.size <= 50 else None, markersize=3, color="#4c72b0")
    ax.set_xlabel("aggregation iteration", fontsize=FONT)
    ax.set_ylabel("relaxed ELBO", fontsize=FONT)
    ax.tick_params(labelsize=FONT)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    return fig


def ppc_figure(panels: list[tuple[str, list[dict]]]):
    """Observed against replicated statistics (pooled over silos), with the replicated 95% interval;
    checks with a posterior predictive p-value outside [0.025, 0.975] in red."""
    fig = new_figure(4.2 * len(panels), 4.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, rows) in zip(axes, panels, strict=True):
        obs = np.array([float(r["observed"]) for r in rows])
        rep = np.array([float(r["replicated_mean"]) for r in rows])
        ci = np.array([r.get("replicated_ci95") or [np.nan, np.nan] for r in rows], dtype=float)
        ppp = np.array([np.nan if r.get("ppp") is None else float(r["ppp"]) for r in rows])
        bad = (ppp < 0.025) | (ppp > 0.975)
        ax.vlines(obs, ci[:, 0], ci[:, 1], color="#999999", linewidth=0.8)
        ax.plot(obs[~bad], rep[~bad], "o", markersize=3, color="#4c72b0", label="0.025 <= ppp <= 0.975")
        if bad.any():
            ax.plot(obs[bad], rep[bad], "o", markersize=4, color="#c44e52", label="ppp outside")
        hi = float(np.nanmax(np.concatenate([obs, ci[:, 1]]))) if obs.size else 1.0
        ax.plot([0, hi], [0, hi], color="black", linewidth=0.6)
        ax.set_xlabel("observed", fontsize=FONT)
        ax.set_ylabel("replicated (mean, 95% interval)", fontsize=FONT)
        ax.set_title(title, fontsize=FONT + 1)
        ax.tick_params(labelsize=FONT)
        ax.legend(fontsize=FONT - 1, loc="upper left")
    return fig


def rounds_figure(rounds: list[int], k: list[float], log_joint: list[float], burn_in: int):
    """The global-informed rounds: occupied components and log joint per round, the burn-in marked."""
    from matplotlib.ticker import MaxNLocator

    fig = new_figure(6.0, 3.6)
    ax_k, ax_lj = fig.subplots(2, 1, sharex=True)
    r = np.asarray(rounds, dtype=float)
    for ax, y, label, color in ((ax_k, k, "occupied components", "#4c72b0"),
                                (ax_lj, log_joint, "log joint", "#dd8452")):
        ax.plot(r, np.asarray([np.nan if v is None else float(v) for v in y]), color=color, linewidth=0.8,
                drawstyle="steps-post" if ax is ax_k else "default")
        ax.axvline(burn_in + 0.5, color="#888888", linestyle="--", linewidth=0.8)
        ax.set_ylabel(label, fontsize=FONT)
        ax.tick_params(labelsize=FONT)
    ax_k.yaxis.set_major_locator(MaxNLocator(integer=True))     # K is a whole number
    ax_lj.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax_lj.set_xlabel("round (dashed: end of the burn-in)", fontsize=FONT)
    return fig


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
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(classes) <= 10 else "tab20"]
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


def forest_figure(covariates: pd.DataFrame | None, distal: pd.DataFrame | None, *, what: str = "class"):
    """Forest plot: covariates as odds ratios against class 1 (log axis, the intercept left out), and each
    distal outcome's probability (or mean) by class, with 95% intervals and labelled axes."""

    panels = []
    if covariates is not None and len(covariates):
        cov = covariates[covariates["term"].astype(str) != "intercept"]
        if len(cov):
            panels.append(("covariates", f"covariates of {what} membership", cov))
    if distal is not None and len(distal):
        for name, d in distal.groupby("outcome", sort=False):
            levels = list(dict.fromkeys(map(str, d["level"])))
            if len(levels) == 2:           # a binary outcome: its second level (death = 1) says it all
                d = d[d["level"].astype(str) == levels[1]]
            panels.append(("distal", f"outcome {name} by {what}", d))
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
            from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

            labels = [f"{what} {r.cluster} vs 1: {r.term}" for r in d.itertuples()]
            ax.set_xscale("log")
            ax.axvline(1.0, color="grey", lw=0.8, ls="--")
            span = np.concatenate([lo, hi, [1.0]])
            span = span[np.isfinite(span) & (span > 0)]
            nice = np.array([b * 10.0 ** e for e in range(-4, 5) for b in (1, 2, 5)])
            ticks = nice[(nice >= span.min() / 1.01) & (nice <= span.max() * 1.01)]
            if ticks.size < 2:
                ticks = nice[(nice >= span.min() / 3) & (nice <= span.max() * 3)]
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_xlabel(f"odds ratio against {what} 1 (95% interval; log scale)", fontsize=FONT)
        else:
            labels = [f"{what} {r.cluster}: " + ("mean" if str(r.level) == "mean" else f"P({r.outcome} = {r.level})")
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
