"""The continuous items of a result on their original scale (docs/design.md §17.9): per cluster and item the
posterior mean and 95% interval of the cluster's mean and of its standard deviation, in the data's units
(``x = location + scale * z`` of the schema's standardisation, ``vcmc.data.continuous``)."""

from __future__ import annotations

import numpy as np


def continuous_table(gaussian_draws: np.ndarray, continuous) -> dict[str, list]:
    """Columns of ``continuous.csv``: ``cluster`` (1-based), ``variable``, ``unit``, ``mean`` with ``mean_ci95_low``
    and ``mean_ci95_high``, ``sd`` with ``sd_ci95_low`` and ``sd_ci95_high``, from the global draws (T, C, 2G)."""
    draws = np.asarray(gaussian_draws, dtype=np.float64)
    g = draws.shape[2] // 2
    loc = np.array([v.location for v in continuous])
    scale = np.array([v.scale for v in continuous])
    mean = loc + scale * draws[:, :, :g]                       # (T, C, G) in the data's units
    sd = scale * np.sqrt(draws[:, :, g:])
    lo_m, hi_m = np.quantile(mean, [0.025, 0.975], axis=0)
    lo_s, hi_s = np.quantile(sd, [0.025, 0.975], axis=0)
    c = draws.shape[1]
    return {"cluster": np.repeat(np.arange(1, c + 1), g).tolist(),
            "variable": [v.name for v in continuous] * c, "unit": [v.unit for v in continuous] * c,
            "mean": mean.mean(axis=0).ravel().tolist(), "mean_ci95_low": lo_m.ravel().tolist(),
            "mean_ci95_high": hi_m.ravel().tolist(), "sd": sd.mean(axis=0).ravel().tolist(),
            "sd_ci95_low": lo_s.ravel().tolist(), "sd_ci95_high": hi_s.ravel().tolist()}


def continuous_figure(frame, names: dict[int, str]):
    """One panel per continuous variable: each cluster's mean (dot, bar: 95% interval) and its spread, mean +- one
    standard deviation (the grey band), in the data's units: the continuous counterpart of the profile heatmap."""
    from vcmc.report.figures import FONT, new_figure

    variables = list(dict.fromkeys(frame["variable"]))
    clusters = list(dict.fromkeys(frame["cluster"]))
    fig = new_figure(2.2 * len(variables) + 1.0, 0.9 + 0.28 * len(clusters))
    for j, var in enumerate(variables):
        ax = fig.add_subplot(1, len(variables), j + 1)
        part = frame[frame["variable"] == var].set_index("cluster").loc[clusters]
        y = np.arange(len(clusters))
        ax.barh(y, 2 * part["sd"], left=part["mean"] - part["sd"], color="#dddddd", height=0.6)
        ax.errorbar(part["mean"], y, xerr=[part["mean"] - part["mean_ci95_low"],
                                           part["mean_ci95_high"] - part["mean"]],
                    fmt="o", color="#4c72b0", markersize=3, elinewidth=1, capsize=2)
        unit = str(part["unit"].iloc[0]) if "unit" in part and isinstance(part["unit"].iloc[0], str) else ""
        ax.set_title(var + (f" ({unit})" if unit else ""), fontsize=FONT)
        ax.set_yticks(y, [names.get(int(c), str(c)) for c in clusters] if j == 0 else [], fontsize=FONT)
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelsize=FONT - 1)
    return fig


def continuous_section(ctx):
    """The report's section on the continuous variables (``continuous.csv``), or None without them."""
    import pandas as pd

    from vcmc.report.html import Cell, Section, fmt, table

    path = ctx.fit.folder / "continuous.csv"
    if not path.is_file():
        return None
    frame = pd.read_csv(path, keep_default_na=False)
    shown = {int(ctx.fit.clusters[k]["cluster"]) for k in ctx.keep}
    frame = frame[frame["cluster"].isin(shown)]
    rows = [ctx.label_cells(int(r.cluster)) + [
        r.variable, r.unit, Cell(fmt(r.mean), "num"), Cell(f"[{fmt(r.mean_ci95_low)}, {fmt(r.mean_ci95_high)}]", "num"),
        Cell(fmt(r.sd), "num"), Cell(f"[{fmt(r.sd_ci95_low)}, {fmt(r.sd_ci95_high)}]", "num")]
        for r in frame.itertuples()]
    body = ("<p>Each cluster's mean and standard deviation of every continuous variable, in the data's units: "
            "posterior means and equal-tailed 95% intervals of the global draws (<code>continuous.csv</code>).</p>")
    body += table(ctx.label_headers + ["variable", "unit", "mean", "95% interval", "sd", "95% interval"], rows)
    names = {int(c): ctx.name(int(c)) for c in frame["cluster"]}
    body += ctx.add("continuous", continuous_figure(frame, names), alt="cluster means of the continuous variables",
                    caption="Cluster means (dot, bar: 95% interval) and mean ± one standard deviation (grey).")
    return Section("continuous", "Continuous variables", body)
