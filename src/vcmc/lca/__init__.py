"""Server side of the maximum-likelihood latent class analysis (docs/design.md §15).

Federated EM for a fixed number of classes (``em``), StepMix's fit statistics (``statistics``), the
bias-adjusted three-step covariate and distal models (``structural``), the K comparison and the analysis of
one K (``analysis``), and their files (``outputs``). The silo side is ``vcmc.silo.lca``; the messages are
``vcmc.protocol.lca``.
"""

from vcmc.lca.analysis import COMPARISON_COLUMNS, LcaAnalysis, analyse, compare, lca_silos
from vcmc.lca.em import LcaFit, fit_lca
from vcmc.lca.statistics import fit_statistics

__all__ = ["COMPARISON_COLUMNS", "LcaAnalysis", "LcaFit", "analyse", "compare", "fit_lca", "fit_statistics",
           "lca_silos"]
