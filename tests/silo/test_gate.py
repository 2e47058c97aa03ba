"""The gate at the silo boundary (vcmc.silo.gate): every request admitted, every reply released, each rule.

The deployed silo here is set as the security review set it: min-cluster-size 10, suppress-cells-below 8,
round-to 5, the default ``SiloPolicy()`` of a SuperNode.
"""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.model import one_hot_counts, profile_offsets
from vcmc.protocol import (
    AnnounceReply,
    AnnounceRequest,
    AssessReply,
    AssessRequest,
    AssignReply,
    AssignRequest,
    CountsReply,
    CountsRequest,
    DivergenceRequest,
    HelloRequest,
    SiloConfig,
    SiloSummary,
    SummarizeRequest,
    registry,
)
from vcmc.silo.checks import estimate_from_table
from vcmc.silo.endpoints import ENDPOINTS
from vcmc.silo.gate import Gate
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy

LIMITS = PrivacyConfig(min_cluster_size=10, suppress_cells_below=8, round_to=5)
CFG = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200, thin=5),
                postprocess=PostprocessConfig(min_cluster_fraction=0.05),
                privacy=PrivacyConfig(min_cluster_size=5))


def _req(cfg=CFG, entropy=99):
    return SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=4, seed_entropy=entropy, spawn_key=(0, 1))


def _with(section: str, **changes) -> FitConfig:
    return dataclasses.replace(CFG, **{section: dataclasses.replace(getattr(CFG, section), **changes)})


@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=200).silos[0]


def _deployed(silo_data, **policy):
    silo = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy(**policy), run_key="run-1")
    summary = silo.handle(_req())
    return silo, summary


@pytest.fixture
def deployed(silo_data):
    return _deployed(silo_data)


def _honest_announcement(summary):
    """What an honest server announces to a silo alone: the draws it was sent (the gate checks them against
    what it sent, which under suppression and rounding are draws of the protected table)."""
    k = summary.n_clusters
    return AnnounceRequest(assignment=np.arange(k), n_global=k, pi=np.asarray(summary.pi_draws, dtype=np.float64),
                           profiles=np.asarray(summary.profile_draws, dtype=np.float64))


def _one_person_profile(silo, row: int):
    """The attack's profile: probability 1 on one person's value of every variable, uniform elsewhere (floored)."""
    n_mod = silo.n_modalities
    offsets = profile_offsets(n_mod)
    prof = np.zeros(offsets[-1])
    for q in range(len(n_mod)):
        prof[offsets[q] + silo.codes[row, q]] = 1.0
    return prof


# -- coverage: every message type has its rule, and handle cannot bypass the gate --------------------------

def test_every_request_type_has_an_endpoint_and_every_reply_a_request():
    requests = set(registry.request_types())
    assert set(ENDPOINTS) == requests, "a request type without an endpoint (admit, answer, release)"
    answered = {t for r in requests for t in r.REPLY}
    from vcmc.protocol import ErrorReply

    assert answered | {ErrorReply} == set(registry.reply_types()), "a reply no request expects"


