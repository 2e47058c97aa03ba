"""The silo's half of the global-informed rounds (docs/design.md §16): exact allocation probabilities at the
pooled chain's stored draws, the births, the state between messages, and the endpoint's rules."""

import numpy as np
import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.model import profile_offsets
from vcmc.protocol import SiloConfig, SummarizeRequest
from vcmc.protocol.rounds import (
    RoundAssessRequest,
    RoundFinishRequest,
    RoundResultRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy

CFG = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200, thin=5),
                postprocess=PostprocessConfig(min_cluster_fraction=0.05), privacy=PrivacyConfig(min_cluster_size=10))
NO_TAGS = np.zeros(0, dtype=np.uint8)


@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=200).silos[0]


def _ready(silo_data, policy=None, cfg=CFG, **kwargs):
    silo = LocalSilo(silo_data, policy=policy, run_key="run-1", **kwargs)
    silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=4, seed_entropy=9, spawn_key=(0, 1)))
    return silo


def _start(silo, names=None, **fields):
    k = silo.local.n_clusters
    base = {"names": (silo.name,) if names is None else names, "start": np.arange(k)[None],
            "n_components": k + 2, "alpha": 0.01, "beta": np.full(silo.n_columns, 0.5), "checkpoints": np.array([6]),
            "stop": False, "n_chains": 1, "anneal": 1.0, "anneal_until": 1, "max_stored": 50, "min_size": 10,
            "birth_share": 0.0, "birth_budget": 0, "silo_weight_prior": 0.0, "secure": False, "seed_entropy": 7,
            "spawn_key": (3,)}
    return RoundStartRequest(**{**base, **fields})


def _alone(silo, **fields):
    """The silo as the only participant of the analyst's own session: its own vector is the pooled sum."""
    reply, r = silo.handle(_start(silo, **fields)), -1
    while not reply.stop:
        reply = silo.handle(RoundSweepRequest(round=r, vectors=reply.vector[None], tags=NO_TAGS))
        r += 1
    return r


def _exact_probabilities(silo, log_pi, log_prof):
    off = profile_offsets(silo.n_modalities)
    lp = np.tile(log_pi, (silo.codes.shape[0], 1))
    for q in range(len(silo.n_modalities)):
        x = silo.codes[:, q]
        ok = x >= 0
        lp[ok] += log_prof[:, off[q] + x[ok]].T
    exact = np.exp(lp - lp.max(axis=1, keepdims=True))
    return exact / exact.sum(axis=1, keepdims=True)


