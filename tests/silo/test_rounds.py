"""The silo's half of the global-informed rounds: exact allocation probabilities, and the gate's rules."""

import numpy as np
import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.exceptions import DisclosureError, NotFittedError
from vcmc.model import profile_offsets
from vcmc.protocol import AssignRequest, SiloConfig, SummarizeRequest
from vcmc.protocol.rounds import RoundFinishRequest, RoundStartRequest, RoundSweepRequest
from vcmc.silo.gate import SiloPolicy
from vcmc.silo.local import LocalSilo

CFG = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200, thin=5),
                postprocess=PostprocessConfig(min_cluster_fraction=0.05), privacy=PrivacyConfig(min_cluster_size=10))


@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=200).silos[0]


def _ready(silo_data, policy=None):
    silo = LocalSilo(silo_data, policy=policy, run_key="run-1")
    summary = silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(CFG), n_silos=4, seed_entropy=9,
                                           spawn_key=(0, 1)))
    k = summary.n_clusters
    silo.handle(AssignRequest(assignment=np.arange(k), n_global=k))
    return silo, k


def _draw(silo, c, seed=0):
    rng = np.random.default_rng(seed)
    prof = np.hstack([rng.dirichlet(np.ones(m), size=c) for m in silo.n_modalities])
    return np.log(rng.dirichlet(np.ones(c))), np.log(prof)


def _sweep(silo, log_pi, log_prof, r=2, keep=True):
    return silo.handle(RoundSweepRequest(round=r, log_pi=log_pi, log_profiles=log_prof, keep=keep, seed_entropy=3,
                                         spawn_key=(3, r, 0)))


def test_memberships_are_the_exact_allocation_probabilities(silo_data):
    silo, k = _ready(silo_data)
    c = k + 2
    start = silo.handle(RoundStartRequest(start=np.arange(k) + 1, n_components=c))
    assert start.cluster.sum() == silo_data.n_rows and start.cluster[0] == 0          # offset 1: component 0 empty
    log_pi, log_prof = _draw(silo, c)
    reply = _sweep(silo, log_pi, log_prof)
    assert reply.cluster.sum() == silo_data.n_rows        # the analyst's own session: the counts whole
    done = silo.handle(RoundFinishRequest(keep=np.arange(c)))
    off = profile_offsets(silo.n_modalities)
    lp = np.tile(log_pi, (silo_data.n_rows, 1))
    for q in range(len(silo.n_modalities)):
        x = silo.codes[:, q]
        ok = x >= 0
        lp[ok] += log_prof[:, off[q] + x[ok]].T
    exact = np.exp(lp - lp.max(axis=1, keepdims=True))
    exact /= exact.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(silo.memberships, exact, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(silo.assignments, np.argmax(exact, axis=1))
    full = np.bincount(np.argmax(exact, axis=1), minlength=c)
    # the reply is an assign reply: its counts under the minimum cluster size are withheld like every assign's
    np.testing.assert_array_equal(done.counts, np.where(full >= 10, full, 0))


def test_a_deployment_refuses_rounds_unless_its_operator_allows_them(silo_data):
    silo, k = _ready(silo_data, SiloPolicy(allowed_strategies=("contingency",), require_announcement=False))
    with pytest.raises(DisclosureError, match="rounds"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=k))


def test_a_deployment_withholds_components_under_the_minimum_size(silo_data):
    silo, k = _ready(silo_data, SiloPolicy(allowed_strategies=("contingency", "rounds"), require_announcement=False))
    c = k + 3
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=c))
    log_pi, log_prof = _draw(silo, c, seed=4)
    sizes = []
    for r in range(2, 8):
        reply = _sweep(silo, log_pi, log_prof, r=r)
        cluster = np.asarray(reply.cluster)
        assert not np.any((cluster > 0) & (cluster < 10))
        assert not np.any(np.asarray(reply.modality)[cluster == 0])
        sizes.append(silo.rounds.z)
    assert any(np.any((np.bincount(z, minlength=c) > 0) & (np.bincount(z, minlength=c) < 10)) for z in sizes), \
        "the test needs a round with a component under the minimum"


def test_rounds_need_the_one_shot_labels_and_a_start(silo_data):
    silo = LocalSilo(silo_data, run_key="run-1")
    silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(CFG), n_silos=4, seed_entropy=9, spawn_key=(0, 1)))
    with pytest.raises(NotFittedError, match="assign"):
        silo.handle(RoundStartRequest(start=np.arange(3), n_components=3))
    with pytest.raises(NotFittedError, match="no rounds"):
        silo.handle(RoundFinishRequest(keep=np.arange(2)))


def test_round_state_survives_export_and_restore(silo_data):
    silo, k = _ready(silo_data)
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=k + 1))
    log_pi, log_prof = _draw(silo, k + 1)
    _sweep(silo, log_pi, log_prof)
    state = silo.export_state()
    fresh = LocalSilo(silo_data, run_key="run-1")
    fresh.restore_state(state)
    a = _sweep(silo, log_pi, log_prof, r=3)
    b = _sweep(fresh, log_pi, log_prof, r=3)
    np.testing.assert_array_equal(a.cluster, b.cluster)
    np.testing.assert_array_equal(silo.rounds.summed, fresh.rounds.summed)