def test_handle_releases_every_reply_through_the_gate(silo_data, monkeypatch):
    released, admitted = [], []
    real_release, real_admit = Gate.release, Gate.admit

    def spy_release(self, request, reply):
        released.append(type(reply))
        return real_release(self, request, reply)

    def spy_admit(self, request):
        admitted.append(type(request))
        return real_admit(self, request)

    monkeypatch.setattr(Gate, "release", spy_release)
    monkeypatch.setattr(Gate, "admit", spy_admit)
    silo = LocalSilo(silo_data, privacy=LIMITS)           # the analyst's own session: every strategy allowed
    silo.hello()
    summary = silo.summarize(_req())
    k = summary.n_clusters
    # the draws the silo sent, which the honest announcement below carries
    pi = np.asarray(summary.pi_draws[:3], dtype=np.float64)
    prof = np.asarray(summary.profile_draws[:3], dtype=np.float64)
    silo.membership_divergence(DivergenceRequest(reference_pi=pi[0], reference_profiles=prof[0], rule="penalised"))
    silo.counts(CountsRequest(mode="soft", pi=pi, profiles=prof, n_global=k))
    silo.counts(CountsRequest(mode="hard", assignment=np.arange(k), n_global=k))
    silo.announce(_honest_announcement(summary))
    silo.assign(AssignRequest(assignment=np.arange(k), n_global=k, pi=pi, profiles=prof))
    silo.assess(AssessRequest(pi=pi, profiles=prof, pairs=np.zeros((0, 2), int), seed_entropy=1, spawn_key=(2, 0)))
    from vcmc.protocol.lca import LcaClassifyRequest, LcaEStepRequest, LcaStructuralReply, LcaStructuralRequest

    silo.handle(LcaEStepRequest(pi=pi[0], profiles=prof[0]))
    silo.handle(LcaClassifyRequest(pi=pi[0], profiles=prof[0]))
    # admitted; this silo has no auxiliary columns, so the handler refuses (tests/protocol/test_requests.py
    # sends it to silos that have them, through the same ``handle``)
    with pytest.raises(Exception):  # noqa: B017
        silo.handle(LcaStructuralRequest(model="covariate", spec_json="{}", pi=pi[0], profiles=prof[0],
                                         log_error=np.zeros((k, k)), params=np.zeros(1)))
    from vcmc.protocol.rounds import (
        RoundAssessRequest,
        RoundFinishRequest,
        RoundResultRequest,
        RoundStartRequest,
        RoundSweepRequest,
    )

    c = 2 * k
    start = RoundStartRequest(names=(silo.name,), start=np.arange(k)[None] + k, n_components=c, alpha=0.01,
                              beta=np.full(prof.shape[-1], 0.5), checkpoints=np.asarray([30]), stop=False, n_chains=1,
                              anneal=1.0, anneal_until=1, max_stored=50, min_size=1, birth_share=0.01,
                              birth_budget=2, silo_weight_prior=0.0, secure=False, seed_entropy=1, spawn_key=(3,))
    reply, r = silo.handle(start), -1
    while not reply.stop:        # the silo is every participant: its own vector is the pooled sum
        reply = silo.handle(RoundSweepRequest(round=r, vectors=reply.vector[None], tags=np.zeros(0, np.uint8)))
        r += 1
    silo.handle(RoundFinishRequest())
    silo.handle(RoundResultRequest())
    silo.handle(RoundAssessRequest(n_replicates=5, max_pairs=10))
    assert set(admitted) == set(registry.request_types())
    expected = {t for r in registry.request_types() for t in r.REPLY}
    assert set(released) == expected - {LcaStructuralReply}
    assert len(released) == len(admitted) - 1


# -- request validation -------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda k: AssignRequest(assignment=np.zeros(k, int), n_global=1),
    lambda k: CountsRequest(mode="hard", assignment=np.zeros(k, int), n_global=1),
    lambda k: DivergenceRequest(reference_pi=np.ones(2) / 2, reference_profiles=np.full((2, 3), 1 / 3),
                                rule="penalised"),
])
def test_nothing_but_hello_and_summarize_before_the_summary(silo_data, make):
    silo = LocalSilo(silo_data, privacy=LIMITS,
                     policy=SiloPolicy(allowed_strategies=("contingency", "design", "min-divergence")))
    silo.handle(HelloRequest())
    with pytest.raises(NotFittedError, match="before a summarize request"):
        silo.handle(make(3))


def test_unsafe_strategies_are_refused_unless_the_operator_allows_them(silo_data):
    fg = _with("aggregation", strategy="federated-gradient")
    silo = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy())
    with pytest.raises(DisclosureError, match="does not allow the 'federated-gradient' strategy"):
        silo.handle(_req(fg))
    allowed = LocalSilo(silo_data, privacy=LIMITS,
                        policy=SiloPolicy(allowed_strategies=("contingency", "federated-gradient")))
    assert allowed.handle(_req(fg)).counts is None


def test_soft_counts_at_server_parameters_are_refused_in_a_contingency_run(deployed):
    silo, summary = deployed
    k = summary.n_clusters
    prof = np.tile(_one_person_profile(silo, 0), (1, k, 1))
    with pytest.raises(DisclosureError, match="counts requests belong"):
        silo.handle(CountsRequest(mode="soft", pi=np.full((1, k), 1 / k), profiles=prof, n_global=k))


def test_operator_caps_iterations_and_cpu_time(silo_data):
    silo = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy(max_iterations=100))
    with pytest.raises(DisclosureError, match="at most 100"):
        silo.handle(_req())
    slow = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy(max_cpu_seconds=1e-9))
    with pytest.raises(DisclosureError, match="CPU-time cap"):
        slow.handle(_req())


def test_allow_list_and_budget(silo_data):
    silo = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy(allowed_requests=("hello", "summarize")))
    summary = silo.handle(_req())
    with pytest.raises(DisclosureError, match="does not allow announce requests"):
        silo.handle(_honest_announcement(summary))
    budgeted = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy(budget={"hello": 2}))
    budgeted.handle(HelloRequest())
    budgeted.handle(HelloRequest())
    with pytest.raises(DisclosureError, match="budget of hello requests"):
        budgeted.handle(HelloRequest())