def test_memberships_are_the_exact_allocation_probabilities_at_the_stored_draws(silo_data):
    silo = _ready(silo_data)
    assert _alone(silo) == 7                 # rounds 1-6, and the request whose vectors the chain stopped at
    chain = silo.chain
    assert chain.stopped and chain.plan.window(0) == (3, 6) and len(chain.stored_pi[0]) == 3
    exact = np.mean([_exact_probabilities(silo, lp, lq) for lp, lq in zip(chain.stored_pi[0], chain.stored_prof[0],
                                                                          strict=True)], axis=0)
    keep = chain.clusters()
    want = exact[:, keep] / exact[:, keep].sum(axis=1, keepdims=True)
    done = silo.handle(RoundFinishRequest())
    np.testing.assert_allclose(silo.memberships, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(silo.assignments, np.argmax(want, axis=1))
    # the analyst's own session: the labels' counts whole (a deployment's: an assign reply's rules)
    np.testing.assert_array_equal(done.counts, np.bincount(silo.assignments, minlength=keep.size))


def test_silo_labels_use_the_silos_own_weights_and_leave_the_chain_unchanged(silo_data):
    # silo_weight_prior > 0: the memberships are the allocation probabilities under the silo's own weights (the
    # posterior mean given the allocation it drew), the chain that of the pooled weights
    a = 0.5
    pooled, own = _ready(silo_data), _ready(silo_data)
    _alone(pooled, checkpoints=np.array([3]))            # one kept round: round 3
    _alone(own, checkpoints=np.array([3]), silo_weight_prior=a)
    np.testing.assert_array_equal(pooled.rounds.z, own.rounds.z)
    np.testing.assert_array_equal(pooled.chain.stored_prof[0], own.chain.stored_prof[0])
    c = own.rounds.n_components
    z = own.rounds.z[0]
    own_w = (a + np.bincount(z, minlength=c)) / (c * a + z.size)
    log_prof = own.chain.stored_prof[0][0]
    keep = own.chain.clusters()
    for silo, log_pi in ((own, np.log(own_w)), (pooled, pooled.chain.stored_pi[0][0])):
        silo.handle(RoundFinishRequest())
        exact = _exact_probabilities(silo, log_pi, log_prof)[:, keep]
        np.testing.assert_allclose(silo.memberships, exact / exact.sum(axis=1, keepdims=True), rtol=1e-10,
                                   atol=1e-12)
    assert not np.allclose(own.memberships, pooled.memberships)     # the weights mattered


@pytest.mark.parametrize("fields, match", [
    ({"silo_weight_prior": -1.0}, "silo_weight_prior"), ({"silo_weight_prior": float("nan")}, "silo_weight_prior"),
    ({"n_chains": 3}, "n_chains"), ({"checkpoints": np.array([5, 5])}, "checkpoints"),
    ({"anneal": 0.5}, "anneal"), ({"birth_share": 0.5}, "birth_share"), ({"birth_share": -0.1}, "birth_share"),
    ({"birth_share": float("nan")}, "birth_share"),
    ({"names": ("someone-else",)}, "once among them"), ({"start": np.arange(3)[None] + 90}, "start"),
    ({"beta": np.full(3, 0.5)}, "beta"),
])
def test_a_malformed_round_start_is_refused(silo_data, fields, match):
    with pytest.raises(ConfigError, match=match):
        _ready(silo_data).handle(_start(_ready(silo_data), **fields))


def test_the_rounds_are_answered_once_each_and_in_order(silo_data):
    silo = _ready(silo_data)
    reply = silo.handle(_start(silo))
    with pytest.raises(DisclosureError, match="round -1 is next"):
        silo.handle(RoundSweepRequest(round=0, vectors=reply.vector[None], tags=NO_TAGS))
    nxt = silo.handle(RoundSweepRequest(round=-1, vectors=reply.vector[None], tags=NO_TAGS))
    with pytest.raises(DisclosureError, match="round 0 is next"):
        silo.handle(RoundSweepRequest(round=-1, vectors=reply.vector[None], tags=NO_TAGS))
    assert nxt.round == 0
    with pytest.raises(NotFittedError, match="after the pooled chain stopped"):
        silo.handle(RoundFinishRequest())


def test_no_sweep_is_answered_after_the_chain_stopped(silo_data):
    silo = _ready(silo_data)
    r = _alone(silo, checkpoints=np.array([3]))
    with pytest.raises(DisclosureError, match="stopped at round 3; no further sweep"):
        silo.handle(RoundSweepRequest(round=r, vectors=np.zeros((1, 4), dtype=np.uint64), tags=NO_TAGS))


def test_a_deployment_refuses_rounds_without_its_operators_consent_or_keys(silo_data):
    from vcmc.silo.secure_sum import new_key

    silo = _ready(silo_data, SiloPolicy(allowed_strategies=("contingency",)))
    with pytest.raises(DisclosureError, match="does not allow the 'rounds'"):
        silo.handle(_start(silo, secure=True))
    silo = _ready(silo_data, SiloPolicy())                                   # rounds allowed, no keys set
    with pytest.raises(DisclosureError, match="rounds-key"):
        silo.handle(_start(silo, secure=True))
    own, peer = new_key(), new_key()
    keyed = _ready(silo_data, SiloPolicy(budget={"round_start": 10}), rounds_key=own[0],
                   rounds_peers={"b": peer[1], "c": new_key()[1]})
    with pytest.raises(ConfigError, match="budget of round sweeps"):            # the plan within the budget
        keyed.handle(_start(keyed, names=(keyed.name, "b", "c"), start=np.zeros((3, 5), int), secure=True,
                            checkpoints=np.array([30_000])))
    with pytest.raises(DisclosureError, match="plain"):
        keyed.handle(_start(keyed, names=(keyed.name, "b", "c"), start=np.zeros((3, 5), int), secure=False))
    with pytest.raises(DisclosureError, match=r"\['x'\] have no key pinned"):
        keyed.handle(_start(keyed, names=(keyed.name, "b", "x"), start=np.zeros((3, 5), int), secure=True))
    with pytest.raises(DisclosureError, match="at least 3 participants"):
        keyed.handle(_start(keyed, names=(keyed.name, "b"), start=np.zeros((2, 5), int), secure=True))
    assert keyed.handle(_start(keyed, names=(keyed.name, "b", "c"), start=np.zeros((3, 5), int), secure=True)).round \
        == -1


def test_the_round_state_survives_export_and_restore_between_messages(silo_data):
    silo = _ready(silo_data)
    reply = silo.handle(_start(silo, checkpoints=np.array([12]), silo_weight_prior=0.3))
    for r in range(-1, 4):
        reply = silo.handle(RoundSweepRequest(round=r, vectors=reply.vector[None], tags=NO_TAGS))
    fresh = LocalSilo(silo_data, run_key="run-1")
    fresh.restore_state(silo.export_state())          # a Flower message's new process: the state, not the object
    for r in range(4, 13):
        a = silo.handle(RoundSweepRequest(round=r, vectors=reply.vector[None], tags=NO_TAGS))
        b = fresh.handle(RoundSweepRequest(round=r, vectors=reply.vector[None], tags=NO_TAGS))
        np.testing.assert_array_equal(a.vector, b.vector)
        reply = a
    assert reply.stop
    np.testing.assert_array_equal(silo.rounds.summed, fresh.rounds.summed)
    np.testing.assert_equal(silo.handle(RoundResultRequest()).to_arrays(),
                            fresh.handle(RoundResultRequest()).to_arrays())


def test_the_assessment_after_the_rounds_is_at_the_answers_draws_and_equals_an_assess_request(silo_data):
    from vcmc.protocol import AssessRequest
    from vcmc.silo.endpoints.rounds import assessed_draws
    from vcmc.spacing import evenly_spaced

    own = _ready(silo_data)
    _alone(own, checkpoints=np.array([20]))
    request = RoundAssessRequest(n_replicates=4, max_pairs=5)
    reply = own.handle(request)
    asked = assessed_draws(own, request)
    pi, prof = own.chain.draws()
    np.testing.assert_array_equal(asked.pi, pi[evenly_spaced(pi.shape[0], 4)])   # evenly spaced stored draws
    other = _ready(silo_data)
    direct = other.handle(AssessRequest(pi=asked.pi, profiles=asked.profiles, pairs=asked.pairs,
                                        seed_entropy=asked.seed_entropy, spawn_key=asked.spawn_key))
    for name in ("lppd", "p_waic", "n_rows"):
        assert getattr(reply, name) == pytest.approx(getattr(direct, name), rel=1e-12)
    np.testing.assert_array_equal(reply.replicated, direct.replicated)


# -- births (docs/design.md §16, "Births") ---------------------------------------------------------------------

def test_births_put_the_silos_worst_explained_rows_in_their_components(silo_data):
    import dataclasses

    from vcmc.rows.births import misfits
    from vcmc.rows.rounds import birth_vector

    # a minimum cluster size of 2 (the operator's and the server's) so that a 200-row silo's misfits make births
    silo = _ready(silo_data, cfg=dataclasses.replace(CFG, privacy=PrivacyConfig(min_cluster_size=2)),
                  privacy=PrivacyConfig(min_cluster_size=2))
    share = 0.1
    counts = birth_vector(silo, share)
    rows, worst = misfits(silo.codes, silo.n_modalities, silo.local.partition, silo.local.profile_draws.mean(axis=0),
                          share)
    np.testing.assert_array_equal(counts, np.bincount(worst, minlength=silo.n_columns))
    assert counts.sum() == np.ceil(share * silo_data.n_rows)
    k = silo.local.n_clusters
    assert np.sort(counts)[-2] >= 2                     # two columns held by the minimum cluster size of misfits
    reply = silo.handle(_start(silo, birth_share=share, birth_budget=2, n_components=k + 2, min_size=2))
    reply = silo.handle(RoundSweepRequest(round=-1, vectors=reply.vector[None], tags=NO_TAGS))   # births vector
    from vcmc.pooled.chain import MINIMA, minimum_vector

    # the births vector, then the silo's minimum cluster size (one-hot: summed, the participants' largest)
    np.testing.assert_array_equal(reply.vector.view(np.int64)[:-MINIMA], counts)
    np.testing.assert_array_equal(reply.vector.view(np.int64)[-MINIMA:], minimum_vector(2))
    silo.handle(RoundSweepRequest(round=0, vectors=reply.vector[None], tags=NO_TAGS))            # the start
    columns = np.argsort(-counts, kind="stable")[:2]
    assert silo.round_session.births["columns"] == columns.tolist()
    z = silo.rounds.z[0]
    for col, comp in zip(columns, (k, k + 1), strict=True):
        np.testing.assert_array_equal(np.flatnonzero(z == comp), np.sort(rows[worst == col]))
    others = np.setdiff1d(np.arange(silo_data.n_rows), rows[np.isin(worst, columns)])
    np.testing.assert_array_equal(z[others], silo.local.partition[others])


# -- the sweep's kernel ---------------------------------------------------------------------------------------

def _state(codes, n_mod, c):
    from vcmc.mcmc.sampler.layout import sparse_layout
    from vcmc.rows.rounds import RoundState

    lay = sparse_layout(codes.astype(np.int16), profile_offsets(n_mod))
    n = codes.shape[0]
    return RoundState(layout=lay, z=np.zeros((1, n), dtype=np.int64), n_components=c,
                      summed=np.zeros((1, lay.n_patterns, c)), summed_sq=np.zeros((1, lay.n_patterns, c)))


def test_the_sparse_sweep_gives_exact_probabilities_and_counts_with_missing_cells_and_many_levels():
    # the sweep works on the sampler's sparse layout (a row costs its exceptions to the silo's most frequent
    # codes); a missing cell has no term, and the counts equal those of the drawn allocation, cell by cell
    from vcmc.mcmc.sampler.round_kernels import counts, sweep_patterns

    rng = np.random.default_rng(11)
    n_mod = (2, 5, 3, 7)
    codes = np.stack([rng.choice(m, size=300, p=rng.dirichlet(np.ones(m) * 0.5)) for m in n_mod], axis=1)
    codes[rng.random(codes.shape) < 0.1] = -1
    codes[:40] = codes[:1]                                   # repeated rows share a pattern
    off = profile_offsets(n_mod)
    c = 6
    log_pi = np.log(rng.dirichlet(np.ones(c)))
    log_prof = np.log(np.hstack([rng.dirichlet(np.ones(m), size=c) for m in n_mod]))
    st = _state(codes, n_mod, c)
    z = st.z[0]
    nc, ct = sweep_patterns(*st.kernel_layout(), log_pi, log_prof, rng.random(300), True, st.summed[0],
                            st.summed_sq[0], z)
    lp = np.tile(log_pi, (300, 1))
    for q in range(len(n_mod)):
        ok = codes[:, q] >= 0
        lp[ok] += log_prof[:, off[q] + codes[ok, q]].T
    exact = np.exp(lp - lp.max(axis=1, keepdims=True))
    exact /= exact.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(st.summed[0][st.pattern_of_rows()], exact, rtol=1e-10, atol=1e-12)
    want = np.zeros((c, off[-1]))
    for q in range(len(n_mod)):
        ok = codes[:, q] >= 0
        np.add.at(want, (z[ok], off[q] + codes[ok, q]), 1.0)
    np.testing.assert_array_equal(nc, np.bincount(z, minlength=c))
    np.testing.assert_array_equal(ct, want)
    nc2, ct2 = counts(*st.kernel_layout(), z, int(off[-1]), c)
    np.testing.assert_array_equal(nc2, nc)
    np.testing.assert_array_equal(ct2, want)


def test_an_annealed_sweep_draws_from_the_tempered_conditional_and_a_stored_round_refuses_it(silo_data):
    from vcmc.mcmc.sampler.round_kernels import sweep_patterns
    from vcmc.rows import rounds

    n_mod = (2, 3)
    log_pi = np.log([0.5, 0.3, 0.2])
    log_prof = np.log([[0.5, 0.5, 0.2, 0.3, 0.5], [0.6, 0.4, 0.3, 0.3, 0.4], [0.3, 0.7, 0.5, 0.25, 0.25]])
    rng = np.random.default_rng(5)
    # rows with exceptions to the baseline codes (the sparse layout's ratios), at inverse temperatures 3 and 2
    codes = np.zeros((40000, 2), dtype=np.int16)
    codes[20000:] = (1, 2)
    for inv_temp in (3.0, 2.0):
        st = _state(codes, n_mod, 3)
        z = st.z[0]
        sweep_patterns(*st.kernel_layout(), log_pi, log_prof, rng.random(40000), False, st.summed[0],
                       st.summed_sq[0], z, inv_temp)
        for rows, cols in ((slice(0, 20000), (0, 2)), (slice(20000, None), (1, 4))):
            lp = inv_temp * (log_pi + log_prof[:, cols[0]] + log_prof[:, cols[1]])
            want = np.exp(lp - lp.max()) / np.exp(lp - lp.max()).sum()
            np.testing.assert_allclose(np.bincount(z[rows], minlength=3) / 20000, want, atol=0.01)
            plain = np.exp(lp / inv_temp) / np.exp(lp / inv_temp).sum()
            assert want.max() > plain.max() + 0.05                # sharper than the plain conditional
    silo = _ready(silo_data)
    _alone(silo, checkpoints=np.array([4]))
    c = silo.rounds.n_components
    with pytest.raises(ConfigError, match="inverse temperature 1"):
        rounds.sweep(silo, 0, np.log(np.full(c, 1 / c)), silo.chain.stored_prof[0][0], store=True, rng=rng,
                     inverse_temperature=2.0)


def test_the_sweep_keeps_weights_and_likelihoods_far_below_float64s_range_exact():
    # a sparse Dirichlet draw gives an empty component a weight like exp(-760), and 100 conditions a likelihood
    # like exp(-810): neither is a float64, yet they decide the row; the sweep must get it exactly
    from vcmc.mcmc.sampler.round_kernels import sweep_patterns

    n_var, n = 100, 400
    codes = np.zeros((n, n_var), dtype=np.int16)
    codes[0] = 1                                               # one row with every condition, the rest none
    p1 = np.array([np.exp(-8.1), 0.6])                         # P(condition) in components 0 and 1
    log_prof = np.log(np.tile(np.stack([1 - p1, p1], axis=1), (1, n_var)))    # (2, 2 n_var): [absent, present]
    log_pi = np.array([0.0, -760.0])                          # exp(-760) is 0 in float64
    st = _state(codes, (2,) * n_var, 2)
    sweep_patterns(*st.kernel_layout(), log_pi, log_prof, np.full(n, 0.5), True, st.summed[0], st.summed_sq[0],
                   st.z[0])
    lw = log_pi + n_var * np.log(p1)                           # the full row's exact log weights
    want = np.exp(lw - lw.max()) / np.exp(lw - lw.max()).sum()
    got = st.summed[0][st.pattern_of_rows()[0]]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert 0.05 < want[1] < 0.95                               # both components really matter for that row


def test_a_servers_plan_runs_the_rounds_only_where_every_silo_will_take_part(silo_data):
    # the hello says what a silo's operator requires (keys, min-peers), so that the auto plan over Flower falls
    # back to the one-shot pass instead of a start every silo refuses
    from vcmc.flower.server import rounds_ready
    from vcmc.protocol import HelloRequest
    from vcmc.silo.secure_sum import new_key

    keyed = _ready(silo_data, SiloPolicy(min_peers=4), rounds_key=new_key()[0], rounds_peers={})
    hello = keyed.handle(HelloRequest())
    assert hello.rounds_key and hello.min_peers == 4
    assert not rounds_ready({n: hello for n in "abc"}) and rounds_ready({n: hello for n in "abcd"})
    unkeyed = _ready(silo_data, SiloPolicy()).handle(HelloRequest())
    assert not unkeyed.rounds_key and not rounds_ready({"a": hello, "b": hello, "c": hello, "d": unkeyed})
    assert LocalSilo(silo_data).handle(HelloRequest()).min_peers == 1               # the analyst's own session
