"""The silo's half of the global-informed rounds: exact allocation probabilities, and the gate's rules."""

import numpy as np
import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.model import profile_offsets
from vcmc.protocol import AssignRequest, SiloConfig, SummarizeRequest
from vcmc.protocol.rounds import RoundFinishRequest, RoundStartRequest, RoundSweepRequest
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy

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
    # the analyst's own session: the labels' counts whole, as the rounds' counts are (so result.json's sizes are
    # assignments.csv's); a deployment withholds those under the minimum (the test below)
    np.testing.assert_array_equal(done.counts, full)


def _exact_probabilities(silo, log_pi, log_prof):
    off = profile_offsets(silo.n_modalities)
    lp = np.tile(log_pi, (silo.codes.shape[0], 1))
    for q in range(len(silo.n_modalities)):
        x = silo.codes[:, q]
        ok = x >= 0
        lp[ok] += log_prof[:, off[q] + x[ok]].T
    exact = np.exp(lp - lp.max(axis=1, keepdims=True))
    return exact / exact.sum(axis=1, keepdims=True)


def test_silo_labels_use_the_silos_own_weights_and_leave_the_draws_unchanged(silo_data):
    # round_labels = "silo": the memberships are the allocation probabilities under the silo's own weights
    # (posterior mean given the allocation it drew), the draws those of the pooled weights
    c_extra, a = 2, 0.5
    pooled, k = _ready(silo_data)
    own, _ = _ready(silo_data)
    c = k + c_extra
    pooled.handle(RoundStartRequest(start=np.arange(k), n_components=c))
    own.handle(RoundStartRequest(start=np.arange(k), n_components=c, silo_weight_prior=a))
    log_pi, log_prof = _draw(own, c, seed=2)
    log_pi = np.log(np.full(c, 1.0 / c))           # pooled weights far from the silo's own
    r_pooled = _sweep(pooled, log_pi, log_prof)
    r_own = _sweep(own, log_pi, log_prof)
    np.testing.assert_array_equal(r_pooled.cluster, r_own.cluster)       # the same chain
    np.testing.assert_array_equal(pooled.rounds.z, own.rounds.z)
    z_drawn = own.rounds.z                          # the weights are those of the allocation just drawn
    n_sc = np.bincount(z_drawn, minlength=c)
    own_w = (a + n_sc) / (c * a + z_drawn.size)
    own.handle(RoundFinishRequest(keep=np.arange(c)))
    pooled.handle(RoundFinishRequest(keep=np.arange(c)))
    np.testing.assert_allclose(own.memberships, _exact_probabilities(own, np.log(own_w), log_prof), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(pooled.memberships, _exact_probabilities(pooled, log_pi, log_prof), rtol=1e-10,
                               atol=1e-12)
    assert np.any(own.assignments != pooled.assignments)   # the weights mattered for some rows


def test_a_round_start_with_a_bad_silo_weight_prior_is_refused(silo_data):
    silo, k = _ready(silo_data)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="silo_weight_prior"):
            silo.handle(RoundStartRequest(start=np.arange(k), n_components=k, silo_weight_prior=bad))


def test_a_deployment_refuses_split_merge_proposals(silo_data):
    # a split-merge reply is a sum over rows at profiles the server chooses: the analyst's own session only
    from vcmc.protocol.rounds import RoundMoveRequest

    silo, k = _ready(silo_data, SiloPolicy(allowed_strategies=("contingency", "rounds"), require_announcement=False))
    c = k + 1
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=c))
    _, log_prof = _draw(silo, c)
    with pytest.raises(DisclosureError, match="own session"):
        silo.handle(RoundMoveRequest(kind="merge", a=0, b=1, log_profile_a=log_prof[0], log_profile_b=log_prof[1],
                                     log_rho=np.log(0.5), log_1m_rho=np.log(0.5), seed_entropy=1, spawn_key=(1,)))


