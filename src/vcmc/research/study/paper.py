"""The paper's published numbers (Tables 2-5 of section 5), read from ``paper_tables.json``.

The JSON file shipped beside this module is a verbatim copy of the project's machine-readable reference
(the paper's Tables 1-5 and protocol); no number of the paper is typed anywhere in the code.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

#: Registry method name -> the paper's key in Tables 3-5 (the paper uses Ball matching from Table 3 on; the
#: library's default, calibrated Ball, is compared with the same published VCMC column).
PAPER_KEY_TABLES_3_5 = {"vcmc-calibrated": "vcmc", "vcmc-ball": "vcmc", "full-mcmc": "full_mcmc",
                        "fed-kmodes": "fed_kmodes", "fedmerdel": "fedmerdel"}
#: Registry method name -> the paper's key in Table 2 (matching comparison).
PAPER_KEY_TABLE_2 = {"vcmc-ball": "ball", "vcmc-hungarian": "hungarian",
                     "vcmc-min-divergence": "min_divergence"}


@cache
def paper_tables() -> dict:
    """The parsed ``paper_tables.json`` (cached; treat as read-only)."""
    text = resources.files("vcmc.research.study").joinpath("paper_tables.json").read_text(encoding="utf-8")
    return json.loads(text)


def table2(scenario: str, method: str) -> dict | None:
    """``{"correct_matching", "mean_ari"}`` of the paper for a VCMC matching method, or None."""
    key = PAPER_KEY_TABLE_2.get(method)
    if key is None:
        return None
    return paper_tables()["table2_matching"].get(scenario, {}).get(key)


def table3(scenario: str, method: str) -> dict | None:
    """``{"time_s", "n_clusters", "ari", "vi"}`` -> [mean, sd] of the paper, or None."""
    key = PAPER_KEY_TABLES_3_5.get(method)
    if key is None:
        return None
    return paper_tables()["table3_runtime_clustering"].get(scenario, {}).get(key)


def table4(scenario: str, method: str) -> dict | None:
    """``{"relative_bias": [...], "coverage95": [...] or None}`` per true cluster, or None."""
    key = PAPER_KEY_TABLES_3_5.get(method)
    if key is None:
        return None
    return paper_tables()["table4_pi"].get(scenario, {}).get(key)


def table5(scenario: str, method: str) -> dict | None:
    """``{"relative_bias": [...6 bins], "coverage95": [...] or None}``, or None."""
    key = PAPER_KEY_TABLES_3_5.get(method)
    if key is None:
        return None
    return paper_tables()["table5_p"]["results"].get(scenario, {}).get(key)


def table5_bins() -> list[str]:
    """Labels of the six ranges of true p used by Table 5."""
    return list(paper_tables()["table5_p"]["ranges_of_true_p"])
