import numpy as np
import pytest
from scipy.special import logsumexp

from vcmc.config import MatchingConfig, PriorConfig
from vcmc.exceptions import ConfigError, DataError, SiloFailure
from vcmc.matching import match, match_min_divergence
from vcmc.protocol import DivergenceReply, DivergenceRequest
from vcmc.research.study.evaluate import correct_matching, evaluate_matching, in_process_divergence
from vcmc.research.study.oracle import oracle_local_posterior, oracle_posterior_and_summary
from vcmc.rows.divergence import divergence_cost

N_MOD = (2, 3, 3)


def _log_f(x, prof):
    """log f(x | profile) for one row, written out variable by variable (missing skipped)."""
    offsets = np.concatenate([[0], np.cumsum(N_MOD)])
    return sum(np.log(prof[offsets[q] + v]) for q, v in enumerate(x) if v >= 0)


@pytest.fixture(scope="module")
def small_silo():
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, k, 60) for k in N_MOD])
    codes[3, 1] = -1                                    # one missing cell
    labels = rng.integers(0, 3, 60)
    local = oracle_local_posterior(codes, N_MOD, labels, prior=PriorConfig(), n_silos=2, n_draws=30, rng=1)
    ref_prof = np.concatenate([rng.dirichlet(np.ones(k), size=2) for k in N_MOD], axis=1)   # (2, 8)
    ref_pi = np.array([0.3, 0.7])
    return codes, local, ref_pi, ref_prof


def test_penalised_cost_matches_its_definition(small_silo):
    codes, local, ref_pi, ref_prof = small_silo
    cost = divergence_cost(codes, N_MOD, local, ref_pi, ref_prof, penalty_multiplier=1.5)
    k, c = local.n_clusters, ref_prof.shape[0]
    assert cost.shape == (k, c + k)
    own = local.profile_draws.mean(axis=0)
    d = sum(k_q - 1 for k_q in N_MOD)
    for l in range(k):
        w = local.membership[:, l]
        for j in range(c):
            expected = sum(w[i] * (_log_f(codes[i], own[l]) - _log_f(codes[i], ref_prof[j]))
                           for i in range(codes.shape[0]))
            assert cost[l, j] == pytest.approx(expected, rel=1e-10)
        assert cost[l, c + l] == pytest.approx(1.5 * d / 2 * np.log(w.sum()))
        assert np.all(np.isinf(np.delete(cost[l, c:], l)))


def test_augmented_cost_matches_its_definition(small_silo):
    codes, local, ref_pi, ref_prof = small_silo
    cost = divergence_cost(codes, N_MOD, local, ref_pi, ref_prof, rule="augmented", n_draws=5)
    k, c, n = local.n_clusters, ref_prof.shape[0], codes.shape[0]
    draws = np.unique(np.linspace(0, local.pi_draws.shape[0] - 1, 5).round().astype(int))

    def memberships(pi, profs):
        logj = np.array([[np.log(pi[a]) + _log_f(codes[i], profs[a]) for a in range(len(pi))]
                         for i in range(n)])
        return np.exp(logj - logsumexp(logj, axis=1, keepdims=True))

    q = memberships(ref_pi, ref_prof)
    pts = [memberships(local.pi_draws[t], local.profile_draws[t]) for t in draws]
    pi_m, prof_m = local.pi_draws.mean(axis=0), local.profile_draws.mean(axis=0)
    for l in range(k):
        for j in range(c):
            expected = np.mean([np.sum(pt[:, l] * np.log(pt[:, l] / q[:, j])) for pt in pts])
            assert cost[l, j] == pytest.approx(expected, rel=1e-8)
        q_aug = memberships(np.append(ref_pi, pi_m[l]) / (1 + pi_m[l]), np.vstack([ref_prof, prof_m[l]]))
        expected = np.mean([np.sum(pt[:, l] * np.log(pt[:, l] / q_aug[:, c])) for pt in pts])
        assert cost[l, c + l] == pytest.approx(expected, rel=1e-8)


def test_divergence_cost_errors_name_shapes_not_values(small_silo):
    codes, local, ref_pi, ref_prof = small_silo
    with pytest.raises(DataError, match=r"reference_profiles must have shape \(C, 8\)"):
        divergence_cost(codes, N_MOD, local, ref_pi, ref_prof[:, :5])
    with pytest.raises(DataError, match="describes 60 rows but codes has 59"):
        divergence_cost(codes[:59], N_MOD, local, ref_pi, ref_prof)
    with pytest.raises(ConfigError, match="'rule' parameter of divergence_cost"):
        divergence_cost(codes, N_MOD, local, ref_pi, ref_prof, rule="bic")


@pytest.mark.parametrize("rule", ["penalised", "augmented"])
def test_only_small_messages_cross_the_boundary(mh, rule):
    data, summaries, locals_, local_labels = mh.appendix_a("nested", "easy", 2)
    route = mh.divergence_for(data, locals_)
    seen = []

    def spy(silo_index, request):
        assert isinstance(request, DivergenceRequest)
        reply = route(silo_index, request)
        assert isinstance(reply, DivergenceReply)
        seen.append((silo_index, request, reply))
        return reply

    m = match_min_divergence(summaries, spy, rule=rule, n_starts=3, rng=0)
    assert seen
    row_counts = {int(s.n_rows) for s in summaries}
    for silo_index, request, reply in seen:
        k = summaries[silo_index].n_clusters
        c = request.reference_profiles.shape[0]
        assert reply.cost.shape == (k, c + k)
        for msg in (request, reply):
            for value in msg.to_arrays().values():
                if isinstance(value, np.ndarray):
                    assert not set(value.shape) & row_counts
    assert m.details["n_requests"] == len(seen)