def test_split_merge_sums_are_the_exact_split_probabilities(silo_data):
    from vcmc.protocol.rounds import RoundMoveRequest

    silo, k = _ready(silo_data)
    c = k + 1
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=c))
    _, log_prof = _draw(silo, c, seed=6)
    z = silo.rounds.z
    rho = 0.3
    lp = _exact_probabilities(silo, np.log([rho, 1 - rho]), log_prof[:2])     # P(a), P(b) of every row
    merge = silo.handle(RoundMoveRequest(kind="merge", a=0, b=1, log_profile_a=log_prof[0], log_profile_b=log_prof[1],
                                         log_rho=np.log(rho), log_1m_rho=np.log(1 - rho), seed_entropy=1,
                                         spawn_key=(1,)))
    want = np.log(lp[z == 0, 0]).sum() + np.log(lp[z == 1, 1]).sum()
    assert merge.log_q == pytest.approx(want, rel=1e-10)
    split = silo.handle(RoundMoveRequest(kind="split", a=0, b=1, log_profile_a=log_prof[0], log_profile_b=log_prof[1],
                                         log_rho=np.log(rho), log_1m_rho=np.log(1 - rho), seed_entropy=1,
                                         spawn_key=(1,)))
    moved = silo.rounds.last_split
    rows_a = np.flatnonzero(z == 0)
    assert set(moved) <= set(rows_a) and split.cluster_b == moved.size
    stay = np.setdiff1d(rows_a, moved)
    assert split.log_q == pytest.approx(np.log(lp[moved, 1]).sum() + np.log(lp[stay, 0]).sum(), rel=1e-10)
    np.testing.assert_array_equal(silo.rounds.z, z)        # a proposal changes nothing in the silo


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
    done = np.asarray(silo.handle(RoundFinishRequest(keep=np.arange(c))).counts)
    labelled = np.bincount(silo.assignments, minlength=c)
    np.testing.assert_array_equal(done, np.where(labelled >= 10, labelled, 0))   # an assign reply's rule


def test_rounds_need_the_one_shot_labels_and_a_start(silo_data):
    silo = LocalSilo(silo_data, run_key="run-1")
    silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(CFG), n_silos=4, seed_entropy=9, spawn_key=(0, 1)))
    with pytest.raises(NotFittedError, match="assign"):
        silo.handle(RoundStartRequest(start=np.arange(3), n_components=3))
    with pytest.raises(NotFittedError, match="no rounds"):
        silo.handle(RoundFinishRequest(keep=np.arange(2)))


def test_round_state_survives_export_and_restore(silo_data):
    silo, k = _ready(silo_data)
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=k + 1, silo_weight_prior=0.3))
    log_pi, log_prof = _draw(silo, k + 1)
    _sweep(silo, log_pi, log_prof)
    state = silo.export_state()
    fresh = LocalSilo(silo_data, run_key="run-1")
    fresh.restore_state(state)
    assert fresh.rounds.silo_weight_prior == 0.3
    a = _sweep(silo, log_pi, log_prof, r=3)
    b = _sweep(fresh, log_pi, log_prof, r=3)
    np.testing.assert_array_equal(a.cluster, b.cluster)
    np.testing.assert_array_equal(silo.rounds.summed, fresh.rounds.summed)


def test_the_sparse_sweep_gives_exact_probabilities_and_counts_with_missing_cells_and_many_levels():
    # the sweep works on the sampler's sparse layout (a row costs its exceptions to the silo's most frequent
    # codes); a missing cell has no term, and the counts equal those of the drawn allocation, cell by cell
    from vcmc.mcmc.sampler.layout import sparse_layout
    from vcmc.mcmc.sampler.round_kernels import counts, sweep_patterns
    from vcmc.rows.rounds import RoundState

    rng = np.random.default_rng(11)
    n_mod = (2, 5, 3, 7)
    codes = np.stack([rng.choice(m, size=300, p=rng.dirichlet(np.ones(m) * 0.5)) for m in n_mod], axis=1)
    codes[rng.random(codes.shape) < 0.1] = -1
    codes[:40] = codes[:1]                                   # repeated rows share a pattern
    off = profile_offsets(n_mod)
    c = 6
    log_pi = np.log(rng.dirichlet(np.ones(c)))
    log_prof = np.log(np.hstack([rng.dirichlet(np.ones(m), size=c) for m in n_mod]))
    lay = sparse_layout(codes.astype(np.int16), off)
    st = RoundState(layout=lay, z=np.zeros(300, dtype=np.int64), n_components=c,
                    summed=np.zeros((lay.n_patterns, c)), summed_sq=np.zeros((lay.n_patterns, c)))
    nc, ct = sweep_patterns(*st.kernel_layout(), log_pi, log_prof, rng.random(300), True, st.summed, st.summed_sq,
                            st.z)
    lp = np.tile(log_pi, (300, 1))
    for q in range(len(n_mod)):
        ok = codes[:, q] >= 0
        lp[ok] += log_prof[:, off[q] + codes[ok, q]].T
    exact = np.exp(lp - lp.max(axis=1, keepdims=True))
    exact /= exact.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(st.summed[st.pattern_of_rows()], exact, rtol=1e-10, atol=1e-12)
    want = np.zeros((c, off[-1]))
    for q in range(len(n_mod)):
        ok = codes[:, q] >= 0
        np.add.at(want, (st.z[ok], off[q] + codes[ok, q]), 1.0)
    np.testing.assert_array_equal(nc, np.bincount(st.z, minlength=c))
    np.testing.assert_array_equal(ct, want)
    nc2, ct2 = counts(*st.kernel_layout(), st.z, int(off[-1]), c)
    np.testing.assert_array_equal(nc2, nc)
    np.testing.assert_array_equal(ct2, want)


