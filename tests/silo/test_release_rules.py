"""No release gives a withheld part back (issue 42): complementary withholding in every group whose sum the server
knows, scalars from rows on their grid, the exchanges a deployment refuses (with their reasons), the run ledger
and the DP account. The rules are ``vcmc.silo.release`` (on ``vcmc.disclosure.complementary_withholding``).

"The server knows the sum" of: a reply's per-cluster vector (the silo's row count, sent in its summary and in
several replies); a table's (cluster, variable) block of a cluster it received (the cluster's size, less missing
values); a column of a table of every row (the silo's modality count, sent by the assessment); a complete group of
pair counts (a modality count). In each such group a receiver computes the sum of the withheld entries; the
properties check that this sum is never one withheld entry's, nor under the limit, unless nothing was left to
withhold, and (exhaustively, for the cluster vectors) that even a receiver who knows the rule cannot compute a
withheld entry from the release and the sum.
"""

import dataclasses
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vcmc.config import PrivacyConfig
from vcmc.disclosure import pair_families, protect_counts
from vcmc.exceptions import DisclosureError
from vcmc.protocol import AssignReply, AssignRequest, CountsReply, CountsRequest
from vcmc.protocol.lca import LcaClassifyReply, LcaClassifyRequest, LcaEStepReply, LcaEStepRequest
from vcmc.silo.gate import Gate
from vcmc.silo.policy import SiloPolicy
from vcmc.silo.release import on_grid, withheld_entries

N_MOD = (2, 3)
OFFSETS = np.array([0, 2, 5])


def _gate(min_size=10, round_to=1, suppress=0, policy=None, dp=None):
    silo = SimpleNamespace(name="s", privacy_in_force=PrivacyConfig(min_cluster_size=min_size, round_to=round_to,
                                                                    suppress_cells_below=suppress, dp_epsilon=dp),
                           n_modalities=N_MOD, secure_noise=False, local=None)
    return Gate(silo, SiloPolicy() if policy is None else policy)


def _gives_back(true, released, groups, limit) -> list:
    """The groups from whose known sum a receiver computes a withheld entry (one withheld entry that is not 0),
    or learns that fewer than ``limit`` people are withheld, while an entry was left that could have been
    withheld too."""
    true, released = np.asarray(true, dtype=float).ravel(), np.asarray(released, dtype=float).ravel()
    bad = []
    for idx in groups:
        idx = np.asarray(idx)
        hidden = (released[idx] == 0) & (true[idx] > 0)
        total = true[idx][hidden].sum()
        tells = (hidden.sum() == 1 and total >= 0.5) or (hidden.any() and 0.5 <= total < limit)
        if tells and np.any(released[idx] != 0):
            bad.append(idx.tolist())
    return bad


def _table_groups(shape, kept_rows, columns=True):
    """Independent of the implementation: blocks of the kept rows, and columns."""
    k, p = shape
    index = np.arange(k * p).reshape(k, p)
    groups = [index[r, OFFSETS[q]:OFFSETS[q + 1]] for r in range(k) if kept_rows[r] for q in range(len(N_MOD))]
    return groups + ([index[:, j] for j in range(p)] if columns else [])


_limits = st.tuples(st.integers(1, 20), st.sampled_from([1, 1, 2, 5]), st.sampled_from([0, 0, 5, 8, 11]))


# -- the cluster vectors: exhaustively, against a receiver who knows the rule --------------------------------------

def _compositions(total: int, parts: int) -> np.ndarray:
    out = []
    for cut in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1, *cut, total + parts - 1)
        out.append([bounds[i + 1] - bounds[i] - 1 for i in range(parts)])
    return np.asarray(out, dtype=np.float64)


def _released_counts(gate, counts):
    from vcmc.silo.release import round_real

    withheld = withheld_entries(gate, counts)
    return np.where(withheld, 0.0, round_real(counts, gate.privacy.round_to)), withheld


