"""Figures of the study: written as PNG from saved cells."""

from __future__ import annotations


def test_figures_are_written(study):
    from vcmc.research.study.figures import write_figures

    out, _ = study
    paths = write_figures(out)
    for p in paths.values():
        assert p.exists() and p.stat().st_size > 5000
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