def test_an_annealed_sweep_draws_from_the_tempered_conditional_and_a_kept_round_refuses_it(silo_data):
    from vcmc.mcmc.sampler.layout import sparse_layout
    from vcmc.mcmc.sampler.round_kernels import sweep_patterns
    from vcmc.rows.rounds import RoundState

    n_mod = (2, 3)
    codes = np.zeros((20000, 2), dtype=np.int16)            # one pattern: every row has the same conditional
    off = profile_offsets(n_mod)
    log_pi = np.log([0.5, 0.3, 0.2])
    log_prof = np.log([[0.5, 0.5, 0.2, 0.3, 0.5], [0.6, 0.4, 0.3, 0.3, 0.4], [0.3, 0.7, 0.5, 0.25, 0.25]])
    lay = sparse_layout(codes, off)
    st = RoundState(layout=lay, z=np.zeros(20000, dtype=np.int64), n_components=3, summed=np.zeros((1, 3)),
                    summed_sq=np.zeros((1, 3)))
    rng = np.random.default_rng(5)
    nc, _ = sweep_patterns(*st.kernel_layout(), log_pi, log_prof, rng.random(20000), False, st.summed,
                           st.summed_sq, st.z, 3.0)
    lp = 3.0 * (log_pi + log_prof[:, 0] + log_prof[:, 2])
    want = np.exp(lp - lp.max()) / np.exp(lp - lp.max()).sum()
    np.testing.assert_allclose(nc / 20000, want, atol=0.01)
    plain = np.exp(lp / 3.0) / np.exp(lp / 3.0).sum()
    assert want.max() > plain.max() + 0.1                     # sharper than the plain conditional
    # rows with exceptions to the baseline codes (the sparse layout's ratios), at inverse temperature 2
    codes = np.zeros((40000, 2), dtype=np.int16)
    codes[20000:] = (1, 2)
    lay = sparse_layout(codes, off)
    st = RoundState(layout=lay, z=np.zeros(40000, dtype=np.int64), n_components=3, summed=np.zeros((2, 3)),
                    summed_sq=np.zeros((2, 3)))
    sweep_patterns(*st.kernel_layout(), log_pi, log_prof, rng.random(40000), False, st.summed, st.summed_sq, st.z,
                   2.0)
    for rows, cols in ((slice(0, 20000), (0, 2)), (slice(20000, None), (1, 4))):
        lp = 2.0 * (log_pi + log_prof[:, cols[0]] + log_prof[:, cols[1]])
        want = np.exp(lp - lp.max()) / np.exp(lp - lp.max()).sum()
        np.testing.assert_allclose(np.bincount(st.z[rows], minlength=3) / 20000, want, atol=0.01)

    silo, k = _ready(silo_data)
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=k))
    log_pi, log_prof = _draw(silo, k)
    with pytest.raises(ConfigError, match="inverse_temperature"):
        silo.handle(RoundSweepRequest(round=2, log_pi=log_pi, log_profiles=log_prof, keep=True, seed_entropy=3,
                                      spawn_key=(3, 2, 0), inverse_temperature=2.0))


def test_a_deployment_refuses_an_annealed_sweep(silo_data):
    # tempering raises the profiles to a power, past the floor the gate puts on them
    silo, k = _ready(silo_data, SiloPolicy(allowed_strategies=("contingency", "rounds"), require_announcement=False))
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=k))
    log_pi, log_prof = _draw(silo, k)
    with pytest.raises(DisclosureError, match="annealed"):
        silo.handle(RoundSweepRequest(round=2, log_pi=log_pi, log_profiles=log_prof, keep=False, seed_entropy=3,
                                      spawn_key=(3, 2, 0), inverse_temperature=2.0))
    assert silo.handle(RoundSweepRequest(round=2, log_pi=log_pi, log_profiles=log_prof, keep=False, seed_entropy=3,
                                         spawn_key=(3, 2, 0))).cluster.shape == (k,)