@settings(max_examples=40, deadline=None)
@given(limit=st.integers(4, 9), round_to=st.sampled_from([1, 2, 5]), data=st.data())
def test_property_no_withheld_cluster_follows_from_the_row_count(limit, round_to, data):
    # every vector of counts with the same total and the same release (the receiver knows the total and the
    # rule): each withheld count takes at least two values among them, so none can be computed
    gate = _gate(min_size=limit, round_to=round_to)
    c = data.draw(st.integers(2, 4))
    counts = np.asarray(data.draw(st.lists(st.integers(0, 3 * limit), min_size=c, max_size=c)), dtype=float)
    counts[data.draw(st.integers(0, c - 1))] = data.draw(st.integers(1, limit - 1))     # one small at least
    total = int(counts.sum())
    if total > 36:
        counts = np.floor(counts * 36 / total)
        total = int(counts.sum())
    released, withheld = _released_counts(gate, counts[None])
    others = _compositions(total, c)
    same = others[np.all(_released_counts(gate, others)[0] == released, axis=1)]
    for i in np.flatnonzero(withheld[0] & (counts > 0)):
        assert np.unique(same[:, i]).size >= 2, (counts, released, i)
    assert not _gives_back(counts, released, [np.arange(c)], limit)


def test_the_reviews_withheld_cluster_of_8_no_longer_follows_from_the_row_count():
    # the review: assign counts released beside the silo's row count showed a withheld cluster of 8
    gate = _gate(min_size=10)
    counts = np.array([40, 8, 50, 102])
    out = gate.release(AssignRequest(assignment=np.zeros(1, int), n_global=4),
                       AssignReply(counts=counts, expected=counts.astype(float), probability=counts * 0.9))
    assert out.counts[1] == 0 and counts.sum() - out.counts.sum() != 8          # the 40 is withheld with it
    assert not _gives_back(counts, out.counts, [np.arange(4)], 10)
    assert not _gives_back(counts, out.expected, [np.arange(4)], 10)


@settings(max_examples=60, deadline=None)
@given(limits=_limits, data=st.data())
def test_property_assign_reply_gives_no_withheld_part_back(limits, data):
    min_size, round_to, suppress = limits
    gate = _gate(min_size, round_to, suppress)
    c = data.draw(st.integers(1, 6))
    counts = np.asarray(data.draw(st.lists(st.integers(0, 80), min_size=c, max_size=c)))
    expected = counts + np.asarray(data.draw(st.lists(st.floats(-0.49, 0.49), min_size=c, max_size=c)))
    expected = np.maximum(expected, 0) * (expected.sum() and counts.sum() / max(expected.sum(), 1e-9))
    out = gate.release(AssignRequest(assignment=np.zeros(1, int), n_global=c),
                       AssignReply(counts=counts, expected=expected, probability=0.8 * counts))
    limit = max(min_size, suppress)
    for true, sent in ((counts, out.counts), (expected, out.expected)):
        assert not _gives_back(true, sent, [np.arange(c)], limit)
        assert not np.any((sent > 0) & (sent < limit))
    assert np.all(out.probability[out.counts == 0] == 0)


# -- tables: counts replies, the summary's table, the latent class analysis' sums ----------------------------------

@settings(max_examples=60, deadline=None)
@given(limits=_limits, data=st.data())
def test_property_count_tables_give_no_withheld_part_back(limits, data):
    min_size, round_to, suppress = limits
    gate = _gate(min_size, round_to, suppress)
    k = data.draw(st.integers(1, 4))
    modality = np.zeros((k, 5))
    for r in range(k):
        size = data.draw(st.integers(0, 40))
        for q in range(2):
            cols = np.arange(OFFSETS[q], OFFSETS[q + 1])
            modality[r, cols] = np.random.default_rng(data.draw(st.integers(0, 999))).multinomial(
                size, np.ones(cols.size) / cols.size)
    cluster = modality[:, :2].sum(axis=1)
    request = CountsRequest(mode="hard", assignment=np.zeros(1, int), n_global=k)
    out = gate.release(request, CountsReply(cluster=cluster, modality=modality, loglik=np.zeros(0)))
    limit = max(min_size, suppress)
    assert not _gives_back(cluster, out.cluster, [np.arange(k)], limit)     # against the silo's row count
    kept = out.cluster > 0
    if suppress > 1:
        assert not _gives_back(modality, out.modality, _table_groups(modality.shape, kept), suppress)
    assert np.all(out.modality[~kept] == 0)


