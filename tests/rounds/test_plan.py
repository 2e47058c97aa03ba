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
from vcmc.silo.gate import SiloPolicy
from vcmc.silo.local import LocalSilo


def _config(n_iter=2000, **aggregation):
    """Auto rounds unless ``rounds`` is given."""
    return FitConfig(prior=PriorConfig(n_components=12), sampler=SamplerConfig(n_iter=n_iter),
                     aggregation=AggregationConfig(**{"rounds": 0, **aggregation}))


def test_the_default_is_auto():
    assert FitConfig().aggregation.rounds == 0
    assert vcmc.FederatedLatentClassModel().rounds == 0
    assert resolve_rounds(FitConfig(), own_session=True)[0].aggregation.rounds == AUTO_MAX_ROUNDS
    assert resolve_rounds(FitConfig(), own_session=False)[0].aggregation.rounds == 1


def test_auto_in_the_analysts_session_is_the_measured_configuration():
    config, plan = resolve_rounds(_config(), own_session=True)
    agg = config.aggregation
    assert (agg.rounds, agg.round_components, agg.round_split_merge) == (2000, 12, True)
    assert plan["requested"] == "auto" and plan["rounds"] == 2000 and plan["split_merge"]
    # the silos' iterations, at most AUTO_MAX_ROUNDS
    assert resolve_rounds(_config(n_iter=50_000), own_session=True)[0].aggregation.rounds == AUTO_MAX_ROUNDS
    # what the analyst set is kept: the start's components, and secure sums (which cannot carry the moves)
    assert resolve_rounds(_config(round_components=40), own_session=True)[0].aggregation.round_components == 40
    secure = resolve_rounds(_config(round_secure_sum=True), own_session=True)[0].aggregation
    assert secure.round_secure_sum and not secure.round_split_merge


@pytest.mark.parametrize("own_session, method", [(False, "vcmc"), (True, "consensus")])
def test_auto_is_the_one_shot_pass_in_a_deployment_and_for_other_methods(own_session, method):
    config, plan = resolve_rounds(_config(), own_session=own_session, method=method)
    assert config.aggregation.rounds == 1 and not config.aggregation.round_split_merge
    assert plan["rounds"] == 1 and plan["reason"]
    if not own_session:
        assert "consent" in plan["reason"] and "--rounds" in plan["reason"]


def test_an_explicit_number_of_rounds_is_kept():
    for rounds in (1, 7):
        config, plan = resolve_rounds(_config(rounds=rounds), own_session=True)
        assert config.aggregation == _config(rounds=rounds).aggregation
        assert plan["requested"] == rounds and "reason" not in plan


def test_the_plan_says_what_the_other_mode_makes_of_the_same_options():
    """A result whose options would give another answer in the other mode (the analyst's own session against a
    deployment) says so, and how to get the same answer in both."""
    _, own = resolve_rounds(_config(), own_session=True)
    assert own["other_mode"]["mode"] == "deployment" and own["other_mode"]["rounds"] == 1
    assert own["other_mode"]["differs"] and "--rounds 1" in own["other_mode"]["note"]
    _, deployed = resolve_rounds(_config(), own_session=False)
    assert deployed["other_mode"] == {"mode": "own session", "rounds": 2000, "differs": True,
                                      "note": deployed["other_mode"]["note"]}
    assert "vcmc fit --rounds 1" in deployed["other_mode"]["note"]
    for own_session in (True, False):
        assert not resolve_rounds(_config(rounds=1), own_session=own_session)[1]["other_mode"]["differs"]
        rounds = resolve_rounds(_config(rounds=5), own_session=own_session)[1]["other_mode"]
        assert rounds["differs"] and "--rounds 5 --node-config" in rounds["note"]
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
    assert result.diagnostics["rounds_plan"]["rounds"] == 600
    rounds = result.diagnostics["rounds"]
    assert rounds["n_rounds"] == 600 and rounds["split_merge"]["merge"]["proposed"] > 0
    # the small silo's rows are spread over the three clusters, as full-data MCMC would: auto recovers the
    # truth where the one-shot pass (test_refine.py) labels that silo one class
    labels = transport.local_assignments()
    small = np.asarray(labels[small_silo_design.silos[3].name])
    assert np.unique(small).size == 3
    ari = adjusted_rand_index(np.concatenate([labels[s.name] for s in small_silo_design.silos]),
                              np.concatenate(small_silo_design.labels))
    assert ari > 0.9


def test_a_deployments_silos_get_the_one_shot_pass_from_auto_and_are_not_refused(small_silo_design):
    """Silos under an operator's default policy (only the contingency strategy) would refuse announced
    rounds at the summarize request; auto asks for none and says why."""
    transport, result = _run(small_silo_design, policy=SiloPolicy(), n_iter=300)
    assert not transport.own_session
    plan = result.diagnostics["rounds_plan"]
    assert plan["requested"] == "auto" and plan["rounds"] == 1 and "consent" in plan["reason"]
    assert "rounds" not in result.diagnostics or not result.diagnostics["rounds"]


def test_the_plan_is_in_result_json(small_silo_design, tmp_path):
    import json

    from vcmc.report import write_outputs

    _, result = _run(small_silo_design, n_iter=100)
    paths = write_outputs(result, tmp_path, schema=small_silo_design.schema)
    saved = json.loads(paths["result"].read_text())
    assert saved["diagnostics"]["rounds_plan"]["rounds"] == 100


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


def test_auto_is_the_explicit_configuration_to_the_bit(small_silo_design):
    """What the docs measured as `--rounds R --set round-components=C+ --set round-split-merge=true` is what
    auto runs (docs/results/real/rounds/: the figures of the one hold for the other)."""
    _, auto = _run(small_silo_design, n_iter=120)
    explicit = FitConfig(sampler=SamplerConfig(n_iter=120), aggregation=AggregationConfig(
        rounds=120, round_components=FitConfig().prior.n_components, round_split_merge=True))
    transport = InProcessTransport([LocalSilo(s) for s in small_silo_design.silos])
    same = run_vcmc(transport, explicit, rng=3)
    np.testing.assert_array_equal(auto.pi_draws, same.pi_draws)
    np.testing.assert_array_equal(auto.partition_counts, same.partition_counts)
    assert auto.diagnostics["rounds_plan"]["requested"] == "auto"
    assert same.diagnostics["rounds_plan"]["requested"] == 120