@pytest.fixture
def divergent(silo_data):
    """A deployed silo whose operator allows minimum-divergence matching (only without protection)."""
    silo = LocalSilo(silo_data, privacy=PrivacyConfig(min_cluster_size=10), run_key="run-1",
                     policy=SiloPolicy(allowed_strategies=("contingency", "min-divergence")))
    return silo, silo.handle(_req())


def test_non_finite_or_negative_parameters_are_refused(divergent):
    silo, summary = divergent
    p = silo.n_columns
    bad = np.full((2, p), 0.5)
    bad[0, 0] = np.nan
    with pytest.raises(ConfigError, match="finite"):
        silo.handle(DivergenceRequest(reference_pi=np.ones(2) / 2, reference_profiles=bad, rule="penalised"))
    with pytest.raises(ConfigError, match="probabilities"):
        silo.handle(DivergenceRequest(reference_pi=np.array([1.5, -0.5]), reference_profiles=np.full((2, p), 0.5),
                                      rule="penalised"))


def test_server_probabilities_are_floored(divergent):
    silo, _ = divergent
    prof = np.stack([_one_person_profile(silo, 0), _one_person_profile(silo, 1)])
    req = silo.gate.admit(DivergenceRequest(reference_pi=np.ones(2) / 2, reference_profiles=prof, rule="penalised"))
    assert np.min(req.reference_profiles) >= silo.gate.policy.profile_floor


def test_announcement_checked_against_what_the_silo_sent(deployed):
    silo, summary = deployed
    honest = _honest_announcement(summary)
    k = honest.n_global
    # a profile singling out one person's record is refused
    crafted = np.array(honest.profiles, copy=True)
    crafted[0, 0] = _one_person_profile(silo, 0)
    with pytest.raises(DisclosureError, match="farther than"):
        silo.handle(dataclasses.replace(honest, profiles=crafted))
    # weights that are not the silo's own draws are refused
    with pytest.raises(DisclosureError, match="not one of the silo's own draws"):
        silo.handle(dataclasses.replace(honest, pi=np.full((1, k), 1 / k)))
    assert isinstance(silo.handle(honest), AnnounceReply)
    with pytest.raises(DisclosureError, match="announced already"):
        silo.handle(honest)


def test_assign_and_assess_only_with_announced_draws(silo_data):
    silo, summary = _deployed(silo_data, budget={"assign": 5, "assess": 2})
    k = summary.n_clusters
    with pytest.raises(DisclosureError, match="announced first"):
        silo.handle(AssignRequest(assignment=np.arange(k), n_global=k))
    honest = _honest_announcement(summary)
    silo.handle(honest)
    other = np.array(honest.profiles[:1], copy=True)
    other[0, 0] = np.roll(other[0, 0], 1)      # not an announced draw (any change of any byte)
    with pytest.raises(DisclosureError, match="not announced"):
        silo.handle(AssignRequest(assignment=np.arange(k), n_global=k, pi=honest.pi[:1], profiles=other))
    with pytest.raises(DisclosureError, match="matching differs"):
        silo.handle(AssignRequest(assignment=np.zeros(k, int), n_global=k))
    reply = silo.handle(AssignRequest(assignment=np.arange(k), n_global=k, pi=honest.pi[:5],
                                      profiles=honest.profiles[:5]))
    assert isinstance(reply, AssignReply)
    with pytest.raises(DisclosureError, match="not announced"):
        silo.handle(AssessRequest(pi=honest.pi[:2], profiles=other.repeat(2, 0), pairs=np.zeros((0, 2), int),
                                  seed_entropy=1, spawn_key=(2, 0)))


def test_hard_counts_with_share_counts_false_are_refused(silo_data):
    limits = dataclasses.replace(LIMITS, share_counts=False)
    silo = LocalSilo(silo_data, privacy=limits, policy=SiloPolicy(allowed_strategies=("contingency", "design")))
    summary = silo.handle(_req())
    with pytest.raises(DisclosureError, match="share-counts = false"):
        silo.handle(CountsRequest(mode="hard", assignment=np.arange(summary.n_clusters), n_global=summary.n_clusters))


def test_a_wrong_reply_type_is_never_sent(deployed):
    silo, _ = deployed
    with pytest.raises(DisclosureError, match="is answered by"):
        silo.gate.release(HelloRequest(), AnnounceReply(n_pi_draws=1, n_profile_draws=1))