@pytest.mark.parametrize("design", ["homogeneous", "nested", "non-nested"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_appendix_a_easy_recovers_correct_matching(mh, design, seed):
    data, summaries, locals_, local_labels = mh.appendix_a(design, "easy", seed)
    cfg = MatchingConfig(method="min-divergence", n_starts=2)
    m = match(summaries, cfg, divergence=mh.divergence_for(data, locals_), rng=seed)
    ev = evaluate_matching(m, local_labels, data.labels)
    assert ev["correct"], ev
    assert m.total_cost == min(m.details["start_costs"])


@pytest.mark.parametrize("seed", [1, 2])
def test_penalised_rule_beats_augmented_on_overlapping_clusters(mh, seed):
    # docs/design.md §5.3.1: the augmented reference over-splits when clusters overlap: with a multi-start over
    # orders, runs that open spurious clusters reach a smaller summed KL and win
    data, summaries, locals_, local_labels = mh.appendix_a("nested", "poor", seed)
    route = mh.divergence_for(data, locals_)
    pen = match_min_divergence(summaries, route, n_starts=4, rng=seed)
    aug = match_min_divergence(summaries, route, rule="augmented", n_starts=4, rng=seed)
    assert correct_matching(pen, local_labels, data.labels, 6)
    assert aug.n_global > 6


def test_never_merges_two_clusters_of_one_silo(mh):
    data, summaries, locals_, local_labels = mh.appendix_a("homogeneous", "easy", 4)
    labels = np.asarray(local_labels[0]).copy()
    members = np.nonzero(labels == 0)[0]
    labels[np.random.default_rng(0).choice(members, size=members.size // 2, replace=False)] = 5
    local, split = oracle_posterior_and_summary(data.silos[0].codes, data.n_modalities, labels,
                                                silo="silo_1", prior=PriorConfig(), n_silos=4, n_draws=100,
                                                rng=0)
    locals2 = [local] + list(locals_[1:])
    m = match_min_divergence([split] + list(summaries[1:]), mh.divergence_for(data, locals2), n_starts=2,
                             rng=0)
    for a in m.assignment:
        assert np.unique(a).size == a.size
    assert m.assignment[0][0] != m.assignment[0][5]
    assert m.n_global == 6


def test_invariant_to_silo_order_and_relabelling(mh):
    data, summaries, locals_, _ = mh.appendix_a("non-nested", "poor", 3)
    codes = [s.codes for s in data.silos]
    m = match_min_divergence(summaries, mh.divergence_for(data, locals_), n_starts=3, rng=5)
    order = [1, 3, 0, 2]
    rng = np.random.default_rng(2)
    perms = [rng.permutation(summaries[i].n_clusters) for i in order]
    shuffled = [mh.permute_clusters(summaries[i], p) for i, p in zip(order, perms, strict=True)]

    def relabel_local(local, perm):
        import dataclasses

        inv = np.argsort(perm)
        return dataclasses.replace(local, partition=inv[local.partition],
                                   membership=local.membership[:, perm], pi_draws=local.pi_draws[:, perm],
                                   profile_draws=local.profile_draws[:, perm])

    route = in_process_divergence([(codes[i], relabel_local(locals_[i], p)) for i, p in
                                   zip(order, perms, strict=True)], data.n_modalities)
    m2 = match_min_divergence(shuffled, route, n_starts=3, rng=5)
    assert mh.canonical_pairs(m, summaries) == mh.canonical_pairs(m2, shuffled)
    assert m2.total_cost == pytest.approx(m.total_cost)


def test_named_reference_starts_every_order(mh):
    data, summaries, locals_, _ = mh.appendix_a("nested", "easy", 1)
    m = match_min_divergence(summaries, mh.divergence_for(data, locals_), n_starts=4, reference="silo_3",
                             rng=0)
    assert m.details["reference"] == "silo_3"
    assert len(m.details["start_costs"]) == 4


def test_malformed_reply_names_the_silo(mh):
    data, summaries, locals_, _ = mh.appendix_a("homogeneous", "easy", 1)

    def bad(silo_index, request):
        return DivergenceReply(cost=np.zeros((2, 2)))

    with pytest.raises(SiloFailure, match=r"silo 'silo_\d': divergence cost matrix has shape \(2, 2\)"):
        match_min_divergence(summaries, bad, n_starts=1)


def test_match_requires_the_divergence_router(mh):
    _, summaries, _, _ = mh.appendix_a("homogeneous", "easy", 1)
    with pytest.raises(ConfigError, match="'divergence' argument of match is required"):
        match(summaries, MatchingConfig(method="min-divergence"))
    with pytest.raises(ConfigError, match="'n_starts' parameter of match_min_divergence"):
        match_min_divergence(summaries, lambda i, r: None, n_starts=0)


def test_single_silo_is_its_own_matching(mh):
    data, summaries, locals_, local_labels = mh.appendix_a("homogeneous", "easy", 1)
    route = mh.divergence_for(data, locals_)
    for cfg in (MatchingConfig(method="ball"), MatchingConfig(method="hungarian"),
                MatchingConfig(method="min-divergence")):
        m = match(summaries[:1], cfg, divergence=route, rng=0)
        assert m.n_global == 5
        assert sorted(m.assignment[0].tolist()) == [0, 1, 2, 3, 4]
