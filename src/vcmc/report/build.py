"""``write_report``: one self-contained ``report.html`` of a fit's output folder, plus its figures as PNG."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vcmc.atomic import atomic_path, atomic_write_bytes, atomic_write_text
from vcmc.report import sections as S
from vcmc.report.characterise import contrast, contrast_frame
from vcmc.report.continuous import continuous_section
from vcmc.report.html import Section, document
from vcmc.report.labels import read_labels
from vcmc.report.load import load_fit


@dataclass
class ReportPaths:
    html: Path
    figures: dict[str, Path]
    characterisation: Path


def write_report(folder, *, out=None, labels=None) -> ReportPaths:
    """Write ``out`` (default ``folder/report.html``), ``folder/figures/*.png`` and
    ``folder/characterisation.csv`` from the files ``vcmc fit`` wrote into ``folder``.

    Parameters
    ----------
    folder : path-like
        A ``vcmc fit --out`` folder (``result.json`` and ``profiles.csv`` required; ``posterior.nc``,
        ``assignments.csv`` and ``memberships.csv`` used when present).
    out : path-like, optional
        Where to write the HTML page.
    labels : path-like, optional
        Cluster names (:func:`vcmc.report.labels.read_labels`).
    """
    fit = load_fit(folder)
    sizes = fit.sizes
    keep = [i for i in range(len(fit.clusters)) if sizes[i] > 0] or list(range(len(fit.clusters)))
    names = read_labels(labels, fit.cluster_ids, required=[fit.cluster_ids[i] for i in keep]) if labels else {}
    con = contrast(fit)
    ctx = S.Context(fit=fit, labels=names, con=con, keep=keep)
    sections: list[Section] = [
        S.sizes(ctx), S.items(ctx), S.heatmap(ctx), continuous_section(ctx), S.characterisation_section(ctx),
        S.three_step_section(ctx), S.k_posterior(ctx), S.membership(ctx),
        S.contributions(ctx), S.convergence(ctx), S.elbo(ctx), S.rounds(ctx), S.ppc(ctx), S.warnings_section(ctx),
        S.configuration(ctx)]
    sections = [x for x in sections if x is not None]
    intro = S.overview(ctx)
    method = fit.result.get("method", "vcmc")
    title = f"{method} fit: {len(keep)} clusters, {int(fit.result.get('n_rows', sizes.sum())):,} rows"
    page = document(title, intro, sections)

    folder = Path(folder)
    fig_dir = folder / "figures"
    fig_paths = {}
    for key, data in ctx.figures.items():
        fig_paths[key] = fig_dir / f"{key}.png"
        atomic_write_bytes(fig_paths[key], data)
    csv_path = folder / "characterisation.csv"
    with atomic_path(csv_path) as tmp:
        contrast_frame(con, fit.cluster_ids, names).to_csv(tmp, index=False)
    html_path = Path(out) if out is not None else folder / "report.html"
    atomic_write_text(html_path, page)
    return ReportPaths(html=html_path, figures=fig_paths, characterisation=csv_path)


__all__ = ["ReportPaths", "write_report"]
