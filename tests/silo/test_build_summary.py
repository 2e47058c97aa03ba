"""build_summary: the object a silo sends, computed independently here from the LocalPosterior."""

import dataclasses

import numpy as np
import pytest

from vcmc.exceptions import DataError, SchemaError
from vcmc.mcmc.posterior import LocalPosterior, sent_draw_indices
from vcmc.protocol import SiloSummary
from vcmc.silo.build_summary import build_summary

N_MOD = (2, 3, 2)
N_ROWS = 37          # a row count different from every other dimension, to spot row-level fields


def _local(seed=0, k=3, t=40):
    rng = np.random.default_rng(seed)
    prof = np.concatenate([rng.dirichlet(np.ones(m), size=(t, k)) for m in N_MOD], axis=2)
    partition = rng.integers(0, k, size=N_ROWS)
    codes = np.stack([rng.integers(0, m, size=N_ROWS) for m in N_MOD], axis=1)
    codes[3, 1] = -1     # a missing value counts in no column
    membership = np.eye(k)[partition]
    local = LocalPosterior(partition=partition, membership=membership, pi_draws=rng.dirichlet(np.ones(k), t),
                           profile_draws=prof, n_occupied=rng.integers(3, 6, size=(2, t // 2)),
                           log_posterior=rng.normal(size=(2, t // 2)), n_modalities=N_MOD, n_components=6,
                           diagnostics={"rhat_log_posterior": 1.001})
    return local, codes


def test_summary_fields_match_an_independent_computation():
    local, codes = _local()
    s = build_summary(local, codes, silo="A", schema_fingerprint="abc", n_modalities=N_MOD)
    assert s.silo == "A" and s.n_rows == N_ROWS and s.schema_fingerprint == "abc"
    np.testing.assert_array_equal(s.cluster_sizes, [np.sum(local.partition == k) for k in range(3)])
    # contingency table by explicit loops
    expected = np.zeros((3, 7), dtype=int)
    offs = [0, 2, 5]
    for i in range(N_ROWS):
        for q in range(3):
            if codes[i, q] >= 0:
                expected[local.partition[i], offs[q] + codes[i, q]] += 1
    np.testing.assert_array_equal(s.counts, expected)
    np.testing.assert_allclose(s.pi_estimate, [np.median(local.pi_draws[:, k]) for k in range(3)])
    np.testing.assert_allclose(s.profile_estimate[1, 4], np.median(local.profile_draws[:, 1, 4]))
    post = np.bincount(local.n_occupied.ravel(), minlength=7) / local.n_occupied.size
    np.testing.assert_allclose(s.n_clusters_posterior, post)
    assert s.diagnostics == {"rhat_log_posterior": 1.001, "n_draws_sent": 40.0}


def test_summary_carries_no_row_level_field_and_round_trips():
    local, codes = _local()
    s = build_summary(local, codes, silo="A", schema_fingerprint="abc", n_modalities=N_MOD)
    for key, value in s.to_arrays().items():
        assert N_ROWS not in np.shape(value), key
    back = SiloSummary.from_arrays(s.to_arrays())
    for f in dataclasses.fields(SiloSummary):
        a, b = getattr(s, f.name), getattr(back, f.name)
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b


def test_counts_can_be_withheld():
    local, codes = _local()
    s = build_summary(local, codes, silo="A", schema_fingerprint="abc", n_modalities=N_MOD,
                      include_counts=False)
    assert s.counts is None
    assert "counts" not in s.to_arrays()


def test_wrong_schema_or_codes_are_refused_with_the_silo_named():
    local, codes = _local()
    with pytest.raises(SchemaError, match="silo 'A'.*n_modalities"):
        build_summary(local, codes, silo="A", schema_fingerprint="abc", n_modalities=(2, 3, 3))
    with pytest.raises(DataError, match="silo 'A'.*codes must have shape"):
        build_summary(local, codes[:-1], silo="A", schema_fingerprint="abc", n_modalities=N_MOD)


def test_summary_draws_thin_each_chain_evenly_and_keep_the_chains_apart():
    """Two chains of 20 kept draws, at most 8 sent: 4 per chain, spread over each chain's window (its first
    and last draw included), chain 1's draws after chain 0's; medians and the posterior of K still use all."""
    local, codes = _local(t=40)
    s = build_summary(local, codes, silo="A", schema_fingerprint="abc", n_modalities=N_MOD, summary_draws=8)
    idx = sent_draw_indices(2, 20, 8)
    np.testing.assert_array_equal(idx, [0, 6, 13, 19, 20, 26, 33, 39])
    np.testing.assert_array_equal(s.pi_draws, local.pi_draws[idx])
    np.testing.assert_array_equal(s.profile_draws, local.profile_draws[idx])
    np.testing.assert_allclose(s.pi_estimate, np.median(local.pi_draws, axis=0))
    assert s.n_draws == 8 and s.diagnostics["n_draws_sent"] == 8.0
    s.validate()
    # 0, or a cap at or above the kept draws, sends every draw
    for cap in (0, 40, 5000):
        np.testing.assert_array_equal(sent_draw_indices(2, 20, cap), np.arange(40))
    # never a draw twice, whatever the cap
    for cap in range(2, 45):
        idx = sent_draw_indices(3, 11, cap)
        assert len(set(idx.tolist())) == idx.size and idx.size % 3 == 0


def test_summary_draws_is_validated_in_the_config_words():
    from vcmc.config import PostprocessConfig
    from vcmc.exceptions import ConfigError

    with pytest.raises(ConfigError, match="summary_draws"):
        PostprocessConfig(summary_draws=1)
