"""``vcmc study``: argument handling, a small real run, and the CI quick profile (slow)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.research.study import paper


def test_list_methods(capsys):
    assert main(["study", "--list-methods"]) == 0
    out = capsys.readouterr().out
    for name in ("vcmc-ball", "vcmc-hungarian", "vcmc-min-divergence", "full-mcmc", "fed-kmodes"):
        assert name in out


def test_unknown_scenario_is_a_clear_error(tmp_path, capsys):
    code = main(["study", "--out", str(tmp_path), "--scenarios", "nested/medium", "--methods", "fed-kmodes"])
    assert code == 1
    err = capsys.readouterr().err
    assert "nested/medium" in err and "homogeneous/easy" in err


def test_tables_only_needs_a_study(tmp_path, capsys):
    assert main(["study", "--out", str(tmp_path / "none"), "--tables-only"]) == 1
    assert "study.json" in capsys.readouterr().err


def test_small_real_study_and_single_cell_rerun(tmp_path):
    """Federated K-modes (seconds per cell) on one scenario: tables with the paper's values, and one
    replicate re-run alone gives the same numbers."""
    pytest.importorskip("vcmc.research.baselines.fed_kmodes")
    out = tmp_path / "s"
    args = ["study", "--out", str(out), "--methods", "fed-kmodes", "--scenarios", "non-nested/easy",
            "--replicates", "2", "--n-per-silo", "200", "--jobs", "1", "--no-figures"]
    assert main(args) == 0
    t3 = pd.read_csv(out / "tables" / "table3.csv")
    row = t3[(t3["method"] == "fed-kmodes") & (t3["quantity"] == "ARI")].iloc[0]
    assert row["n"] == 2 and 0 < row["ours_mean"] <= 1
    assert row["paper_mean"] == paper.paper_tables()["table3_runtime_clustering"]["non_nested/easy"][
        "fed_kmodes"]["ari"][0]
    cell = out / "cells" / "non_nested-easy" / "rep-0001.json"
    before = json.loads(cell.read_text())
    # every cell is written atomically (a new file renamed into place), so a rewritten cell is a new inode:
    # no clock resolution decides the outcome
    inode = cell.stat().st_ino
    # restarting recomputes nothing
    assert main(args) == 0
    assert cell.stat().st_ino == inode
    # forcing one cell recomputes it alone, with the same result
    assert main([*args, "--replicate", "1", "--force"]) == 0
    after = json.loads(cell.read_text())
    assert cell.stat().st_ino != inode
    assert after["methods"]["fed-kmodes"]["ari"] == before["methods"]["fed-kmodes"]["ari"]
    assert after["methods"]["fed-kmodes"]["pi"] == before["methods"]["fed-kmodes"]["pi"]


@pytest.mark.slow
def test_quick_profile_runs_in_ci_time(tmp_path):
    """The CI profile: all six scenarios, VCMC (three matchings) and full MCMC, with the paper's values beside
    ours in every table (its time is measured by the suite's durations, not asserted: the machine is shared)."""
    out = tmp_path / "quick"
    assert main(["study", "--profile", "quick", "--out", str(out), "--jobs", "2"]) == 0
    ref = paper.paper_tables()
    t2 = pd.read_csv(out / "tables" / "table2.csv")
    assert len(t2) == 24
    # the paper has Table 2 values for its three matchings, not for the library's calibrated default
    assert t2[t2["method"] != "vcmc-calibrated"]["paper_correct_pct"].notna().all()
    assert (t2["n_replicates"] == 2).all()
    t3 = pd.read_csv(out / "tables" / "table3.csv")
    for method, key in (("vcmc-calibrated", "vcmc"), ("vcmc-ball", "vcmc"), ("full-mcmc", "full_mcmc")):
        ari = t3[(t3["method"] == method) & (t3["quantity"] == "ARI")]
        assert len(ari) == 6
        for r in ari.itertuples():
            assert r.paper_mean == ref["table3_runtime_clustering"][r.scenario][key]["ari"][0]
        # short chains still recover the easy scenarios well
        easy = ari[ari["scenario"].str.endswith("easy")]
        assert (easy["ours_mean"] > 0.8).all()
    t4 = pd.read_csv(out / "tables" / "table4.csv")
    assert t4[t4["method"].isin(["vcmc-ball", "full-mcmc"])]["paper_rb"].notna().all()
    t5 = pd.read_csv(out / "tables" / "table5.csv")
    assert set(t5["bin"]) == set(paper.table5_bins())
    for p in ("figure3_n_clusters.png", "ari_by_method.png", "pi_vs_paper.png"):
        assert (out / "figures" / p).stat().st_size > 5000
