"""LocalSilo: the silo side of the boundary (reproducible from the request's seed, state kept locally)."""

import dataclasses

import numpy as np
import pytest

from vcmc.config import AggregationConfig, FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.exceptions import ConfigError, NotFittedError
from vcmc.model import one_hot_counts
from vcmc.protocol import (
    AssignRequest,
    CountsRequest,
    DivergenceRequest,
    HelloReply,
    HelloRequest,
    SiloConfig,
    SummarizeRequest,
)
from vcmc.silo.local import LocalSilo


@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=150).silos[0]


CFG = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200, thin=5),
                postprocess=PostprocessConfig(min_cluster_fraction=0.05),
                privacy=PrivacyConfig(min_cluster_size=5))


def _req(cfg=CFG, entropy=99, key=(0, 1)):
    return SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=4, seed_entropy=entropy,
                            spawn_key=key)


@pytest.fixture(scope="module")
def fitted(silo_data):
    silo = LocalSilo(silo_data)
    return silo, silo.handle(_req())


def test_same_request_same_summary_other_seed_other_draws(silo_data, fitted):
    _, first = fitted
    again = LocalSilo(silo_data).handle(_req())
    np.testing.assert_array_equal(first.pi_draws, again.pi_draws)
    np.testing.assert_array_equal(first.counts, again.counts)
    other = LocalSilo(silo_data).handle(_req(key=(0, 2)))
    assert first.pi_draws.shape[0] == other.pi_draws.shape[0] == CFG.sampler.n_kept
    assert not np.array_equal(first.pi_draws[:, 0], other.pi_draws[:, 0])


def test_summary_counts_are_the_local_contingency_table(silo_data, fitted):
    silo, summary = fitted
    assert summary.silo == silo_data.name and summary.n_rows == silo_data.n_rows
    assert summary.schema_fingerprint == silo_data.schema.fingerprint()
    np.testing.assert_array_equal(summary.cluster_sizes, np.bincount(silo.local.partition))
    np.testing.assert_array_equal(summary.counts, one_hot_counts(silo_data.codes, silo.local.partition,
                                                                 summary.n_clusters, silo_data.n_modalities))


def test_assign_keeps_labels_in_the_silo_and_returns_counts(fitted):
    silo, summary = fitted
    k = summary.n_clusters
    assignment = np.arange(k) % 2            # merge local clusters into two global ones
    reply = silo.handle(AssignRequest(assignment=assignment, n_global=2))
    np.testing.assert_array_equal(silo.assignments, assignment[silo.local.partition])
    np.testing.assert_array_equal(reply.counts, np.bincount(silo.assignments, minlength=2))
    # with parameters: every row goes to its most probable global cluster
    reply2 = silo.handle(AssignRequest(assignment=np.zeros(k, int), n_global=k,
                                       pi=summary.pi_draws[0], profiles=summary.profile_draws[0]))
    assert reply2.counts.sum() == summary.n_rows


def test_hard_counts_equal_the_contingency_table_under_identity(fitted):
    silo, summary = fitted
    k = summary.n_clusters
    reply = silo.handle(CountsRequest(mode="hard", assignment=np.arange(k), n_global=k))
    np.testing.assert_array_equal(reply.cluster, summary.cluster_sizes)
    np.testing.assert_array_equal(reply.modality, summary.counts)


def test_state_survives_export_and_restore(silo_data, fitted):
    """Flower starts a fresh process per message: the state is restored from arrays in between."""
    silo, summary = fitted
    k = summary.n_clusters
    fresh = LocalSilo(silo_data)
    fresh.restore_state(silo.export_state())
    req = DivergenceRequest(reference_pi=summary.pi_estimate / summary.pi_estimate.sum(),
                            reference_profiles=summary.profile_estimate, rule="penalised")
    np.testing.assert_array_equal(fresh.handle(req).cost, silo.handle(req).cost)
    a = AssignRequest(assignment=np.arange(k), n_global=k)
    np.testing.assert_array_equal(fresh.handle(a).counts, silo.handle(a).counts)
    again = LocalSilo(silo_data)
    again.restore_state(fresh.export_state())
    np.testing.assert_array_equal(again.assignments, silo.assignments)


def test_requests_before_summarize_fail_clearly(silo_data):
    from vcmc.protocol import Silo

    silo = LocalSilo(silo_data)
    assert isinstance(silo, Silo)
    with pytest.raises(NotFittedError, match="before a summarize request"):
        silo.handle(AssignRequest(assignment=np.zeros(2, int), n_global=1))
    assert isinstance(silo.handle(HelloRequest()), HelloReply)