@settings(max_examples=50, deadline=None)
@given(suppress=st.sampled_from([5, 8, 11]), round_to=st.sampled_from([1, 5]), data=st.data())
def test_property_the_summary_table_gives_no_suppressed_cell_back(suppress, round_to, data):
    # its blocks sum to the cluster sizes (sent) and its columns to the silo's modality counts (the assessment's)
    k = data.draw(st.integers(1, 4))
    table = np.zeros((k, 5), dtype=np.int64)
    for r in range(k):
        size = data.draw(st.integers(10, 60))
        for q in range(2):
            cols = np.arange(OFFSETS[q], OFFSETS[q + 1])
            table[r, cols] = np.random.default_rng(data.draw(st.integers(0, 999))).multinomial(
                size, np.ones(cols.size) / cols.size)
    out, _ = protect_counts(table, PrivacyConfig(suppress_cells_below=suppress, round_to=round_to),
                            n_modalities=N_MOD, columns=True)
    assert not _gives_back(table, out, _table_groups(table.shape, np.ones(k, bool)), suppress)


@settings(max_examples=40, deadline=None)
@given(suppress=st.sampled_from([5, 8]), round_to=st.sampled_from([1, 5]), data=st.data())
def test_property_lca_sums_give_no_withheld_part_back(suppress, round_to, data):
    gate = _gate(10, round_to, suppress)
    k = data.draw(st.integers(2, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    resp = rng.dirichlet(np.full(k, 0.3), size=60)                   # 60 rows' soft memberships
    x = np.stack([rng.integers(0, 2, 60), rng.integers(0, 3, 60)], axis=1)
    onehot = np.hstack([np.eye(2)[x[:, 0]], np.eye(3)[x[:, 1]]])
    cluster, modality = resp.sum(axis=0), resp.T @ onehot
    pi, prof = np.full(k, 1 / k), np.tile([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3], (k, 1))
    out = gate.release(LcaEStepRequest(pi=pi, profiles=prof),
                       LcaEStepReply(n_rows=60, cluster=cluster, modality=modality, loglik=-80.0, entropy=20.0))
    assert not _gives_back(cluster, out.cluster, [np.arange(k)], suppress)
    assert not _gives_back(modality, out.modality, _table_groups(modality.shape, out.cluster > 0), suppress)
    modal = np.eye(k)[resp.argmax(axis=1)]
    cross = resp.T @ modal
    sent = gate.release(LcaClassifyRequest(pi=pi, profiles=prof), LcaClassifyReply(cross=cross)).cross
    rows = [np.arange(r * k, (r + 1) * k) for r in range(k)]
    assert not _gives_back(cross, sent, [*rows, np.arange(k * k)], suppress)


@settings(max_examples=40, deadline=None)
@given(suppress=st.sampled_from([5, 8, 11]), round_to=st.sampled_from([1, 5]), data=st.data())
def test_property_assessment_counts_give_no_suppressed_cell_back(suppress, round_to, data):
    # each variable's block of observed (and replicated) counts sums to n_observed, which the reply carries
    from vcmc.protocol import AssessReply, AssessRequest

    gate = _gate(10, round_to, suppress)
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    n = data.draw(st.integers(10, 60))
    observed = np.concatenate([rng.multinomial(n, rng.dirichlet(np.ones(m) * 0.5)) for m in N_MOD])
    replicated = np.stack([np.concatenate([rng.multinomial(n, np.ones(m) / m) for m in N_MOD]) for _ in range(2)])
    pi, prof = np.full((2, 2), 0.5), np.tile([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3], (2, 2, 1))
    reply = AssessReply(n_rows=n, n_observed=np.full(5, n), observed=observed, replicated=replicated,
                        pair_n_observed=np.zeros(0, int), pair_observed=np.zeros(0, int),
                        pair_replicated=np.zeros((2, 0), int), occupied=np.ones((2, 2), np.int8), lppd=-50.0,
                        p_waic=2.0, elpd=-52.0, elpd_m2=3.0)
    out = gate.release(AssessRequest(pi=pi, profiles=prof, pairs=np.zeros((0, 2), int), seed_entropy=1,
                                     spawn_key=(0,)), reply)
    blocks = [np.arange(OFFSETS[q], OFFSETS[q + 1]) for q in range(len(N_MOD))]
    assert not _gives_back(observed, out.observed, blocks, suppress)
    for r in range(2):
        assert not _gives_back(replicated[r], out.replicated[r], blocks, suppress)


def test_pair_counts_complete_groups_are_complemented():
    # the server asked for column 0 with every column of the second variable: those three counts sum to the
    # count of column 0 (the assessment's ``observed``), so a lone suppressed one would follow
    pairs = np.array([[0, 2], [0, 3], [0, 4], [1, 2]])
    by_a, by_b = pair_families(pairs, N_MOD)
    assert by_a[:3].tolist() == [by_a[0]] * 3 and by_a[3] == -1        # (1, var 2) is incomplete
    from vcmc.rows.ppc import _disclosure_cells

    out, _ = _disclosure_cells(np.array([3, 40, 50, 6]), PrivacyConfig(suppress_cells_below=8), pairs, N_MOD)
    assert out[0] == 0 and out[1] == 0 and out[2] == 50 and out[3] == 0


# -- scalars: on their grid outside the analyst's own session ------------------------------------------------------

def test_scalars_on_their_grid_in_a_deployment_and_exact_in_the_own_session():
    reply = AssignReply(counts=np.array([30, 40]), expected=np.array([30.2, 39.8]),
                        probability=np.array([25.0, 35.0]), entropy=13.37, n_draws=40, mc_error=0.0123,
                        mc_target=0.05)
    request = AssignRequest(assignment=np.zeros(1, int), n_global=2)
    deployed = _gate(10).release(request, reply)
    assert deployed.entropy == on_grid(13.37, 10 * np.log(2)) and deployed.mc_error == 0.5 / np.sqrt(39)
    own = _gate(10, policy=SiloPolicy.own_data()).release(request, reply)
    assert (own.entropy, own.mc_error) == (13.37, 0.0123)
    rounded = _gate(10, round_to=5, policy=SiloPolicy.own_data()).release(request, reply)   # protected: a grid
    assert rounded.entropy == on_grid(13.37, 10 * np.log(2))
    pi, prof = np.full(2, 0.5), np.tile([0.5, 0.5, 1 / 3, 1 / 3, 1 / 3], (2, 1))
    estep = LcaEStepReply(n_rows=70, cluster=np.array([30.0, 40.0]), modality=np.full((2, 5), 14.0),
                          loglik=-123.456, entropy=7.89)
    sent = _gate(10).release(LcaEStepRequest(pi=pi, profiles=prof), estep)
    worth = np.log(2) + np.log(3)                 # the predictive's entropy of a row at that point
    assert sent.loglik == pytest.approx(on_grid(-123.456, 10 * worth))
    assert sent.entropy == pytest.approx(on_grid(7.89, 10 * np.log(2)))
    assert _gate(10, policy=SiloPolicy.own_data()).release(LcaEStepRequest(pi=pi, profiles=prof), estep) == estep


# -- exchanges at parameters the server chooses: refused by default in a deployment, with the reason -----------------

@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=120).silos[0]


def _summarized(silo_data, policy):
    from vcmc.config import FitConfig, PostprocessConfig, SamplerConfig
    from vcmc.protocol import SiloConfig, SummarizeRequest
    from vcmc.silo.local import LocalSilo

    cfg = FitConfig(sampler=SamplerConfig(n_iter=200, burn_in=100, thin=5),
                    postprocess=PostprocessConfig(min_cluster_fraction=0.05))
    silo = LocalSilo(silo_data, privacy=PrivacyConfig(min_cluster_size=10), policy=policy, run_key="r")
    summary = silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=1, seed_entropy=1,
                                           spawn_key=(0,)))
    return silo, summary


