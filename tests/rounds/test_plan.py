"""The auto rounds (``aggregation.rounds = 0``, ``vcmc fit --rounds auto``; ``vcmc.rounds.plan``): the
global-informed rounds in the analyst's own session, the one-shot pass where the silos are a deployment's."""

import dataclasses

import numpy as np
import pytest

import vcmc
from vcmc.config import AggregationConfig, FitConfig, PriorConfig, SamplerConfig
from vcmc.federation.transport import InProcessTransport
from vcmc.metrics import adjusted_rand_index
from vcmc.pipeline import run_vcmc
from vcmc.research.simulate import simulate
from vcmc.rounds.plan import AUTO_MAX_ROUNDS, resolve_rounds
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy


def _config(n_iter=2000, **aggregation):
    """Auto rounds unless ``rounds`` is given."""
    return FitConfig(prior=PriorConfig(n_components=12), sampler=SamplerConfig(n_iter=n_iter),
                     aggregation=AggregationConfig(**{"rounds": 0, **aggregation}))


def test_the_default_is_auto():
    assert FitConfig().aggregation.rounds == 0
    assert vcmc.FederatedLatentClassModel().rounds == 0
    assert resolve_rounds(FitConfig(), own_session=True)[0].aggregation.rounds == AUTO_MAX_ROUNDS
    # a deployment makes them where every silo is set up for them, and says why not otherwise
    assert resolve_rounds(FitConfig(), own_session=False, ready=True)[0].aggregation.rounds == AUTO_MAX_ROUNDS
    assert resolve_rounds(FitConfig(), own_session=False)[0].aggregation.rounds == 1


def test_auto_stops_once_settled_from_a_start_of_c_plus():
    config, plan = resolve_rounds(_config(), own_session=True)
    agg = config.aggregation
    assert (agg.rounds, agg.round_components) == (AUTO_MAX_ROUNDS, 12)
    assert plan["requested"] == "auto" and plan["stop_when_settled"] and not plan["secure_sum"]
    assert resolve_rounds(_config(round_components=40), own_session=True)[0].aggregation.round_components == 40
    assert resolve_rounds(_config(), own_session=False, ready=True)[1]["secure_sum"]


@pytest.mark.parametrize("own_session, ready, method", [(False, False, "vcmc"), (True, None, "consensus")])
def test_auto_is_the_one_shot_pass_where_the_rounds_cannot_run(own_session, ready, method):
    config, plan = resolve_rounds(_config(), own_session=own_session, method=method, ready=ready)
    assert config.aggregation.rounds == 1 and plan["rounds"] == 1 and plan["reason"]
    if not own_session:
        assert "rounds-key" in plan["reason"]


def test_an_explicit_number_of_rounds_is_kept():
    for rounds in (1, 7):
        config, plan = resolve_rounds(_config(rounds=rounds), own_session=True)
        assert config.aggregation == _config(rounds=rounds).aggregation
        assert plan["requested"] == rounds and "reason" not in plan and not plan["stop_when_settled"]


def test_the_retired_options_warn_and_are_ignored():
    for name in ("round_split_merge", "round_secure_sum"):
        with pytest.warns(FutureWarning, match=name.replace("_", "-")):
            AggregationConfig(**{name: True})


def test_the_plan_says_what_the_other_mode_makes_of_the_same_options():
    """Every result says what the other mode (a deployment for the analyst's own session, the other way round)
    makes of the same options, whether its answer can differ, and how to get the same answer in both."""
    # the analyst's own session: automatic rounds; a deployment makes them where every silo is set up, else one pass
    _, own = resolve_rounds(_config(), own_session=True)
    other = own["other_mode"]
    assert (other["mode"], other["rounds"], other["rounds_not_set_up"]) == ("deployment", AUTO_MAX_ROUNDS, 1)
    assert other["differs"] and "rounds-key and rounds-peers" in other["note"] and "min-peers" in other["note"]
    assert "vcmc fit --rounds 1 gives" in other["note"] and "--silo-policy" in other["note"]
    assert "reproducible-rounds = true" in other["note"]
    # a deployment set up for the rounds makes the same automatic rounds as the analyst's own session
    _, ready = resolve_rounds(_config(), own_session=False, ready=True)
    assert ready["rounds"] == AUTO_MAX_ROUNDS and ready["other_mode"]["rounds"] == AUTO_MAX_ROUNDS
    assert ready["other_mode"]["differs"] and "--silo-policy" in ready["other_mode"]["note"]
    # one that is not makes the one-shot pass, which vcmc fit gives with --rounds 1
    _, unready = resolve_rounds(_config(), own_session=False, ready=False)
    assert unready["rounds"] == 1 and unready["other_mode"]["rounds"] == AUTO_MAX_ROUNDS
    assert unready["other_mode"]["differs"] and "vcmc fit --rounds 1 --silo-policy" in unready["other_mode"]["note"]
    assert unready["other_mode"]["note"].startswith(unready["reason"])
    for own_session, ready in ((True, None), (False, True), (False, False)):
        one = resolve_rounds(_config(rounds=1), own_session=own_session, ready=ready)[1]["other_mode"]
        assert not one["differs"] and one["rounds"] == 1
        five = resolve_rounds(_config(rounds=5), own_session=own_session, ready=ready)[1]["other_mode"]
        assert five["differs"] and five["rounds"] == 5 and "--silo-policy" in five["note"]
    # explicit rounds in a deployment whose silos have no keys are refused, not replaced by the one-shot pass
    five = resolve_rounds(_config(rounds=5), own_session=True)[1]["other_mode"]
    assert five["rounds_not_set_up"] is None and "refuse" in five["note"]
    assert not resolve_rounds(_config(), own_session=True, method="consensus")[1]["other_mode"]["differs"]