def test_counts_withheld_when_either_side_forbids_them(silo_data):
    fg = dataclasses.replace(CFG, aggregation=AggregationConfig(strategy="federated-gradient"))
    assert LocalSilo(silo_data).handle(_req(fg)).counts is None
    assert LocalSilo(silo_data, privacy=PrivacyConfig(share_counts=False, min_cluster_size=5)).handle(
        _req()).counts is None


def test_operator_limits_apply_even_if_the_server_asks_for_less(silo_data):
    silo = LocalSilo(silo_data, privacy=PrivacyConfig(min_cluster_size=5, round_to=5))
    summary = silo.handle(_req())   # server config asks round_to=1
    assert np.all(summary.counts % 5 == 0)


def test_wrong_assignment_is_a_config_error(fitted):
    silo, summary = fitted
    with pytest.raises(ConfigError, match="must map the silo's"):
        silo.handle(AssignRequest(assignment=np.zeros(summary.n_clusters + 1, int), n_global=1))


def _assess_request(summary, r=6):
    from vcmc.protocol import AssessRequest

    return AssessRequest(pi=summary.pi_draws[:r], profiles=summary.profile_draws[:r],
                         pairs=np.array([[1, 2], [0, 5]]), seed_entropy=7, spawn_key=(2, 1))


def test_assess_answers_with_whole_silo_sums_and_is_reproducible(silo_data, fitted):
    silo, summary = fitted
    reply = silo.handle(_assess_request(summary))
    assert reply.n_rows == silo_data.n_rows
    assert reply.replicated.shape == (6, summary.profile_draws.shape[2]) and reply.pair_replicated.shape == (6, 2)
    again = LocalSilo(silo_data)
    again.restore_state(silo.export_state())          # Flower: a fresh process per message
    np.testing.assert_array_equal(again.handle(_assess_request(summary)).replicated, reply.replicated)


def test_assess_refused_when_the_operator_says_so_even_after_a_restart(silo_data, fitted):
    from vcmc.exceptions import DisclosureError

    _, summary = fitted
    shy = LocalSilo(silo_data, privacy=PrivacyConfig(min_cluster_size=5, share_assessment=False))
    shy.handle(_req())
    with pytest.raises(DisclosureError, match="share-assessment = false"):
        shy.handle(_assess_request(summary))
    # the server's privacy section can only tighten: a silo whose server asked for no assessment refuses,
    # and the refusal survives export/restore
    strict = dataclasses.replace(CFG, privacy=PrivacyConfig(min_cluster_size=5, share_assessment=False))
    silo = LocalSilo(silo_data)
    silo.handle(_req(strict))
    fresh = LocalSilo(silo_data)
    fresh.restore_state(silo.export_state())
    with pytest.raises(DisclosureError):
        fresh.handle(_assess_request(summary))


def test_assess_checks_its_request(fitted):
    from vcmc.protocol import AssessRequest

    silo, summary = fitted
    with pytest.raises(ConfigError, match="two different variables"):
        silo.handle(AssessRequest(pi=summary.pi_draws[:3], profiles=summary.profile_draws[:3],
                                  pairs=np.array([[0, 1]]), seed_entropy=1, spawn_key=(2, 0)))
    with pytest.raises(ConfigError, match="profiles"):
        silo.handle(AssessRequest(pi=summary.pi_draws[:3], profiles=summary.profile_draws[:2],
                                  pairs=np.zeros((0, 2), int), seed_entropy=1, spawn_key=(2, 0)))


def test_silo_keeps_only_the_draws_it_sent(silo_data):
    """With more kept draws than ``summary_draws`` the summary carries the evenly thinned draws of each chain,
    and the silo keeps exactly those (its process memory then holds 10 draws here, not 80), while the
    medians sent are those of every kept draw."""
    cfg = dataclasses.replace(CFG, sampler=SamplerConfig(n_iter=600, burn_in=200, thin=5, n_chains=2),
                              postprocess=dataclasses.replace(CFG.postprocess, summary_draws=10))
    full_cfg = dataclasses.replace(cfg, postprocess=dataclasses.replace(cfg.postprocess, summary_draws=0))
    thin, full = LocalSilo(silo_data), LocalSilo(silo_data)
    sent, every = thin.handle(_req(cfg)), full.handle(_req(full_cfg))
    assert every.n_draws == 160 and sent.n_draws == 10 and sent.diagnostics["n_draws_sent"] == 10
    np.testing.assert_array_equal(thin.local.pi_draws, sent.pi_draws)
    assert thin.local.n_occupied.shape == (2, 5)
    idx = np.r_[np.round(np.linspace(0, 79, 5)), 80 + np.round(np.linspace(0, 79, 5))].astype(int)
    np.testing.assert_array_equal(sent.profile_draws, every.profile_draws[idx])
    np.testing.assert_array_equal(sent.profile_estimate, every.profile_estimate)
