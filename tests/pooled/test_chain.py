"""The pooled chain every silo runs (vcmc.pooled.chain): its windows, what it stores, when it stops, and that it
is a function of the seed and the pooled sums alone."""

import numpy as np
import pytest

from vcmc.model import beta_per_column
from vcmc.pooled.chain import ChainPlan, PooledChain, Seeds, choose_births, doubling, settled
from vcmc.result_builder import one_cluster_silo_warnings

N_MOD = (2, 3, 2)


def _plan(**kw):
    base = {"n_components": 4, "alpha": 0.01, "beta_cols": tuple(beta_per_column(0.5, N_MOD)), "n_modalities": N_MOD,
            "checkpoints": (40,), "stop": False, "max_stored": 500, "min_size": 5}
    return ChainPlan(**{**base, **kw})


def _toy_counts(rng, n=300):
    """A stand-in for the silos' half: allocate n rows of two true clusters by the drawn weights and profiles."""
    truth = rng.random((n, 3)) < np.array([[0.9, 0.2, 0.8]])
    x = np.stack([truth[:, 0], (truth[:, 1] * 2).astype(int), truth[:, 2]], axis=1).astype(int)
    off = np.cumsum([0, *N_MOD])

    def counts(draw):
        lp = np.tile(draw.log_pi, (n, 1))
        for q in range(3):
            lp += draw.log_profiles[:, off[q] + x[:, q]].T
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        z = np.array([rng.choice(4, p=row / row.sum()) for row in p])
        ct = np.zeros((4, off[-1]))
        for q in range(3):
            np.add.at(ct, (z, off[q] + x[:, q]), 1.0)
        return np.bincount(z, minlength=4).astype(float), ct

    z0 = rng.integers(0, 4, n)
    ct0 = np.zeros((4, off[-1]))
    for q in range(3):
        np.add.at(ct0, (z0, off[q] + x[:, q]), 1.0)
    return counts, (np.bincount(z0, minlength=4).astype(float), ct0)


def _run(plan, seed=0, n_chains=1):
    rng = np.random.default_rng(seed)
    counts, start = _toy_counts(rng)
    chain = PooledChain(plan, Seeds(123, (1,)))
    state = [start] * n_chains
    while (draws := chain.advance(state)) is not None:
        state = [counts(d) for d in draws]
    return chain


def test_the_checkpoints_double_to_the_cap_and_the_windows_are_the_second_halves():
    assert doubling(250, 1000) == (250, 500, 1000) and doubling(250, 600) == (250, 500, 600)
    plan = _plan(checkpoints=(250, 500, 1000))
    assert [plan.window(j) for j in range(3)] == [(125, 250), (250, 500), (500, 1000)]
    stored = plan.stored_rounds(2)
    assert len(stored) == 500 and min(stored) == 501 and max(stored) == 1000
    assert len(_plan(checkpoints=(1000,), max_stored=100).stored_rounds(0)) == 100


def test_a_fixed_plan_runs_to_its_last_round_and_keeps_its_second_half():
    chain = _run(_plan(checkpoints=(40,)))
    assert chain.stopped and chain.round == 40 and len(chain.trace_k[0]) == 40
    assert chain.n_kept[0] == 20 and len(chain.stored_pi[0]) == 20 and chain.n_sized == 20
    pi, prof = chain.draws()
    assert pi.shape == (20, chain.clusters().size) and np.allclose(pi.sum(axis=1), 1.0)
    assert prof.shape == (20, chain.clusters().size, sum(N_MOD))


def test_a_settled_chain_stops_at_its_first_checkpoint_and_an_unsettled_one_at_the_cap():
    chain = _run(_plan(checkpoints=(60, 120, 240), stop=True))
    assert chain.stopped and chain.reason == "settled" and chain.stability["stable"]
    assert chain.round in (60, 120, 240) and len(chain.trace_k[0]) == chain.round
    short = _run(_plan(checkpoints=(4, 8), stop=True))           # windows too short to judge: to the cap
    assert short.round == 8 and short.reason == "cap" and not short.stability["stable"]