# -- release rules -------------------------------------------------------------------------------------------

def test_hard_counts_are_withheld_suppressed_and_rounded(silo_data):
    silo = LocalSilo(silo_data, privacy=LIMITS)           # own session: count round trips allowed
    summary = silo.handle(_req())
    k = summary.n_clusters
    reply = silo.handle(CountsRequest(mode="hard", assignment=np.arange(k), n_global=k + 1))
    assert np.all(reply.cluster % 5 == 0) and np.all(reply.modality % 5 == 0)
    assert not np.any((reply.modality > 0) & (reply.modality < 8))
    assert reply.cluster[k] == 0                          # the empty global cluster stays empty


def test_assign_counts_under_the_minimum_are_withheld(deployed):
    silo, summary = deployed
    k = summary.n_clusters
    silo.handle(_honest_announcement(summary))
    reply = silo.handle(AssignRequest(assignment=np.arange(k), n_global=k))
    for field in (reply.counts, reply.expected, reply.probability):
        v = np.asarray(field)
        assert not np.any((v > 0) & (v < 10)) and np.all(np.asarray(v) % 5 == 0)


def _block_sizes(table, n_modalities):
    offsets = profile_offsets(n_modalities)
    return np.repeat(np.add.reduceat(np.asarray(table, dtype=float), offsets[:-1], axis=1), np.diff(offsets), 1)


def test_suppressed_cells_cannot_be_recovered_from_the_profile_estimate(deployed, silo_data):
    silo, summary = deployed
    assert summary.counts is not None and summary.counts_suppressed > 0
    truth = silo.local_table()
    suppressed = (truth >= 1) & (truth < 8)
    # the estimate is a function of what the message carries (the protected table and the sizes) only: the
    # prior-smoothed protected table with each variable's suppressed people shared evenly over its empty cells
    np.testing.assert_allclose(summary.profile_estimate, estimate_from_table(
        summary.counts, summary.n_modalities, CFG.prior.beta, summary.cluster_sizes))
    released_only = estimate_from_table(summary.counts, summary.n_modalities, CFG.prior.beta, summary.cluster_sizes)
    recovered = np.rint(summary.profile_estimate * _block_sizes(truth, summary.n_modalities))
    guess = np.rint(released_only * _block_sizes(truth, summary.n_modalities))
    np.testing.assert_array_equal(recovered, guess)
    assert np.mean(recovered[suppressed] == truth[suppressed]) < 0.5


def test_suppressed_cells_cannot_be_recovered_from_the_profile_draws(deployed, silo_data):
    # the attack of the review: the draws' mean times the cluster's size gave back every suppressed cell to
    # within one person (37 of 47 exactly) when the draws were the sampler's; under suppression and rounding
    # they are drawn from the protected table (and the sizes), on the request's stream
    silo, summary = deployed
    truth = silo.local_table()
    suppressed = (truth >= 1) & (truth < 8)
    assert suppressed.sum() >= 10
    sizes = _block_sizes(truth, summary.n_modalities)
    recovered = np.rint(summary.profile_draws.mean(axis=0) * sizes)
    assert np.mean(recovered[suppressed] == truth[suppressed]) < 0.5
    assert not np.all(np.abs(recovered[suppressed] - truth[suppressed]) <= 1)
    # what the attacker gets is what the protected table and the sizes say, to Monte Carlo error: the draws'
    # mean is their posterior mean given the released fields
    expected = estimate_from_table(summary.counts, summary.n_modalities, CFG.prior.beta, summary.cluster_sizes)
    block = _block_sizes(summary.counts, summary.n_modalities)
    held = block >= 10
    se = np.sqrt(expected * (1 - expected) / (block + 1) / summary.profile_draws.shape[0])   # Dirichlet's sd / sqrt(T)
    assert np.all(np.abs(summary.profile_draws.mean(axis=0) - expected)[held] <= 4.5 * se[held] + 1e-9)
    # and no sampler draw reaches the message: replacing the silo's own posterior draws by any others changes
    # no byte of the released draws (the same protected table, sizes and seed)
    rebuilt = silo.gate.release(_req(), summary.with_changes(
        profile_draws=np.ascontiguousarray(summary.profile_draws[::-1])))
    np.testing.assert_array_equal(rebuilt.profile_draws, summary.profile_draws)
    np.testing.assert_array_equal(rebuilt.profile_estimate, summary.profile_estimate)


