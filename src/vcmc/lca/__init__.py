"""Server side of the maximum-likelihood latent class analysis (docs/design.md §15).

Federated EM for a fixed number of classes (``em``), StepMix's fit statistics (``statistics``), the
bias-adjusted three-step covariate and distal models (``structural``), the K comparison and the analysis of
one K (``analysis``), and their files (``outputs``). The silo side is ``vcmc.rows.lca``; the messages are
``vcmc.protocol.lca``.
"""

# Lazy attributes: `vcmc fit`'s argument parser imports vcmc.lca.cli, and must not pay for the analysis
# modules (scipy, the plots) before it has checked its arguments (docs/reliability.md: --out within a second).
_ATTRIBUTES = {"COMPARISON_COLUMNS": "analysis", "LcaAnalysis": "analysis", "analyse": "analysis",
               "compare": "analysis", "lca_silos": "analysis", "LcaFit": "em", "fit_lca": "em",
               "fit_statistics": "statistics"}

__all__ = sorted(_ATTRIBUTES)


def __getattr__(name: str):
    if name not in _ATTRIBUTES:
        raise AttributeError(f"module 'vcmc.lca' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"vcmc.lca.{_ATTRIBUTES[name]}"), name)