def test_the_sweep_keeps_weights_and_likelihoods_far_below_float64s_range_exact():
    # a sparse Dirichlet draw gives an empty component a weight like exp(-760), and 100 conditions a likelihood
    # like exp(-810): neither is a float64, yet they decide the row; the sweep must get it exactly
    from vcmc.mcmc.sampler.layout import sparse_layout
    from vcmc.mcmc.sampler.round_kernels import sweep_patterns
    from vcmc.rows.rounds import RoundState

    n_var, n = 100, 400
    codes = np.zeros((n, n_var), dtype=np.int16)
    codes[0] = 1                                               # one row with every condition, the rest none
    off = profile_offsets((2,) * n_var)
    p1 = np.array([np.exp(-8.1), 0.6])                         # P(condition) in components 0 and 1
    log_prof = np.log(np.tile(np.stack([1 - p1, p1], axis=1), (1, n_var)))    # (2, 2 n_var): [absent, present]
    log_pi = np.array([0.0, -760.0])                          # exp(-760) is 0 in float64
    lay = sparse_layout(codes, off)
    st = RoundState(layout=lay, z=np.zeros(n, dtype=np.int64), n_components=2,
                    summed=np.zeros((lay.n_patterns, 2)), summed_sq=np.zeros((lay.n_patterns, 2)))
    sweep_patterns(*st.kernel_layout(), log_pi, log_prof, np.full(n, 0.5), True, st.summed, st.summed_sq, st.z)
    lw = log_pi + n_var * np.log(p1)                           # the full row's exact log weights
    want = np.exp(lw - lw.max()) / np.exp(lw - lw.max()).sum()
    got = st.summed[st.pattern_of_rows()[0]]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert 0.05 < want[1] < 0.95                               # both components really matter for that row


def _assess_after(log_prof, keep, pi):
    from vcmc.protocol.rounds import RoundAssessRequest

    return RoundAssessRequest(log_profiles=log_prof[None], keep=keep, pi=pi[None], pairs=np.array([[0, 3]]),
                              seed_entropy=5, spawn_key=(3, 0, 0, 2))


def test_a_deployment_refuses_the_assessment_after_the_rounds(silo_data):
    # its weights are the server's: the analyst's own session only (a deployment's rounds report none)
    silo, k = _ready(silo_data, SiloPolicy(allowed_strategies=("contingency", "rounds"), require_announcement=False))
    c = k + 1
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=c))
    log_pi, log_prof = _draw(silo, c)
    _sweep(silo, log_pi, log_prof)
    with pytest.raises(DisclosureError, match="own session"):
        silo.handle(_assess_after(log_prof, np.arange(k), np.full(k, 1.0 / k)))


def test_the_assessment_after_the_rounds_is_at_a_kept_rounds_draws_and_equals_an_assess_request(silo_data):
    from vcmc.protocol import AssessRequest

    silo, k = _ready(silo_data)
    c = k + 1
    silo.handle(RoundStartRequest(start=np.arange(k), n_components=c))
    kept_pi, kept = _draw(silo, c, seed=1)
    _sweep(silo, kept_pi, kept, r=2, keep=True)
    burn_pi, burn = _draw(silo, c, seed=2)
    _sweep(silo, burn_pi, burn, r=3, keep=False)
    keep, pi = np.array([1, 0]), np.array([0.3, 0.7])
    with pytest.raises(DisclosureError, match="no kept round"):
        silo.handle(_assess_after(burn, keep, pi))          # a burn-in draw: not a draw of the answer
    reply = silo.handle(_assess_after(kept, keep, pi))
    # the same as an assess request at those profiles, restricted to the kept components, on the same rows
    other, _ = _ready(silo_data)
    prof = np.exp(kept[keep])
    direct = other.handle(AssessRequest(pi=pi[None], profiles=prof[None], pairs=np.array([[0, 3]]), seed_entropy=5,
                                        spawn_key=(3, 0, 0, 2)))
    for name in ("lppd", "p_waic", "n_rows"):
        assert getattr(reply, name) == pytest.approx(getattr(direct, name), rel=1e-12)
    np.testing.assert_array_equal(reply.replicated, direct.replicated)


# -- births (docs/design.md §16, "Births") ---------------------------------------------------------------------

def _ready_with_draws(silo_data, policy=None):
    """A silo whose rows were labelled with global draws (the pipeline's default assign): here its own
    clusters' draws, as if every global cluster were one of its local clusters."""
    silo = LocalSilo(silo_data, policy=policy, run_key="run-1")
    summary = silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(CFG), n_silos=4, seed_entropy=9,
                                           spawn_key=(0, 1)))
    k = summary.n_clusters
    pi = np.asarray(silo.local.pi_draws[:5], dtype=np.float64)
    pi = pi / pi.sum(axis=1, keepdims=True)
    silo.handle(AssignRequest(assignment=np.arange(k), n_global=k, pi=pi,
                              profiles=np.asarray(silo.local.profile_draws[:5], dtype=np.float64)))
    return silo, k