def test_the_chain_is_a_function_of_its_seed_and_the_sums_alone_and_survives_export():
    plan = _plan(checkpoints=(30,))
    rng = np.random.default_rng(4)
    counts, start = _toy_counts(rng)
    a, b = PooledChain(plan, Seeds(9)), PooledChain(plan, Seeds(9))
    da, db = a.advance([start]), b.advance([start])
    for _ in range(10):
        nxt = counts(da[0])
        da = a.advance([nxt])
        b = PooledChain.restore(plan, Seeds(9), b.export())        # a new process per message
        db = b.advance([nxt])
        np.testing.assert_array_equal(da[0].log_profiles, db[0].log_profiles)
        assert da[0].store == db[0].store
    other = PooledChain(plan, Seeds(10))
    assert not np.array_equal(other.advance([start])[0].log_profiles, PooledChain(plan, Seeds(9)).advance([start])[0]
                              .log_profiles)


def test_two_chains_must_agree_and_the_answer_is_the_one_of_higher_posterior():
    chain = _run(_plan(checkpoints=(60,), n_chains=2), n_chains=2)
    assert "chains_agree" in chain.stability
    means = [np.mean(t[30:60]) for t in chain.trace_lj]
    assert chain.chosen() == int(np.argmax(means))


def test_settled_windows_are_stable_and_drifting_ones_are_not():
    rng = np.random.default_rng(0)
    flat = rng.normal(-1000, 3, 400)
    assert settled(flat[None], np.full((1, 400), 5))["stable"]
    drifting = flat + np.linspace(0, 60, 400)
    got = settled(drifting[None], np.full((1, 400), 5))
    assert not got["stable"] and "did not settle" in got["said"] and "--rounds" in got["said"]
    assert not settled(flat[None], np.r_[[6] * 200, [5] * 200][None])["stable"]     # K still changing
    assert not settled(flat[None, :12], np.full((1, 12), 5))["stable"]              # too few kept rounds


