"""Checks that flag matching artefacts: they fire where the paper's Ball fragments wide data, stay quiet
where the matching is right, and reach result.json and the CLI output."""

import json

import numpy as np
import pytest

from vcmc.config import MatchingConfig
from vcmc.matching import match
from vcmc.matching.checks import matching_checks, summarise_checks
from vcmc.research.simulate import simulate
from vcmc.research.study.evaluate import appendix_a_silos


def _wide(seed, n_draws=300):
    """8 silos x 500, 20 variables x 4 modalities; 6 clusters everywhere and 2 each in one silo only."""
    w = np.zeros((8, 8))
    w[:, :6] = 1
    w[0, 6] = w[1, 7] = 1
    w /= w.sum(axis=1, keepdims=True)
    data = simulate(n_per_silo=500, weights=w, n_modalities=(4,) * 20, concentration=0.5, rng=seed)
    summaries, _, _ = appendix_a_silos([s.codes for s in data.silos], list(data.labels), data.n_modalities,
                                       n_draws=n_draws, rng=seed)
    return data, summaries


@pytest.mark.parametrize("seed", [1, 2])
def test_single_silo_copies_left_by_the_papers_ball_are_flagged(seed):
    _, summaries = _wide(seed)
    ball = match(summaries, MatchingConfig(method="ball"))
    findings = matching_checks(summaries, ball)
    single = [f for f in findings if f["kind"] == "single-silo-close"]
    presence = ball.presence()
    n_single = int(np.sum(presence.sum(axis=0) == 1))
    # every single-silo copy of a cluster found in other silos is flagged; the two true single-silo
    # clusters (7 and 8 in silos 1 and 2) have no close cluster elsewhere and are not
    assert n_single - 2 <= len(single) <= n_single
    assert all(f["statistic"] <= f["threshold"] for f in single)
    alike = [f for f in findings if f["kind"] == "similar-silos-disjoint"]
    assert alike, "silos drawn from one distribution that share few clusters must be flagged"
    lines = summarise_checks(findings, "ball")
    assert any("--matching calibrated" in line for line in lines)


def test_a_right_matching_raises_no_flag():
    _, summaries = _wide(3)
    calibrated = match(summaries, MatchingConfig())
    assert calibrated.n_global == 8
    assert matching_checks(summaries, calibrated) == []


def test_the_flags_reach_result_json_and_the_cli(tmp_path, capsys):
    from vcmc.cli import main

    data, _ = _wide(4)
    data.write(tmp_path / "data")
    files = sorted(str(p) for p in (tmp_path / "data").glob("silo_*.csv"))
    out = tmp_path / "fit"
    # --rounds 1: the matching's checks are the one-shot pass's (after the rounds they are kept under
    # diagnostics.one_shot, the rounds' clusters not being a matching)
    assert main(["fit", *files, "--out", str(out), "--iterations", "1200", "--seed", "1", "--matching",
                 "ball", "--rounds", "1"]) == 0
    err = capsys.readouterr().err
    result = json.loads((out / "result.json").read_text())
    checks = result["diagnostics"]["matching_checks"]
    assert any(c["kind"] == "single-silo-close" for c in checks)
    flagged = [w for w in result["diagnostics"]["warnings"] if "found in silo" in w]
    assert flagged and all(f"warning: {w}" in err for w in flagged)


def _spread(sizes, seed, coarsen_below):
    """8 clusters present in every silo; silos under ``coarsen_below`` rows report clusters 7 and 8 inside
    cluster 1, as a silo too small to resolve them does (the local partitions given to the exact summaries)."""
    w = np.tile(np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05]), (len(sizes), 1))
    data = simulate(n_per_silo=np.asarray(sizes), weights=w, n_modalities=(3,) * 12, concentration=0.3, rng=seed)
    local = [np.where((lab >= 6) & (s.codes.shape[0] < coarsen_below), 0, lab)
             for s, lab in zip(data.silos, data.labels, strict=True)]
    summaries, _, _ = appendix_a_silos([s.codes for s in data.silos], local, data.n_modalities, n_draws=200,
                                       rng=seed)
    return summaries


def test_silos_that_resolve_fewer_clusters_the_smaller_they_are_are_flagged():
    sizes = [300, 350, 400, 450, 500, 600, 1500, 2000, 2500, 3000]
    summaries = _spread(sizes, 5, coarsen_below=1000)
    matching = match(summaries, MatchingConfig())
    found = [f for f in matching_checks(summaries, matching) if f["kind"] == "resolution-grows-with-size"]
    assert len(found) == 1
    assert found[0]["spearman"] >= 0.5 and found[0]["p_value"] <= 0.05
    # the clusters the small silos cannot see are named with the size of the silos that hold them (here
    # also the pure cluster 1 of the large silos, which differs from the small silos' mixture of 1, 7, 8)
    named = found[0]["larger_silos_only"]
    assert 2 <= len(named) <= 3 and all(c["min_rows"] == 1500 and c["n_silos"] == 4 for c in named)
    line = summarise_checks(found, "calibrated")[0]
    assert "grows with silo size" in line and "pooled data would separate" in line


def test_unequal_silos_that_all_resolve_their_clusters_are_not_flagged():
    summaries = _spread([300, 350, 400, 450, 500, 600, 1500, 2000, 2500, 3000], 6, coarsen_below=0)
    matching = match(summaries, MatchingConfig())
    assert not [f for f in matching_checks(summaries, matching) if f["kind"] == "resolution-grows-with-size"]