def test_births_put_the_silos_worst_explained_rows_in_their_components(silo_data):
    from vcmc.protocol.rounds import RoundBirthRequest
    from vcmc.rows.births import misfits

    silo, k = _ready_with_draws(silo_data)
    np.testing.assert_allclose(silo.label_profiles, np.asarray(silo.local.profile_draws[:5]).mean(axis=0))
    share = 0.05
    counts = np.asarray(silo.handle(RoundBirthRequest(share=share)).counts)
    rows, worst = misfits(silo.codes, silo.n_modalities, silo.assignments, silo.label_profiles, share)
    np.testing.assert_array_equal(counts, np.bincount(worst, minlength=silo.n_columns))   # whole: own session
    assert counts.sum() == np.ceil(share * silo_data.n_rows)
    columns = np.argsort(-counts, kind="stable")[:2]
    reply = silo.handle(RoundStartRequest(start=np.arange(k), n_components=k + 2, birth_share=share,
                                          birth_columns=columns, birth_components=np.array([k, k + 1])))
    cluster = np.asarray(reply.cluster)
    for col, comp in zip(columns, (k, k + 1), strict=True):
        assert cluster[comp] == counts[col] > 0
        np.testing.assert_array_equal(np.flatnonzero(silo.rounds.z == comp), np.sort(rows[worst == col]))
    others = np.setdiff1d(np.arange(silo_data.n_rows), rows[np.isin(worst, columns)])
    np.testing.assert_array_equal(silo.rounds.z[others], silo.assignments[others])
    state = silo.export_state()
    fresh = LocalSilo(silo_data, run_key="run-1")
    fresh.restore_state(state)
    np.testing.assert_array_equal(fresh.label_profiles, silo.label_profiles)


def test_births_need_labels_made_with_the_global_draws(silo_data):
    from vcmc.protocol.rounds import RoundBirthRequest

    silo, k = _ready(silo_data)            # labels from the matching alone: no profiles to score the rows under
    with pytest.raises(NotFittedError, match="births need"):
        silo.handle(RoundBirthRequest(share=0.01))
    with pytest.raises(NotFittedError, match="births need"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=k + 1, birth_share=0.01,
                                      birth_columns=np.array([0]), birth_components=np.array([k])))


@pytest.mark.parametrize("fields", [
    {"birth_share": 0.01, "birth_columns": np.array([0, 0]), "birth_components": np.array([1, 2])},   # repeated
    {"birth_share": 0.01, "birth_columns": np.array([10_000]), "birth_components": np.array([1])},   # no column
    {"birth_share": 0.01, "birth_columns": np.array([0]), "birth_components": np.array([99])},       # no component
    {"birth_share": 0.01, "birth_columns": np.array([0, 1]), "birth_components": np.array([1])},     # lengths
    {"birth_share": 0.0, "birth_columns": np.array([0]), "birth_components": np.array([1])},         # no share
    {"birth_share": 0.5, "birth_columns": np.array([0]), "birth_components": np.array([1])},         # too large
])
def test_a_round_start_with_bad_births_is_refused(silo_data, fields):
    silo, k = _ready_with_draws(silo_data)
    with pytest.raises(ConfigError, match="birth|share"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=k + 3, **fields))


def test_a_deployment_withholds_birth_counts_under_the_minimum_size(silo_data):
    from vcmc.protocol.rounds import RoundBirthRequest

    silo, _ = _ready_with_draws(silo_data, SiloPolicy(allowed_strategies=("contingency", "rounds"),
                                                      require_announcement=False))
    from vcmc.rows.births import misfits

    _, worst = misfits(silo.codes, silo.n_modalities, silo.assignments, silo.label_profiles, 0.1)
    whole = np.bincount(worst, minlength=silo.n_columns)
    assert np.any((whole > 0) & (whole < 10)), "the test needs a column under the minimum"
    counts = np.asarray(silo.handle(RoundBirthRequest(share=0.1)).counts)
    np.testing.assert_array_equal(counts, np.where(whole >= 10, whole, 0))


def test_a_deployment_refuses_births_unless_its_operator_allows_the_rounds(silo_data):
    from vcmc.protocol.rounds import RoundBirthRequest

    silo, _ = _ready_with_draws(silo_data, SiloPolicy(allowed_strategies=("contingency",),
                                                      require_announcement=False))
    with pytest.raises(DisclosureError, match="rounds"):
        silo.handle(RoundBirthRequest(share=0.01))