def test_a_checkpoint_imports_no_plotting_library():
    """The rule runs in the ClientApp that answers a checkpoint's round: its R-hat is arviz_stats's, without
    ArviZ's plotting half and matplotlib (seconds of a ClientApp's start-up)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\nfrom vcmc.pooled.chain import settled, PooledChain\n"
            "x = np.random.default_rng(0).normal(size=(2, 200))\n"
            "settled(x, np.full((2, 200), 3)); PooledChain._chains_agree(x, np.full((2, 200), 3))\n"
            "print(sorted(m for m in ('arviz', 'matplotlib', 'arviz_plots') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_births_are_the_columns_held_by_the_minimum_of_misfits_most_first():
    assert choose_births(np.array([3, 12, 0, 30, 10]), budget=2, min_size=10) == [3, 1]
    assert choose_births(np.array([3, 12, 0, 30, 10]), budget=5, min_size=10) == [3, 1, 4]
    assert choose_births(np.array([3, 4]), budget=2, min_size=10) == []


def test_a_silo_labelled_one_class_is_named():
    counts = np.array([[10, 12, 0], [0, 30, 0], [5, 5, 5]])
    words = one_cluster_silo_warnings(counts, ("a", "b", "c"))
    assert len(words) == 1 and "'b'" in words[0] and "(2)" in words[0]
    assert one_cluster_silo_warnings(np.array([[4], [6]]), ("a", "b")) == []     # one cluster in all: nothing to say


def test_a_malformed_plan_is_refused():
    with pytest.raises(ValueError, match="checkpoints"):
        _plan(checkpoints=(10, 10))
    with pytest.raises(ValueError, match="n_chains"):
        _plan(n_chains=3)


def test_the_rules_k_counts_the_components_of_the_minimum_size_and_every_checkpoint_is_recorded():
    chain = _run(_plan(checkpoints=(30, 60, 120), stop=False))
    kbig, k = np.asarray(chain.trace_kbig[0]), np.asarray(chain.trace_k[0])
    assert kbig.shape == k.shape and np.all(kbig <= k)
    assert [h["round"] for h in chain.history] == [30, 60, 120]
    assert all({"stable", "rhat", "k_halves"} <= set(h) for h in chain.history)
    back = PooledChain.restore(chain.plan, chain.seeds, chain.export())
    assert back.history == chain.history and back.trace_kbig == chain.trace_kbig


def test_silos_sharing_a_process_get_the_same_draw_whether_or_not_it_was_remembered():
    from vcmc.pooled import chain as module

    plan = _plan(checkpoints=(20,))
    rng = np.random.default_rng(5)
    counts, start = _toy_counts(rng)
    a = PooledChain(plan, Seeds(3))
    draws = a.advance([start])
    nxt = counts(draws[0])
    first = a.advance([nxt])
    module._DRAWS.clear()
    b = PooledChain(plan, Seeds(3))
    b.advance([start])
    again = b.advance([nxt])
    np.testing.assert_array_equal(first[0].log_profiles, again[0].log_profiles)
    again[0].log_profiles[:] = 0.0                    # a silo's copy: changing it changes nobody else's
    c = PooledChain(plan, Seeds(3))
    c.advance([start])
    np.testing.assert_array_equal(c.advance([nxt])[0].log_profiles, first[0].log_profiles)


def test_silos_sharing_a_process_share_one_chain_advanced_once_per_round_to_the_same_answer():
    """The analyst's own session: the silos of one process hold one chain (shared_chain); each advances it with
    the round's counts, the first call draws and the others get the same draws, to the stop; a silo handed other
    counts is refused; a later run under the same key starts its own chain."""
    from vcmc.pooled.chain import shared_chain

    plan = _plan(checkpoints=(12,))
    rng = np.random.default_rng(8)
    counts, start = _toy_counts(rng)
    run = ("context", "a", "b")
    a, b = shared_chain(plan, Seeds(3), run), shared_chain(plan, Seeds(3), run)
    assert a is b
    alone = PooledChain(plan, Seeds(3))                # what one silo alone computes
    state, r = [start], 1
    while True:
        first, second, own = a.advance(state, r), b.advance(state, r), alone.advance(state)
        if first is None:
            assert second is None and own is None
            break
        np.testing.assert_array_equal(first[0].log_profiles, second[0].log_profiles)
        np.testing.assert_array_equal(first[0].log_profiles, own[0].log_profiles)
        second[0].log_profiles[:] = 0.0                # a silo's copy: changing it changes nobody else's
        state, r = [counts(first[0])], r + 1
    assert a.stopped and a.round == alone.round == 12 and a.trace_lj == alone.trace_lj
    assert len(a.trace_k[0]) == 12                     # advanced once per round, not once per silo
    with pytest.raises(ValueError, match="different pooled counts"):
        a.advance([(state[0][0] + 1, state[0][1])], 12)
    assert shared_chain(plan, Seeds(3), run) is not a and shared_chain(plan, Seeds(3), run).fresh


def test_of_two_chains_only_the_second_is_annealed_and_only_in_its_burn_in():
    plan = _plan(checkpoints=(40,), n_chains=2, anneal=2.0, anneal_until=10)
    rng = np.random.default_rng(2)
    counts, start = _toy_counts(rng)
    chain = PooledChain(plan, Seeds(8))
    state, temps = [start, start], []
    while (draws := chain.advance(state)) is not None:
        temps.append([d.inverse_temperature for d in draws])
        state = [counts(d) for d in draws]
    temps = np.asarray(temps)                      # rounds 2, 3, ...
    assert np.all(temps[:, 0] == 1.0)
    assert np.all(temps[:9, 1] == 2.0) and np.all(temps[9:, 1] == 1.0)
    single = PooledChain(_plan(checkpoints=(40,), anneal=2.0, anneal_until=10), Seeds(8))
    assert single.advance([start])[0].inverse_temperature == 2.0     # one chain: it is the annealed one


def test_the_common_minimum_is_the_participants_largest():
    from vcmc.pooled.chain import MINIMA, common_minimum, minimum_vector

    pooled = minimum_vector(10) + minimum_vector(25) + minimum_vector(10)
    assert pooled.shape == (MINIMA,) and common_minimum(pooled) == 25
    with pytest.raises(ValueError, match="at most"):
        minimum_vector(MINIMA + 1)