def test_an_honest_announcement_of_the_protected_draws_is_accepted_and_a_crafted_one_refused(silo_data):
    # the announcement is checked against what the silo sent (draws of the protected table), not its own
    # posterior: the silo's own sent draws pass, a one-person profile in one draw does not
    for share in (True, False):
        limits = dataclasses.replace(LIMITS, share_counts=share)
        silo = LocalSilo(silo_data, privacy=limits, policy=SiloPolicy(), run_key="run-1")
        summary = silo.handle(_req())
        honest = _honest_announcement(summary)
        crafted = np.array(honest.profiles, copy=True)
        crafted[0, 0] = _one_person_profile(silo, 0)
        with pytest.raises(DisclosureError, match="farther than"):
            silo.handle(dataclasses.replace(honest, profiles=crafted))
        assert isinstance(silo.handle(honest), AnnounceReply)


def test_fingerprint_is_keyed_per_run(silo_data):
    plain = silo_data.schema.fingerprint()
    a = LocalSilo(silo_data, run_key="run-1").handle(HelloRequest()).schema_fingerprint
    b = LocalSilo(silo_data, run_key="run-1").handle(HelloRequest()).schema_fingerprint
    c = LocalSilo(silo_data, run_key="run-2").handle(HelloRequest()).schema_fingerprint
    d = LocalSilo(silo_data, run_key="run-1", policy=SiloPolicy(fingerprint_key="s3cret")).handle(
        HelloRequest()).schema_fingerprint
    assert a == b and a != c and a != d and plain not in (a, c, d)
    assert LocalSilo(silo_data).handle(HelloRequest()).schema_fingerprint == plain   # the analyst's own session


def test_the_stricter_epsilon_is_in_force(silo_data):
    operator = dataclasses.replace(LIMITS, dp_epsilon=10.0)
    server = _with("privacy", dp_epsilon=0.5)
    silo = LocalSilo(silo_data, privacy=operator, secure_noise=False)
    silo.handle(_req(server))
    assert silo.gate.privacy.dp_epsilon == 0.5
    with pytest.raises(DisclosureError, match="differential privacy"):
        silo.handle(AssessRequest(pi=np.asarray(silo.local.pi_draws[:2]), profiles=np.asarray(
            silo.local.profile_draws[:2]), pairs=np.zeros((0, 2), int), seed_entropy=1, spawn_key=(2, 0)))


# -- properties: no reply under the minimum size, no unrounded count -----------------------------------------

def _fake_gate(min_size, round_to, suppress):
    silo = SimpleNamespace(name="s", privacy_in_force=PrivacyConfig(min_cluster_size=min_size, round_to=round_to,
                                                                    suppress_cells_below=suppress),
                           n_modalities=(2, 3), secure_noise=False, local=None)
    return Gate(silo, SiloPolicy())


_limits = st.tuples(st.integers(1, 30), st.integers(1, 10), st.integers(0, 12))


@settings(max_examples=60, deadline=None)
@given(limits=_limits, counts=st.lists(st.integers(0, 200), min_size=1, max_size=8),
       soft=st.lists(st.floats(0, 300, allow_nan=False), min_size=8, max_size=8))
def test_property_assign_replies(limits, counts, soft):
    g = _fake_gate(*limits)
    c = np.asarray(counts)
    e = np.asarray(soft[:c.size])
    out = g.release(AssignRequest(assignment=np.zeros(1, int), n_global=c.size),
                    AssignReply(counts=c, expected=e, probability=np.minimum(e, c), entropy=1.0, n_draws=20,
                                mc_error=0.01, mc_target=0.05))
    # the whole-silo scalars of a deployment: the entropy on a grid of rows_of_grid x log C, the Monte Carlo error
    # as its bound for the 20 draws averaged (a function of 20 alone), the draws and the target as they are
    min_size, round_to, _ = limits
    grid = max(min_size, round_to) * np.log(max(c.size, 2))
    assert out.entropy == pytest.approx(max(np.floor(1.0 / grid + 0.5) * grid, 0.0))
    assert (out.n_draws, out.mc_error, out.mc_target) == (20, 0.5 / np.sqrt(19), 0.05)
    for v in (out.counts, out.expected, out.probability):
        v = np.asarray(v, dtype=float)
        assert not np.any((v > 0) & (v < min_size))
        assert np.allclose(np.mod(v, round_to), 0) or round_to == 1