def _server_parameters(silo, k):
    from vcmc.protocol import DivergenceRequest
    from vcmc.protocol.lca import LcaStructuralRequest

    p = silo.n_columns
    prof = np.concatenate([np.full((k, m), 1 / m) for m in silo.n_modalities], axis=1)
    pi = np.full(k, 1 / k)
    return {
        "counts-soft": (CountsRequest(mode="soft", pi=pi[None], profiles=prof[None], n_global=k), "federated-gradient"),
        "counts-hard": (CountsRequest(mode="hard", assignment=np.arange(k), n_global=k), "federated-gradient"),
        "divergence": (DivergenceRequest(reference_pi=pi, reference_profiles=prof, rule="penalised"),
                       "min-divergence"),
        "lca-estep": (LcaEStepRequest(pi=pi, profiles=prof), "lca"),
        "lca-classify": (LcaClassifyRequest(pi=pi, profiles=prof), "lca"),
        "lca-structural": (LcaStructuralRequest(model="covariate", spec_json="[]", pi=pi, profiles=prof,
                                                log_error=np.zeros((k, k)), params=np.zeros(k - 1)),
                           "lca-structural"),
    }, p


@pytest.mark.parametrize("allowed", [("contingency",), ("contingency", "rounds"), ("contingency", "lca")],
                         ids=["default", "rounds-only", "lca-only"])