@pytest.fixture(scope="module")
def small_silo_design():
    """As tests/rounds/test_refine.py: a silo of 24 rows whose own posterior has one of the three clusters."""
    w = np.array([[0.4, 0.35, 0.25]] * 3 + [[1 / 3, 1 / 3, 1 / 3]])
    return simulate(n_per_silo=[300, 300, 300, 24], weights=w, n_modalities=[2] * 10, concentration=0.3, rng=1,
                    exact=True)


def _run(data, policy=None, n_iter=600):
    silos = [LocalSilo(s, policy=policy) for s in data.silos]
    transport = InProcessTransport(silos)
    config = FitConfig(sampler=SamplerConfig(n_iter=n_iter), aggregation=AggregationConfig(rounds=0))
    return transport, run_vcmc(transport, config, rng=3)


def test_auto_makes_the_rounds_in_the_analysts_session(small_silo_design):
    transport, result = _run(small_silo_design)
    assert transport.own_session
    assert result.diagnostics["rounds_plan"]["rounds"] == AUTO_MAX_ROUNDS
    rounds = result.diagnostics["rounds"]
    # stopped at a checkpoint, settled
    assert rounds["n_rounds"] in (250, 500, 1000) and rounds["stability"]["reason"] in ("settled", "cap")
    # the small silo's rows are spread over the three clusters, as full-data MCMC would: auto recovers the
    # truth where the one-shot pass (test_refine.py) labels that silo one class
    labels = transport.local_assignments()
    small = np.asarray(labels[small_silo_design.silos[3].name])
    assert np.unique(small).size == 3
    ari = adjusted_rand_index(np.concatenate([labels[s.name] for s in small_silo_design.silos]),
                              np.concatenate(small_silo_design.labels))
    assert ari > 0.9


def test_a_deployments_silos_without_keys_get_the_one_shot_pass_and_are_not_refused(small_silo_design):
    """Silos under an operator's default policy but without the rounds' keys: auto asks for none and says why."""
    transport, result = _run(small_silo_design, policy=SiloPolicy(), n_iter=300)
    assert not transport.own_session and not transport.rounds_ready
    plan = result.diagnostics["rounds_plan"]
    assert plan["requested"] == "auto" and plan["rounds"] == 1 and "rounds-key" in plan["reason"]
    assert "rounds" not in result.diagnostics or not result.diagnostics["rounds"]


def test_the_plan_is_in_result_json(small_silo_design, tmp_path):
    import json

    from vcmc.report import write_outputs

    _, result = _run(small_silo_design, n_iter=100)
    paths = write_outputs(result, tmp_path, schema=small_silo_design.schema)
    saved = json.loads(paths["result"].read_text())
    assert saved["diagnostics"]["rounds_plan"]["rounds"] == AUTO_MAX_ROUNDS


def test_a_silo_built_with_the_analysts_policy_is_in_their_session(small_silo_design):
    own = LocalSilo(small_silo_design.silos[0])
    assert own.own_session
    assert not LocalSilo(small_silo_design.silos[0], policy=dataclasses.replace(SiloPolicy.own_data(),
                                                                                 max_iterations=10)).own_session


def test_the_rounds_show_a_bar_when_asked(small_silo_design, capsys):
    silos = [LocalSilo(s) for s in small_silo_design.silos]
    config = FitConfig(sampler=SamplerConfig(n_iter=100), aggregation=AggregationConfig(rounds=40))
    run_vcmc(InProcessTransport(silos), config, rng=3, show_progress=True)
    err = capsys.readouterr().err
    assert "Global-informed rounds" in err and "39/39" in err
    run_vcmc(InProcessTransport([LocalSilo(s) for s in small_silo_design.silos]), config, rng=3,
             show_progress=False)
    assert "Global-informed rounds" not in capsys.readouterr().err


def test_the_auto_plan_runs_two_chains_the_second_annealed_and_an_explicit_plan_one(small_silo_design):
    from vcmc.rounds.stage import AUTO_ANNEAL, AUTO_CHAINS, plan_of

    silos = [LocalSilo(s) for s in small_silo_design.silos]
    one_shot_config = FitConfig(sampler=SamplerConfig(n_iter=300), aggregation=AggregationConfig(rounds=1))
    result = run_vcmc(InProcessTransport(silos), one_shot_config, rng=3)          # the one-shot pass: the matching
    config = resolve_rounds(_config(n_iter=300), own_session=True)[0]
    auto = plan_of(result, config, secure=False, root=np.random.SeedSequence(1), stop=True)
    assert auto["n_chains"] == AUTO_CHAINS == 2 and auto["anneal"] == AUTO_ANNEAL
    assert list(auto["checkpoints"]) == [250, 500, 1000] and auto["anneal_until"] == 63
    fixed = plan_of(result, resolve_rounds(_config(n_iter=300, rounds=40), own_session=True)[0], secure=False,
                    root=np.random.SeedSequence(1), stop=False)
    assert fixed["n_chains"] == 1 and fixed["anneal"] == 1.0 and list(fixed["checkpoints"]) == [40]
