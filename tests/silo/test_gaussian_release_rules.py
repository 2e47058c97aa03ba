"""The release rules of docs/design.md §13 (complementary withholding, scalars on a grid outside the analyst's own
session) on the Gaussian fields (docs/design.md §17.4-17.7): the latent class analysis' E-step sums, its
log-likelihood's grid, the assessment's occupancy, and the summary's thin (cluster, item) cells."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from vcmc.config import PrivacyConfig
from vcmc.data.schema import ContinuousVariable, Schema, Variable
from vcmc.protocol.lca import LcaEStepReply, LcaEStepRequest
from vcmc.silo.gate import Gate
from vcmc.silo.policy import SiloPolicy
from vcmc.silo.release import on_grid

N_MOD = (2, 3)
SCALES = (15.0, 12.0)


def _gate(min_size=10, round_to=1, suppress=0, policy=None, values=None):
    schema = Schema((Variable("a", ("0", "1")), Variable("b", ("0", "1", "2"))),
                    continuous=tuple(ContinuousVariable(f"x{i}", 50.0, s) for i, s in enumerate(SCALES)))
    silo = SimpleNamespace(name="s", privacy_in_force=PrivacyConfig(min_cluster_size=min_size, round_to=round_to,
                                                                    suppress_cells_below=suppress),
                           n_modalities=N_MOD, secure_noise=False, local=None,
                           values=np.zeros((60, 2)) if values is None else values, data=SimpleNamespace(schema=schema))
    return Gate(silo, SiloPolicy() if policy is None else policy)


def _estep(k=3, seed=0):
    rng = np.random.default_rng(seed)
    resp = rng.dirichlet(np.full(k, 0.3), size=60)
    x = np.stack([rng.integers(0, 2, 60), rng.integers(0, 3, 60)], axis=1)
    onehot = np.hstack([np.eye(2)[x[:, 0]], np.eye(3)[x[:, 1]]])
    z = rng.normal(size=(60, 2))
    z[rng.random((60, 2)) < 0.3] = np.nan
    seen = ~np.isnan(z)
    zz = np.where(seen, z, 0.0)
    gaussian = np.concatenate([resp.T @ seen, resp.T @ zz, resp.T @ (zz * zz)], axis=1)
    reply = LcaEStepReply(n_rows=60, cluster=resp.sum(axis=0), modality=resp.T @ onehot, loglik=-180.0,
                          entropy=20.0, gaussian=gaussian)
    point = np.concatenate([np.zeros((k, 2)), np.full((k, 2), 0.5)], axis=1)
    request = LcaEStepRequest(pi=np.full(k, 1 / k), profiles=np.tile([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3], (k, 1)),
                              gaussian=point)
    return request, reply


@pytest.mark.parametrize("seed", range(8))
def test_lca_gaussian_counts_give_no_withheld_part_back_and_a_withheld_count_sends_no_sums(seed):
    request, reply = _estep(seed=seed)
    out = _gate(10, 1, 8).release(request, reply)
    g = 2
    n_true, n_sent = reply.gaussian[:, :g], out.gaussian[:, :g]
    hidden = (n_sent == 0) & (n_true > 0)
    for col in range(g):             # an item's column adds up to the silo's rows observing it
        h = hidden[:, col]
        assert h.sum() != 1 or n_true[h, col].sum() < 0.5
        assert not h.any() or n_true[h, col].sum() >= 8 or not np.any(n_sent[:, col] != 0)
    assert np.all(out.gaussian[:, g:][np.tile(hidden, 2)] == 0)           # no sum of a withheld count
    assert np.all(n_sent[out.cluster == 0] == 0)                          # withheld with their class
    kept = ~np.tile(hidden, 2)
    assert np.allclose(out.gaussian[:, g:][kept], reply.gaussian[:, g:][kept])   # sums not on the scalars' grid


def test_lca_log_likelihood_grid_adds_the_gaussian_items_and_the_own_session_is_exact():
    request, reply = _estep()
    sent = _gate(10).release(request, reply)
    categorical = np.log(2) + np.log(3)
    gaussian = sum(1.42 + abs(0.5 * np.log(0.5) + np.log(s)) for s in SCALES)
    assert sent.loglik == pytest.approx(on_grid(-180.0, 10 * (categorical + gaussian)))
    assert np.array_equal(sent.gaussian, reply.gaussian)                   # no protection set: as computed
    own = _gate(10, policy=SiloPolicy.own_data()).release(request, reply)
    assert own.loglik == -180.0 and np.array_equal(own.gaussian, reply.gaussian)


def test_mixed_occupancy_counts_a_cluster_from_the_threshold():
    from vcmc.rows.mixed import occupancy

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 2, size=(40, 1))
    values = np.concatenate([rng.normal(-3, 0.1, 35), rng.normal(3, 0.1, 5)])[:, None]
    pi = np.array([[0.5, 0.5]])
    profiles = np.full((1, 2, 2), 0.5)
    gaussian = np.array([[[-3.0, 0.01], [3.0, 0.01]]])
    assert occupancy(codes, (2,), values, pi, profiles, gaussian, 1).tolist() == [[1, 1]]
    assert occupancy(codes, (2,), values, pi, profiles, gaussian, 1, at_least=10).tolist() == [[1, 0]]


def test_summary_thin_gaussian_cells_are_complemented_in_their_item_s_column():
    from vcmc.silo.gaussian import release_gaussian

    sums = np.array([[30.0, 6.0], [40.0, 25.0], [20.0, 20.0]])             # item 2: 6 rows of cluster 1
    sums = np.concatenate([sums, np.ones((3, 2)), np.full((3, 2), 2.0)], axis=1)
    gate = SimpleNamespace(min_size=10, state=SimpleNamespace(gaussian_prior=[0.01, 2.5, 0.75]))
    reply = SimpleNamespace(n_gaussian=2, gaussian_sums=sums, gaussian_draws=np.zeros((5, 3, 4)))
    request = SimpleNamespace(seed_entropy=1, spawn_key=(0,))
    out = release_gaussian(gate, request, reply, PrivacyConfig(min_cluster_size=10))
    n = out["gaussian_sums"][:, 1]
    assert n[0] == 0 and np.count_nonzero(n == 0) >= 2                   # the thin cell and a complement
    assert np.all(out["gaussian_sums"][:, [0, 2, 4]] == sums[:, [0, 2, 4]])   # item 1 untouched


def test_observed_information_gives_a_one_class_mean_its_standard_error():
    from vcmc.lca.analysis import analyse
    from vcmc.research.simulate_mixed import simulate_mixed
    from vcmc.silo.local import LocalSilo

    silos, _ = simulate_mixed([150, 200], [0.6, 0.4], np.array([[40.0, 50.0], [60.0, 55.0]]),
                              np.array([[5.0, 6.0], [5.0, 6.0]]), missing=0.05, rng=1)
    schema = Schema(silos[0].schema.variables, continuous=(ContinuousVariable("X1", 50.0, 10.0),
                                                          ContinuousVariable("X2", 50.0, 6.0)))
    silos = [dataclasses.replace(s, schema=schema) for s in silos]
    analysis = analyse([LocalSilo(s) for s in silos], 1, rng=0)
    table = analysis.continuous_table()
    x = np.vstack([s.values for s in silos])
    for g in range(2):
        v = x[~np.isnan(x[:, g]), g]
        assert table["se"].iloc[g] == pytest.approx(v.std() / np.sqrt(v.size), rel=1e-3)
    assert analysis.items.mean_se.shape == (1, 2)