def test_every_exchange_at_server_parameters_is_refused_with_its_reason(silo_data, allowed):
    silo, summary = _summarized(silo_data, SiloPolicy(allowed_strategies=allowed))
    requests, _ = _server_parameters(silo, summary.n_clusters)
    for what, (request, strategy) in requests.items():
        if strategy in allowed:
            continue
        with pytest.raises(DisclosureError) as refused:
            silo.handle(request)
        reason = str(refused.value)
        # what the operator would have to allow, and what allowing it exposes
        assert f"does not allow the {strategy!r}" in reason and "allow-strategies" in reason, what
        assert "expose" in reason and "server chooses" in reason, what


def test_soft_counts_are_refused_where_only_the_rounds_are_allowed(silo_data):
    # the gate's generic strategy check: a counts request belongs to federated-gradient or design, not to rounds
    silo, summary = _summarized(silo_data, SiloPolicy(allowed_strategies=("contingency", "rounds")))
    request, _ = _server_parameters(silo, summary.n_clusters)[0]["counts-soft"]
    with pytest.raises(DisclosureError, match="'federated-gradient' or 'design' strategy: counts requests"):
        silo.handle(request)


def test_allowed_divergence_is_refused_under_protection_in_a_deployment(silo_data):
    from vcmc.silo.local import LocalSilo

    silo, summary = _summarized(silo_data, SiloPolicy(allowed_strategies=("contingency", "min-divergence")))
    request = _server_parameters(silo, summary.n_clusters)[0]["divergence"][0]
    assert silo.handle(request).cost.shape[0] == summary.n_clusters          # allowed and unprotected: answered
    silo.privacy_in_force = PrivacyConfig(min_cluster_size=10, suppress_cells_below=8)
    with pytest.raises(DisclosureError, match="would give back the cells"):
        silo.handle(request)
    own = LocalSilo(silo_data, privacy=PrivacyConfig(suppress_cells_below=8))     # the analyst's own: answered
    own.gate.state.summarized, own.local = True, silo.local
    assert own.handle(request).cost.shape[0] == summary.n_clusters


def test_lca_refused_under_dp_in_a_deployment(silo_data):
    from vcmc.silo.local import LocalSilo

    silo = LocalSilo(silo_data, privacy=PrivacyConfig(dp_epsilon=1.0), run_key="r",
                     policy=SiloPolicy(allowed_strategies=("contingency", "lca")))
    request = _server_parameters(silo, 2)[0]["lca-estep"][0]
    with pytest.raises(DisclosureError, match="not noised"):
        silo.handle(request)


# -- the run ledger counts every run that touches the rows ---------------------------------------------------------

def test_a_run_that_never_summarizes_is_counted_at_its_first_request_past_hello(silo_data, tmp_path):
    from vcmc.protocol import HelloRequest
    from vcmc.silo.local import LocalSilo

    policy = SiloPolicy(allowed_strategies=("contingency", "lca"), max_runs_per_day=1, budget_dir=str(tmp_path))
    first = LocalSilo(silo_data, policy=policy, run_key="lca-only")
    request = _server_parameters(first, 2)[0]["lca-estep"][0]
    first.handle(HelloRequest())
    first.handle(request)                       # an LCA-only run: counted here
    first.handle(request)                       # the same run: not again
    second = LocalSilo(silo_data, policy=policy, run_key="another")
    second.handle(HelloRequest())               # touches no row: not counted, not refused
    with pytest.raises(DisclosureError, match=r"at most 1 runs in 24 hours"):
        second.handle(request)


# -- the DP account ------------------------------------------------------------------------------------------------