@settings(max_examples=60, deadline=None)
@given(limits=_limits, m=st.integers(1, 3), c=st.integers(1, 4), data=st.data())
def test_property_counts_replies(limits, m, c, data):
    g = _fake_gate(*limits)
    soft = data.draw(st.booleans())
    shape = (m, c) if soft else (c,)
    cluster = np.asarray(data.draw(st.lists(st.floats(0, 100, allow_nan=False), min_size=int(np.prod(shape)),
                                            max_size=int(np.prod(shape))))).reshape(shape)
    modality = np.asarray(data.draw(st.lists(st.floats(0, 100, allow_nan=False), min_size=int(np.prod(shape)) * 5,
                                             max_size=int(np.prod(shape)) * 5))).reshape((*shape, 5))
    request = CountsRequest(mode="soft" if soft else "hard")
    out = g.release(request, CountsReply(cluster=cluster, modality=modality, loglik=np.zeros(m if soft else 0)))
    min_size, round_to, suppress = limits
    assert not np.any((out.cluster > 0) & (out.cluster < min_size))
    assert np.all(out.modality[out.cluster == 0] == 0)          # a withheld cluster sends no modality count
    if round_to > 1:
        assert np.allclose(np.mod(out.cluster, round_to), 0) and np.allclose(np.mod(out.modality, round_to), 0)
    if suppress > 1 and round_to == 1:
        assert not np.any((out.modality > 0) & (out.modality < suppress))


@settings(max_examples=40, deadline=None)
@given(limits=_limits, data=st.data())
def test_property_summary_counts(limits, data):
    min_size, round_to, suppress = limits
    g = _fake_gate(*limits)
    k = data.draw(st.integers(1, 4))
    table = np.asarray(data.draw(st.lists(st.integers(0, 60), min_size=5 * k, max_size=5 * k))).reshape(k, 5)
    sizes = np.maximum(table[:, :2].sum(axis=1), min_size)
    summary = SiloSummary(silo="s", n_rows=int(sizes.sum()), n_modalities=(2, 3), schema_fingerprint="f",
                          cluster_sizes=sizes, pi_draws=np.full((1, k), 1 / k),
                          profile_draws=np.tile([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3], (1, k, 1)),
                          pi_estimate=np.full(k, 1 / k),
                          profile_estimate=np.tile([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3], (k, 1)),
                          n_clusters_posterior=np.ones(1), counts=table)
    out = g.release(_req(), summary)
    if round_to > 1:
        assert np.all(out.counts % round_to == 0)
    elif suppress > 1:
        assert not np.any((out.counts > 0) & (out.counts < suppress))


def test_counts_one_hot_reference(silo_data):
    # the table the gate protects is the silo's one-hot table of its local partition
    silo = LocalSilo(silo_data, privacy=LIMITS)
    silo.handle(_req())
    np.testing.assert_array_equal(silo.local_table(), one_hot_counts(silo.codes, silo.local.partition,
                                                                     silo.local.n_clusters, silo.n_modalities))


# -- assessment aggregates (rounded, coarsened, occupancy above the minimum size) ----------------------------

def _assess_reply(rng, r, p, e, c):
    from vcmc.protocol import AssessReply

    def ints(*shape):
        return rng.integers(0, 60, size=shape).astype(np.int64)

    return AssessReply(n_rows=200, n_observed=ints(p), observed=ints(p), replicated=ints(r, p),
                       pair_n_observed=ints(e), pair_observed=ints(e), pair_replicated=ints(r, e),
                       occupied=rng.integers(0, 2, size=(r, c)).astype(np.int8), lppd=float(-rng.random() * 3000),
                       p_waic=float(rng.random() * 40), elpd=0.0, elpd_m2=float(rng.random() * 900), n_suppressed=0)


