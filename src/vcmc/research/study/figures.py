"""Figures of the simulation study (PNG, matplotlib Agg backend).

- ``figure3_n_clusters.png``: the paper's Figure 3, distribution of the estimated number of clusters per
  method and scenario, the true number marked.
- ``ari_by_method.png``: ARI per replicate (box plots) with the paper's mean ARI marked, per scenario.
- ``pi_vs_paper.png``: Table 4 read at a glance: our relative bias and coverage of each pi_c against the
  paper's value (identity line; points on it agree).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vcmc.atomic import atomic_path
from vcmc.research.study import paper
from vcmc.research.study.profiles import SCENARIOS

__all__ = ["write_figures"]

_DESIGNS = ("homogeneous", "nested", "non_nested")
_SEPS = ("easy", "poor")


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _colours(methods):
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {m: cmap(i % 10) for i, m in enumerate(methods)}


def figure3(df, path: Path, true_k: dict[str, int]) -> Path:
    """Distribution of the number of clusters per method (bars) in a 2 x 3 grid of scenarios."""
    from vcmc.research.study.tables import method_label, method_order, scenario_label

    plt = _plt()
    methods = method_order(df["method"].unique())
    col = _colours(methods)
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), sharey=True, squeeze=False)
    kmax = int(np.nanmax(df["n_clusters"])) if len(df) else 8
    kmin = int(np.nanmin(df["n_clusters"])) if len(df) else 1
    ks = np.arange(max(kmin, 1), max(kmax, 7) + 1)
    width = 0.8 / max(len(methods), 1)
    for i, sep in enumerate(_SEPS):
        for j, design in enumerate(_DESIGNS):
            ax = axes[i, j]
            sc = f"{design}/{sep}"
            g = df[df["scenario"] == sc]
            ax.set_title(scenario_label(sc), fontsize=10)
            if sc in true_k:
                ax.axvline(true_k[sc], color="grey", ls="--", lw=1)
            for m_i, m in enumerate(methods):
                x = g.loc[g["method"] == m, "n_clusters"].dropna().to_numpy()
                if x.size == 0:
                    continue
                freq = np.array([(x == k).mean() for k in ks])
                ax.bar(ks + (m_i - (len(methods) - 1) / 2) * width, freq, width=width, color=col[m],
                       label=method_label(m))
            ax.set_xticks(ks)
            if i == 1:
                ax.set_xlabel("estimated number of clusters")
            if j == 0:
                ax.set_ylabel("share of replicates")
    handles, labels = [], []
    for ax in axes.ravel():
        h, lab = ax.get_legend_handles_labels()
        for hh, ll in zip(h, lab, strict=True):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    fig.legend(handles, labels, loc="lower center", ncol=max(len(labels), 1), frameon=False)
    fig.suptitle("Figure 3: estimated number of clusters (dashed: truth)")
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path


def ari_figure(df, path: Path) -> Path:
    """ARI per replicate by method and scenario; the paper's mean ARI as a black diamond."""
    from vcmc.research.study.tables import method_label, method_order, scenario_label

    plt = _plt()
    methods = method_order(df["method"].unique())
    col = _colours(methods)
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), sharey=False, squeeze=False)
    for i, sep in enumerate(_SEPS):
        for j, design in enumerate(_DESIGNS):
            ax = axes[i, j]
            sc = f"{design}/{sep}"
            g = df[df["scenario"] == sc]
            ax.set_title(scenario_label(sc), fontsize=10)
            data, pos, cols, pm = [], [], [], []
            for k, m in enumerate(methods):
                x = g.loc[g["method"] == m, "ari"].dropna().to_numpy()
                if x.size == 0:
                    continue
                data.append(x)
                pos.append(k)
                cols.append(col[m])
                # the matching comparison (Table 2) gives every VCMC variant; Table 3 the others
                ref2 = paper.table2(sc, m) or {}
                ref3 = paper.table3(sc, m) or {}
                mean = ref2.get("mean_ari", (ref3.get("ari") or [None])[0])
                pm.append(mean)
            if data:
                bp = ax.boxplot(data, positions=pos, widths=0.6, patch_artist=True)
                for patch, c in zip(bp["boxes"], cols, strict=True):
                    patch.set_facecolor(c)
                    patch.set_alpha(0.6)
                for p, v in zip(pos, pm, strict=True):
                    if v is not None:
                        ax.plot(p, v, marker="D", color="black", ms=5)
            ax.set_xticks(range(len(methods)))
            ax.set_xticklabels([method_label(m) for m in methods], rotation=30, ha="right", fontsize=8)
            if j == 0:
                ax.set_ylabel("ARI (pooled data)")
    fig.suptitle("ARI per replicate (boxes: ours; black diamonds: the paper's mean)")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path


def pi_vs_paper(t4, path: Path) -> Path:
    """Our relative bias and coverage of pi_c against the paper's (Table 4), one point per cell."""
    from vcmc.research.study.tables import method_label, method_order

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), squeeze=False)
    t = t4.dropna(subset=["paper_rb"]) if len(t4) else t4
    methods = method_order(t["method"].unique()) if len(t) else []
    col = _colours(methods)
    for ax, ours, ref, title in ((axes[0, 0], "ours_rb", "paper_rb", "relative bias of π_c"),
                                 (axes[0, 1], "ours_cov", "paper_cov", "95% coverage of π_c")):
        lo, hi = np.inf, -np.inf
        for m in methods:
            g = t[t["method"] == m]
            x = g[ref].astype(float).to_numpy()
            y = g[ours].astype(float).to_numpy()
            ok = np.isfinite(x) & np.isfinite(y)
            if not ok.any():
                continue
            ax.scatter(x[ok], y[ok], color=col[m], label=method_label(m), s=22)
            lo, hi = min(lo, x[ok].min(), y[ok].min()), max(hi, x[ok].max(), y[ok].max())
        if np.isfinite(lo):
            pad = 0.05 * (hi - lo + 1e-9)
            ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", lw=1, ls="--")
        ax.set_xlabel("paper")
        ax.set_ylabel("ours")
        ax.set_title(title)
    if methods:
        axes[0, 0].legend(fontsize=8)
    fig.suptitle("Table 4 against the paper (dashed: identity)")
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path


def write_figures(out, cells: list[dict] | None = None) -> dict[str, Path]:
    """Write the study's figures into ``out/figures`` and return their paths."""
    from vcmc.research.study.tables import current_cells, records_frame, table4

    out = Path(out)
    if cells is None:
        cells = current_cells(out)
    df = records_frame(cells)
    fdir = out / "figures"
    fdir.mkdir(parents=True, exist_ok=True)
    true_k = {}
    for c in cells:
        if c["scenario"] in SCENARIOS:
            true_k[c["scenario"]] = int(np.count_nonzero(np.asarray(c["truth"]["weights"], dtype=float) > 0))
    return {"figure3": figure3(df, fdir / "figure3_n_clusters.png", true_k),
            "ari": ari_figure(df, fdir / "ari_by_method.png"),
            "pi_vs_paper": pi_vs_paper(table4(cells), fdir / "pi_vs_paper.png")}
