"""Tests of vcmc.research.simulate: Table 1 designs, determinism, stream independence, the written files."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vcmc.exceptions import ConfigError
from vcmc.model import MISSING, profile_offsets
from vcmc.research.simulate import (
    DESIGNS,
    PAPER_N_MODALITIES,
    design_weights,
    simulate,
    simulate_design,
)

TABLES = Path("/work/shared/reference/paper_tables.json")


def _paper_table1():
    if not TABLES.exists():
        pytest.skip("paper tables not available")
    return json.loads(TABLES.read_text())["table1_cluster_proportions"]


@pytest.mark.parametrize("design", DESIGNS)
def test_design_weights_are_table1(design):
    t1 = _paper_table1()[design.replace("-", "_")]
    w = design_weights(design)
    shards = np.array(t1["shards"], dtype=float)
    c = 5 if design == "homogeneous" else 6
    assert w.shape == (4, c)
    np.testing.assert_allclose(w, shards[:, :c], atol=1e-12)
    # The paper's pooled row, printed with 4 decimals, is the equal-size mean of the silo rows.
    np.testing.assert_allclose(w.mean(axis=0), np.array(t1["global"])[:c], atol=1e-4)


def test_nested_silo4_only_clusters_1_and_2_and_nonnested_silo2_lacks_cluster_1():
    for seed in range(5):
        d = simulate_design("nested", "easy", rng=seed)
        assert set(np.unique(d.labels[3])) == {0, 1}
        assert set(np.unique(d.labels[2])) == {0, 1, 2}
        assert set(np.unique(d.labels[0])) == set(range(6))
        e = simulate_design("non-nested", "poor", rng=seed)
        assert 0 not in set(np.unique(e.labels[1]))
        assert set(np.unique(e.labels[1])) == {1, 2, 3, 4, 5}


@pytest.mark.parametrize("design", DESIGNS)
def test_pooled_shares_match_paper_global_row_over_many_seeds(design):
    t1 = _paper_table1()[design.replace("-", "_")]
    n_seeds, n_s = 200, 100
    w = design_weights(design)
    counts = np.zeros(w.shape[1])
    for seed in range(n_seeds):
        d = simulate_design(design, "poor", rng=seed, n_per_silo=n_s)
        counts += np.bincount(d.pooled_labels, minlength=w.shape[1])
    total = n_seeds * 4 * n_s
    share = counts / total
    # Pooled count of cluster c is a sum of independent binomials Bin(R n_s, w_sc) over silos:
    # variance sum_s R n_s w_sc (1 - w_sc). Allow 4 standard deviations (plus the table's 4-decimal rounding).
    sd = np.sqrt((n_seeds * n_s * w * (1 - w)).sum(axis=0)) / total
    glob = np.array(t1["global"])[: w.shape[1]]
    assert np.all(np.abs(share - glob) <= 4 * sd + 1e-4), (share, glob)


def test_exact_proportions():
    d = simulate_design("nested", "easy", rng=0, exact=True)
    np.testing.assert_array_equal(np.bincount(d.labels[3], minlength=6), [500, 500, 0, 0, 0, 0])
    np.testing.assert_array_equal(np.bincount(d.labels[1], minlength=6), [200] * 5 + [0])
    c1 = np.bincount(d.labels[0], minlength=6)
    assert c1.sum() == 1000 and set(c1.tolist()) == {166, 167}
    c3 = np.bincount(d.labels[2], minlength=6)
    assert c3.sum() == 1000 and set(c3[:3].tolist()) == {333, 334}
    # rows are shuffled, not sorted by cluster
    assert np.any(np.diff(d.labels[1]) < 0)


def test_shapes_schema_and_layout():
    d = simulate_design("homogeneous", "easy", rng=3, n_per_silo=50)
    assert d.n_modalities == PAPER_N_MODALITIES
    assert d.schema.names == tuple(f"V{q}" for q in range(1, 11))
    assert d.schema.variables[0].modalities == ("1", "2")
    assert d.schema.variables[9].modalities == ("1", "2", "3")
    assert [s.name for s in d.silos] == ["silo_1", "silo_2", "silo_3", "silo_4"]
    assert d.profiles.shape == (5, 26)
    off = profile_offsets(d.n_modalities)
    np.testing.assert_allclose(np.add.reduceat(d.profiles, off[:-1], axis=1), 1.0)
    for s in d.silos:
        assert s.codes.dtype == np.int16 and s.codes.flags.c_contiguous and s.codes.shape == (50, 10)
        assert s.codes.min() >= 0
        assert np.all(s.codes.max(axis=0) < np.array(PAPER_N_MODALITIES))
    assert d.pooled_codes.shape == (200, 10) and d.pooled_labels.shape == (200,)
    np.testing.assert_allclose(d.global_weights, [0.2] * 5)
    assert d.design == "homogeneous" and d.separability == "easy" and d.seed == 3


def test_deterministic_for_a_seed_and_varies_with_seed():
    a = simulate_design("non-nested", "easy", rng=11, n_per_silo=200, missing_rate=0.05)
    b = simulate_design("non-nested", "easy", rng=11, n_per_silo=200, missing_rate=0.05)
    c = simulate_design("non-nested", "easy", rng=12, n_per_silo=200, missing_rate=0.05)
    np.testing.assert_array_equal(a.profiles, b.profiles)
    for sa, sb in zip(a.silos, b.silos, strict=True):
        np.testing.assert_array_equal(sa.codes, sb.codes)
    for la, lb in zip(a.labels, b.labels, strict=True):
        np.testing.assert_array_equal(la, lb)
    assert not np.array_equal(a.profiles, c.profiles)
    assert not np.array_equal(a.silos[0].codes, c.silos[0].codes)
    # A Generator works too and is deterministic given its seed.
    g1 = simulate_design("nested", "poor", rng=np.random.default_rng(5), n_per_silo=20)
    g2 = simulate_design("nested", "poor", rng=np.random.default_rng(5), n_per_silo=20)
    np.testing.assert_array_equal(g1.pooled_codes, g2.pooled_codes)


def test_streams_independent_of_other_silos():
    base = simulate_design("nested", "easy", rng=7, n_per_silo=300)
    other = simulate_design("nested", "easy", rng=7, n_per_silo=[300, 300, 300, 40])
    np.testing.assert_array_equal(base.profiles, other.profiles)
    for s in range(3):
        np.testing.assert_array_equal(base.silos[s].codes, other.silos[s].codes)
    assert other.silos[3].n_rows == 40
    # Adding a silo changes neither the profiles nor the existing silos.
    w3 = design_weights("nested")[:3]
    w4 = design_weights("nested")
    s3 = simulate(n_per_silo=100, weights=w3, n_modalities=PAPER_N_MODALITIES, rng=9)
    s4 = simulate(n_per_silo=100, weights=w4, n_modalities=PAPER_N_MODALITIES, rng=9)
    np.testing.assert_array_equal(s3.profiles, s4.profiles)
    for s in range(3):
        np.testing.assert_array_equal(s3.silos[s].codes, s4.silos[s].codes)
        np.testing.assert_array_equal(s3.labels[s], s4.labels[s])


@pytest.mark.parametrize(("separability", "alpha"), [("easy", 0.3), ("poor", 1.0)])
def test_profile_distribution_is_symmetric_dirichlet(separability, alpha):
    # Binary blocks are Beta(alpha, alpha): mean 1/2, variance 1 / (4 (2 alpha + 1)).
    # Ternary blocks: marginal Beta(alpha, 2 alpha): mean 1/3, variance 2 / (9 (3 alpha + 1)).
    binary, ternary = [], []
    for seed in range(300):
        d = simulate_design("nested", separability, rng=seed, n_per_silo=2)
        binary.append(d.profiles[:, [0, 2, 4, 6]].ravel())
        ternary.append(d.profiles[:, 8::3].ravel())
    binary, ternary = np.concatenate(binary), np.concatenate(ternary)
    vb, vt = 1 / (4 * (2 * alpha + 1)), 2 / (9 * (3 * alpha + 1))
    # 7200 and 10800 draws: standard error of the mean sqrt(v / m) < 0.005; of the variance below 4%.
    assert abs(binary.mean() - 0.5) < 4 * np.sqrt(vb / binary.size)
    assert abs(ternary.mean() - 1 / 3) < 4 * np.sqrt(vt / ternary.size)
    assert abs(binary.var() / vb - 1) < 0.1
    assert abs(ternary.var() / vt - 1) < 0.1


def test_values_follow_the_given_profiles():
    k = (2, 3)
    prof = np.array([[0.9, 0.1, 0.2, 0.3, 0.5],
                     [0.05, 0.95, 0.0, 0.0, 1.0]])
    n = 40000
    d = simulate(n_per_silo=n, weights=[[0.5, 0.5]], n_modalities=k, profiles=prof, rng=2)
    codes, z = d.silos[0].codes, d.labels[0]
    off = profile_offsets(k)
    for c in range(2):
        members = codes[z == c]
        for q in range(2):
            freq = np.bincount(members[:, q], minlength=k[q]) / len(members)
            p = prof[c, off[q]:off[q + 1]]
            sd = np.sqrt(p * (1 - p) / len(members))
            assert np.all(np.abs(freq - p) <= 4 * sd + 1e-12)
    # a zero-probability modality never occurs
    assert not np.any(codes[z == 1][:, 1] < 2)


def test_missing_rate_keeps_rows():
    d = simulate_design("homogeneous", "easy", rng=4, n_per_silo=2000, missing_rate=0.2)
    for s in d.silos:
        assert s.n_rows == 2000
        rate = np.mean(s.codes == MISSING)
        assert abs(rate - 0.2) < 4 * np.sqrt(0.2 * 0.8 / s.codes.size)
    # missingness does not change the labels (drawn before) of the complete-data simulation
    full = simulate_design("homogeneous", "easy", rng=4, n_per_silo=2000)
    for a, b in zip(d.labels, full.labels, strict=True):
        np.testing.assert_array_equal(a, b)
    observed = d.silos[0].codes != MISSING
    np.testing.assert_array_equal(d.silos[0].codes[observed], full.silos[0].codes[observed])


def test_general_generator_unequal_silos_and_global_weights():
    w = [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]
    d = simulate(n_per_silo=[30, 90], weights=w, n_modalities=[2, 4, 5], concentration=0.5, rng=1)
    assert d.n_per_silo == (30, 90)
    np.testing.assert_allclose(d.global_weights, [30 / 120, 45 / 120, 45 / 120])
    assert set(np.unique(d.labels[0])) == {0}
    assert d.schema.n_modalities == (2, 4, 5)
    assert d.design is None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"design": "weird", "separability": "easy"}, r"'design' parameter of simulate_design must be one of"),
    ({"design": "nested", "separability": "hard"}, r"'separability' .* Got 'hard'"),
    ({"design": "nested", "separability": "easy", "n_per_silo": 1}, r"'n_per_silo' .* >= 2"),
    ({"design": "nested", "separability": "easy", "missing_rate": 1.0}, r"'missing_rate' .* \[0, 1\)"),
])
def test_simulate_design_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        simulate_design(**kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"weights": [[0.5, 0.6]]}, r"must sum to 1"),
    ({"weights": [[1.5, -0.5]]}, r"non-negative"),
    ({"n_modalities": [2, 1]}, r"'n_modalities' .* >= 2 modalities"),
    ({"concentration": 0.0}, r"'concentration' .* > 0"),
    ({"profiles": np.ones((2, 3))}, r"'profiles' .* shape \(2, 4\)"),
    ({"profiles": np.full((2, 4), 0.4)}, r"block summing to 1"),
    ({"n_per_silo": [10, 10]}, r"'n_per_silo'"),
])
def test_simulate_errors(kwargs, match):
    args = {"n_per_silo": 10, "weights": [[0.5, 0.5]], "n_modalities": [2, 2], "rng": 0} | kwargs
    with pytest.raises(ConfigError, match=match):
        simulate(**args)


def test_write_files(tmp_path):
    d = simulate_design("nested", "poor", rng=21, n_per_silo=60, missing_rate=0.1)
    d.write(tmp_path / "out")
    out = tmp_path / "out"
    truth = pd.read_csv(out / "truth.csv")
    assert list(truth.columns) == ["silo", "row", "cluster"]
    assert len(truth) == 240
    for s, silo in enumerate(d.silos):
        frame = pd.read_csv(out / f"silo_{s + 1}.csv", dtype=str, keep_default_na=False)
        assert list(frame.columns) == list(d.schema.names) and len(frame) == 60
        codes = silo.codes
        # labels are "1".."K" for codes 0..K-1; missing written as an empty field
        expected = np.where(codes == MISSING, "", (codes.astype(int) + 1).astype(str))
        np.testing.assert_array_equal(frame.to_numpy(), expected)
        t = truth[truth["silo"] == silo.name]
        np.testing.assert_array_equal(t["row"].to_numpy(), np.arange(60))
        np.testing.assert_array_equal(t["cluster"].to_numpy(), d.labels[s] + 1)
    assert set(truth.loc[truth["silo"] == "silo_4", "cluster"]) <= {1, 2}
    info = json.loads((out / "truth.json").read_text())
    assert info["design"] == "nested" and info["separability"] == "poor" and info["seed"] == 21
    np.testing.assert_allclose(info["weights"]["silo_3"], [1 / 3] * 3 + [0] * 3)
    np.testing.assert_allclose(info["global_weights"], d.global_weights)
    assert info["profiles"]["cluster_2"]["V5"]["3"] == pytest.approx(d.profiles[1, 8 + 2])
    np.testing.assert_allclose(info["profiles_flat"], d.profiles)


def test_sparse_binary_profiles_are_rare_except_where_characteristic():
    from vcmc.research.simulate import sparse_binary_profiles

    prof = sparse_binary_profiles(6, 40, rng=3, prevalence=(0.01, 0.3), n_high=(2, 5), high=(0.35, 0.7))
    assert prof.shape == (6, 80)
    np.testing.assert_allclose(prof[:, 0::2] + prof[:, 1::2], 1.0)
    present = prof[:, 1::2]
    base = present[0]
    assert base.min() >= 0.01 and base.max() <= 0.3
    for c in range(1, 6):
        raised = np.flatnonzero(present[c] > base + 1e-12)
        assert 2 <= raised.size <= 5 and np.all((present[c, raised] >= 0.35) & (present[c, raised] <= 0.7))
    np.testing.assert_array_equal(prof, sparse_binary_profiles(6, 40, rng=3))
    with pytest.raises(ConfigError, match="do not fit"):
        sparse_binary_profiles(3, 4, n_high=(2, 5))
