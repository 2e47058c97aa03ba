"""The paper's simulation study (section 5): method registry, resumable runner, tables and figures.

Typical use::

    from vcmc.research.study import quick_profile, run_study, write_tables, write_figures
    run_study(quick_profile(), out="study-quick", root_seed=2026, jobs=2)
    write_tables("study-quick"); write_figures("study-quick")

or ``vcmc study --profile quick``.
"""

from vcmc.research.study.figures import write_figures
from vcmc.research.study.profiles import SCENARIOS, StudyProfile, get_profile, paper_profile, quick_profile
from vcmc.research.study.registry import Registry, StudyGroup, StudyMethod, default_registry
from vcmc.research.study.runner import cell_seed, load_cells, run_cell, run_study
from vcmc.research.study.tables import build_tables, write_tables

__all__ = ["SCENARIOS", "Registry", "StudyGroup", "StudyMethod", "StudyProfile", "build_tables", "cell_seed",
           "default_registry", "get_profile", "load_cells", "paper_profile", "quick_profile", "run_cell",
           "run_study", "write_figures", "write_tables"]