@settings(max_examples=60, deadline=None)
@given(limits=_limits, seed=st.integers(0, 2 ** 31), r=st.integers(1, 4), e=st.integers(0, 3), c=st.integers(1, 3))
def test_property_assess_replies(limits, seed, r, e, c):
    # no unrounded count in any assess reply when rounding is set; the WAIC sums on the grid rounding implies
    from vcmc.silo.endpoints.assess import waic_grid, waic_grids

    min_size, round_to, suppress = limits
    g = _fake_gate(*limits)
    rng = np.random.default_rng(seed)
    p = 5
    request = SimpleNamespace(pi=rng.dirichlet(np.ones(c), size=r),
                              profiles=np.concatenate([rng.dirichlet(np.ones(2), size=(r, c)),
                                                       rng.dirichlet(np.ones(3), size=(r, c))], axis=-1),
                              pairs=np.stack([np.zeros(e, int), 2 + np.arange(e)], axis=1))
    raw = _assess_reply(rng, r, p, e, c)
    out = ENDPOINTS[AssessRequest].release(g, request, raw)
    for field in ("n_observed", "observed", "replicated", "pair_n_observed", "pair_observed", "pair_replicated"):
        v = np.asarray(getattr(out, field))
        assert np.all(v % round_to == 0), field
        if suppress > 1 and round_to == 1:          # (rounding after suppression may land a kept cell under it)
            assert not np.any((v >= 1) & (v < suppress)), field
    assert set(np.unique(out.occupied)) <= {0, 1}
    # a deployment's WAIC sums are each on its grid of max(min-cluster-size, round-to) rows' worth, whatever is set
    grids = waic_grids((2, 3), request.pi, request.profiles, max(min_size, round_to))
    assert grids[0] == waic_grid((2, 3), request.pi, request.profiles, max(min_size, round_to))
    for value, grid in zip((out.lppd, out.p_waic, out.elpd_m2), grids, strict=True):
        assert abs(value / grid - round(value / grid)) < 1e-6
    assert out.elpd == pytest.approx(out.lppd - out.p_waic)
    own = Gate(g.silo, SiloPolicy.own_data())       # the analyst's own session: exact where nothing is protected
    mine = ENDPOINTS[AssessRequest].release(own, request, raw)
    if round_to == 1 and suppress <= 1:
        assert (mine.lppd, mine.p_waic, mine.elpd_m2) == (raw.lppd, raw.p_waic, raw.elpd_m2)


def test_assess_lppd_no_longer_differences_to_a_cell_count(silo_data):
    # the review: two assessments differing in one probability gave the exact count of a cell from lppd
    # (d lppd = n_cell x d log p). Rounded to the grid, one person's worth is below the rounding
    from vcmc.rows.ppc import assess_rows
    from vcmc.silo.endpoints.assess import waic_grid

    codes, n_mod = silo_data.codes, tuple(silo_data.schema.n_modalities)
    offsets = profile_offsets(n_mod)
    rng = np.random.default_rng(0)
    pi = np.full((1, 2), 0.5)
    prof = np.concatenate([rng.dirichlet(np.ones(k) * 5, size=(1, 2)) for k in n_mod], axis=-1)
    moved = prof.copy()
    moved[0, :, offsets[0]:offsets[1]] = prof[0, :, offsets[0]:offsets[1]][:, ::-1]
    cell = int(np.sum(codes[:, 0] == 0))
    limits = PrivacyConfig(min_cluster_size=10, round_to=5)
    grid = waic_grid(n_mod, pi, prof, 10)
    assert grid > 10 * np.log(2)             # ten rows' worth of log density at least
    silo = SimpleNamespace(name="s", privacy_in_force=limits, n_modalities=n_mod, secure_noise=False, local=None)
    gate = Gate(silo, SiloPolicy())
    replies = [gate.release(AssessRequest(pi=pi, profiles=x, pairs=np.zeros((0, 2), int), seed_entropy=1,
                                          spawn_key=(2, 0)),
                            AssessReply(**assess_rows(codes, n_mod, pi, x, np.zeros((0, 2), int), rng=1,
                                                      privacy=limits)))
               for x in (prof, moved)]
    assert all(abs(r.lppd / grid - round(r.lppd / grid)) < 1e-9 for r in replies)
    raw = [assess_rows(codes, n_mod, pi, x, np.zeros((0, 2), int), rng=1)["lppd"] for x in (prof, moved)]
    assert raw[0] != raw[1] and cell > 0       # the unrounded sums differ (by the cell's share)


def test_occupancy_is_sent_only_above_the_minimum_cluster_size(silo_data):
    # "is anyone in this silo with this pattern": a global cluster that only one person's pattern can fall in
    # read 1 when present; with rounding set it reads 1 only if at least min-cluster-size rows fall in it
    from vcmc.rows.ppc import assess_rows

    codes, n_mod = silo_data.codes, tuple(silo_data.schema.n_modalities)
    offsets = profile_offsets(n_mod)
    person = np.full(offsets[-1], 1e-9)
    for q in range(len(n_mod)):
        person[offsets[q] + codes[0, q]] = 1.0
    person = person / np.repeat(np.add.reduceat(person, offsets[:-1]), np.diff(offsets))
    uniform = np.concatenate([np.full(k, 1 / k) for k in n_mod])
    pi = np.full((20, 2), 0.5)
    prof = np.tile(np.stack([uniform, person]), (20, 1, 1))
    plain = assess_rows(codes, n_mod, pi, prof, np.zeros((0, 2), int), rng=2)
    assert plain["occupied"][:, 1].all()       # the person is there (the unprotected answer)
    rounded = assess_rows(codes, n_mod, pi, prof, np.zeros((0, 2), int), rng=2,
                          privacy=PrivacyConfig(min_cluster_size=10, round_to=5))
    assert not rounded["occupied"][:, 1].any() and rounded["occupied"][:, 0].all()


