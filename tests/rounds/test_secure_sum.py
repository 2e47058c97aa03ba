"""The rounds under secure aggregation: the same chain, bit for bit, in the analyst's own session and in a
deployment, and the server never receives a silo's table."""

import numpy as np
import pytest

pytest.importorskip("cryptography")

from vcmc.config import config_from_mapping  # noqa: E402
from vcmc.exceptions import ConfigError  # noqa: E402
from vcmc.federation.transport import InProcessTransport  # noqa: E402
from vcmc.pipeline import run_vcmc  # noqa: E402
from vcmc.protocol.rounds import RoundCountsReply, RoundMaskedCountsReply  # noqa: E402
from vcmc.silo.local import LocalSilo  # noqa: E402
from vcmc.silo.policy import SiloPolicy  # noqa: E402

BASE = {"sampler.n-iter": 300, "aggregation.max-iter": 60, "privacy.min-cluster-size": 5, "aggregation.rounds": 8,
        "assessment.enabled": False}


@pytest.fixture(scope="module")
def sim():
    from vcmc.research.simulate import simulate_design

    return simulate_design("nested", "easy", rng=3, n_per_silo=120)


class _Spy(InProcessTransport):
    """Records the type of every reply the server receives."""

    def __init__(self, silos):
        super().__init__(silos)
        self.received: list[type] = []

    def call(self, requests, **kwargs):
        replies = super().call(requests, **kwargs)
        self.received.extend(type(r) for r in replies.values())
        return replies


def _run(sim, secure: bool, policy=None):
    cfg = config_from_mapping({**BASE, "aggregation.round-secure-sum": secure})
    silos = [LocalSilo(d, policy=policy) for d in sim.silos]
    with _Spy(silos) as tr:
        return run_vcmc(tr, cfg, rng=11), tr.received


def _same(a, b):
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.profile_draws, b.profile_draws)
    for x, y in zip(a.assignments, b.assignments, strict=True):
        np.testing.assert_array_equal(x, y)
    ra, rb = a.diagnostics["rounds"]["per_round"], b.diagnostics["rounds"]["per_round"]
    assert [(r["k"], r["log_joint"]) for r in ra] == [(r["k"], r["log_joint"]) for r in rb]


def test_secure_rounds_are_the_plain_rounds_and_the_server_sees_no_silos_table(sim):
    plain, plain_seen = _run(sim, False)
    secure, seen = _run(sim, True)
    _same(plain, secure)
    assert secure.diagnostics["rounds"]["secure_sum"] and not plain.diagnostics["rounds"]["secure_sum"]
    assert RoundCountsReply in plain_seen and RoundCountsReply not in seen
    assert seen.count(RoundMaskedCountsReply) == BASE["aggregation.rounds"] * len(sim.silos)


def test_in_a_deployment_the_masked_tables_keep_the_minimum_size_and_give_the_same_chain(sim):
    """Operators allowing only secure rounds get the chain of operators allowing plain ones: each silo's
    table is protected (components under the minimum withheld) before it is masked."""
    plain, _ = _run(sim, False, SiloPolicy(allowed_strategies=("contingency", "rounds")))
    secure, _ = _run(sim, True, SiloPolicy(allowed_strategies=("contingency", "secure-rounds")))
    _same(plain, secure)
    own, _ = _run(sim, False)
    # the minimum size changed the deployment's chain (the test would not tell the two apart otherwise)
    assert [r["log_joint"] for r in own.diagnostics["rounds"]["per_round"]] != [
        r["log_joint"] for r in secure.diagnostics["rounds"]["per_round"]]


def test_a_plain_run_is_refused_by_operators_who_allow_only_secure_rounds_before_sampling(sim):
    """The summarize request announces the rounds, so the refusal comes at the run's first request."""
    from vcmc.exceptions import SiloFailure

    with pytest.raises(SiloFailure, match=r"summarize.*only under secure aggregation.*announces plain rounds"):
        _run(sim, False, SiloPolicy(allowed_strategies=("contingency", "secure-rounds")))


def test_secure_sum_and_split_merge_together_are_refused_before_sampling():
    with pytest.raises(ConfigError, match="round_secure_sum"):
        config_from_mapping({**BASE, "aggregation.round-secure-sum": True, "aggregation.round-split-merge": True})
