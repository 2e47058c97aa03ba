"""The budget across runs: a server cannot reset the per-run budgets by starting new runs without limit."""

import json

import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.flower.client import policy_from_node_config
from vcmc.protocol import SiloConfig, SummarizeRequest
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy
from vcmc.silo.run_ledger import LEDGER_NAME, WINDOW_SECONDS, admit_run

CFG = FitConfig(sampler=SamplerConfig(n_iter=200, burn_in=100, thin=5),
                postprocess=PostprocessConfig(min_cluster_fraction=0.05))


def _summarize(silo):
    return silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(CFG), n_silos=1, seed_entropy=3,
                                        spawn_key=(0, 0)))


@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=200).silos[0]


def test_runs_beyond_the_operators_daily_budget_are_refused(silo_data, tmp_path):
    policy = SiloPolicy(max_runs_per_day=2, budget_dir=str(tmp_path))

    def silo(run):          # a fresh ClientApp of each run (its per-run state starts empty)
        return LocalSilo(silo_data, privacy=PrivacyConfig(), policy=policy, run_key=run)

    _summarize(silo("run-1"))
    _summarize(silo("run-2"))
    _summarize(silo("run-1"))                 # a retried summarize of a recorded run is not a new run
    with pytest.raises(DisclosureError, match=r"at most 2 runs in 24 hours \(max-runs-per-day\)"):
        _summarize(silo("run-3"))
    ledger = json.loads((tmp_path / LEDGER_NAME).read_text())
    assert [r["run"] for r in ledger["runs"]] == ["run-1", "run-2"]      # run keys and times only


def test_runs_older_than_the_window_no_longer_count(tmp_path):
    admit_run(tmp_path, "old", 1, silo="s", now=1000.0)
    with pytest.raises(DisclosureError):
        admit_run(tmp_path, "new", 1, silo="s", now=1000.0 + WINDOW_SECONDS - 1)
    assert admit_run(tmp_path, "new", 1, silo="s", now=1000.0 + WINDOW_SECONDS + 1) == 1
    assert [r["run"] for r in json.loads((tmp_path / LEDGER_NAME).read_text())["runs"]] == ["new"]


def test_a_damaged_ledger_is_an_error_for_the_operator(tmp_path):
    (tmp_path / LEDGER_NAME).write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read"):
        admit_run(tmp_path, "r", 3, silo="s")


def test_node_config_keys(tmp_path):
    policy = policy_from_node_config({"max-runs-per-day": "5", "budget-dir": str(tmp_path)})
    assert policy.max_runs_per_day == 5 and policy.budget_dir == str(tmp_path)
    with pytest.raises(ConfigError, match="needs budget-dir"):
        policy_from_node_config({"max-runs-per-day": 5})
    with pytest.raises(ConfigError, match="absolute path"):
        policy_from_node_config({"max-runs-per-day": 5, "budget-dir": "relative/dir"})
    assert SiloPolicy.own_data().max_runs_per_day is None          # the analyst's own session: no limit