def test_lca_structural_sums_refused_for_a_class_under_the_minimum_size(silo_data):
    import pandas as pd

    from vcmc.lca.analysis import infer_spec
    from vcmc.protocol.lca import LcaStructuralRequest

    n = silo_data.n_rows
    rng = np.random.default_rng(1)
    aux = pd.DataFrame({"age": np.round(rng.normal(50, 10, n) / 5) * 5, "sex": rng.choice(["f", "m"], n)})
    spec = infer_spec({silo_data.name: aux}, [("age", None), ("sex", None)], "--covariates")
    n_mod = tuple(silo_data.schema.n_modalities)
    offsets = profile_offsets(n_mod)
    person = np.full(offsets[-1], 1e-6)
    for q in range(len(n_mod)):
        person[offsets[q] + silo_data.codes[0, q]] = 1.0
    person = person / np.repeat(np.add.reduceat(person, offsets[:-1]), np.diff(offsets))
    uniform = np.concatenate([np.full(k, 1 / k) for k in n_mod])

    def request(profiles):
        return LcaStructuralRequest(model="covariate", spec_json=spec.to_json(), pi=np.array([0.5, 0.5]),
                                    profiles=profiles, log_error=np.log(np.array([[0.9, 0.1], [0.2, 0.8]])),
                                    params=np.zeros(3))

    allowed = SiloPolicy(allowed_strategies=("contingency", "lca", "lca-structural"))
    deployed = LocalSilo(silo_data, privacy=LIMITS, policy=allowed, auxiliary=aux, run_key="r")
    with pytest.raises(DisclosureError, match="fewer than the minimum cluster size"):
        deployed.handle(request(np.stack([uniform, person])))
    half = np.stack([uniform, np.concatenate([np.r_[0.9, 0.1] if k == 2 else np.full(k, 1 / k) for k in n_mod])])
    assert deployed.handle(request(half)).n_rows == n          # classes of many rows: answered
    own = LocalSilo(silo_data, privacy=LIMITS, auxiliary=aux)    # the analyst's own session: sent
    assert own.handle(request(np.stack([uniform, person]))).n_rows == n


def test_rounds_a_silo_would_refuse_are_refused_before_sampling(silo_data, monkeypatch):
    """The summarize request announces the rounds (SiloConfig), so a run whose rounds the operator would
    refuse at the round start ends at its first request, not after the sampler's minutes."""
    import vcmc.mcmc.apply as apply_module

    def no_sampling(*args, **kwargs):
        raise AssertionError("the sampler ran before the refusal")

    monkeypatch.setattr(apply_module, "run_apply_step", no_sampling)
    silo = LocalSilo(silo_data, privacy=LIMITS, policy=SiloPolicy(allowed_strategies=("contingency",)))
    with pytest.raises(DisclosureError, match="does not allow the 'rounds'"):
        silo.handle(_req(_with("aggregation", rounds=50)))
    # the same silo runs a one-shot request
    monkeypatch.undo()
    assert silo.handle(_req(_with("aggregation", rounds=1))).n_clusters >= 1


def test_a_silos_own_weights_leave_only_in_the_analysts_own_session(monkeypatch):
    """After the rounds a silo may replicate at its own weights and send them (``AssessReply.weights``): only in
    the analyst's own session without secure sum, where its round counts reach the server anyway."""
    import dataclasses

    from vcmc.exceptions import DisclosureError
    from vcmc.silo.endpoints import rounds as round_endpoints

    g = _fake_gate(1, 1, 0)
    rng = np.random.default_rng(3)
    reply = dataclasses.replace(_assess_reply(rng, 2, 5, 1, 2), weights=np.full((2, 2), 0.5))
    asked = SimpleNamespace(pi=np.full((2, 2), 0.5), profiles=np.full((2, 2, 5), 0.5))
    monkeypatch.setattr(round_endpoints, "assessed_draws", lambda silo, request: asked)
    for own, secure, allowed in ((False, False, False), (True, True, False), (True, False, True)):
        g.silo.own_session = own
        monkeypatch.setattr(round_endpoints, "_session", lambda silo, secure=secure: SimpleNamespace(secure=secure))
        if allowed:
            out = round_endpoints.release_assess(g, None, reply)
            np.testing.assert_array_equal(out.weights, reply.weights)
        else:
            with pytest.raises(DisclosureError, match="own weights"):
                round_endpoints.release_assess(g, None, reply)