def test_the_dp_account_composes_every_noised_release_of_every_silo():
    from vcmc.federation.accounting import ReleaseLedger, privacy_account

    ledger = ReleaseLedger()
    soft = CountsReply(cluster=np.zeros((3, 2)), modality=np.zeros((3, 2, 5)), loglik=np.zeros(3))
    ledger.record({"a": soft, "b": AssignReply(counts=np.zeros(2, int))})
    ledger.record({"a": AssignReply(counts=np.zeros(2, int)), "b": LcaEStepReply(
        n_rows=1, cluster=np.zeros(2), modality=np.zeros((2, 5)), loglik=0.0, entropy=0.0)})
    assert ledger.snapshot() == {"a": 4, "b": 1}          # 3 soft tables + 1 assign; 1 assign (LCA: not noised)
    summaries = [SimpleNamespace(silo="a", diagnostics={"dp_epsilon": 0.5}),
                 SimpleNamespace(silo="b", diagnostics={"dp_epsilon": 1.0})]
    account = privacy_account(summaries, ledger.snapshot())
    a, b = account["per_silo"]["a"], account["per_silo"]["b"]
    assert (a["releases"], b["releases"]) == (5, 2)               # each summary one release more
    assert a["epsilon_basic"] == pytest.approx(2.5) and a["rho_zcdp"] == pytest.approx(5 * 0.5 ** 2 / 2)
    assert b["epsilon_basic"] == pytest.approx(2.0) and b["rho_zcdp"] == pytest.approx(2 * 1.0 ** 2 / 2)
    assert account["epsilon_basic"] == pytest.approx(2.5)         # the largest silo's (parallel composition)
    assert account["epsilon_at_delta"] <= account["epsilon_basic"]
    rho = b["rho_zcdp"]
    assert b["epsilon_zcdp_at_delta"] >= rho + 2 * np.sqrt(rho * np.log(1 / account["delta"])) - 1   # the usual bound
    assert privacy_account([SimpleNamespace(silo="a", diagnostics={})], {"a": 3}) is None


def test_dp_account_in_result_json(silo_data):
    import vcmc
    from vcmc.config import FitConfig, SamplerConfig
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("homogeneous", "easy", rng=5, n_per_silo=80)
    cfg = FitConfig(sampler=SamplerConfig(n_iter=200, burn_in=100, thin=5), privacy=PrivacyConfig(dp_epsilon=1.0))
    cfg = dataclasses.replace(cfg, aggregation=dataclasses.replace(cfg.aggregation, rounds=1),
                              assessment=dataclasses.replace(cfg.assessment, enabled=False))
    account = vcmc.fit(sim, config=cfg, rng=3).diagnostics["privacy"]
    # every silo: its summary's table and its assign counts, each of epsilon 1
    assert {s: v["releases"] for s, v in account["per_silo"].items()} == dict.fromkeys(
        [d.name for d in sim.silos], 2)
    assert account["epsilon_basic"] == pytest.approx(2.0)


def test_two_small_clusters_whose_sum_pins_them_are_withheld_with_a_third():
    # hypothesis found it: counts 5, 5 under a limit of 6 sum to 10, which only 5 + 5 gives among counts the rule
    # withholds, so a release (0, 0, 6) beside the row count 16 gave both back; now the 6 is withheld with them
    gate = _gate(min_size=6)
    released, withheld = _released_counts(gate, np.array([[5.0, 5.0, 6.0]]))
    assert withheld.all() and not released.any()
    released, withheld = _released_counts(gate, np.array([[4.0, 5.0, 6.0]]))     # 4 + 5: two ways, enough
    assert withheld[0].tolist() == [True, True, False]


def test_one_withheld_count_beside_a_withheld_zero_is_not_given_back():
    # hypothesis found it: at a minimum of 1, an expected count of 0.23 beside a count of 0 was withheld with a
    # count of 1, which the row count then gave back (the other withheld count was 0); the 2 is withheld too
    gate = _gate(1, 1, 0)
    counts = np.array([0.0, 0.0, 1.0, 2.0])
    expected = np.array([0.0, 0.23, 0.92, 1.85])
    withheld = withheld_entries(gate, counts[None], also=(expected[None],))
    assert withheld[0].tolist() == [False, True, True, True]
