"""Normal runs unchanged: in the analyst's own session, with no suppression, rounding or noise set, the gate
changes nothing the sampler, the matching, the aggregation or the assessment see.

The same fit (same seed, in-process) is run through ``LocalSilo.handle`` as it is and with the gate's two
doors bypassed (``Gate.admit`` and ``Gate.release`` returning the request and the reply untouched): every
result, to the last bit, is the same. (``benchmarks/normal_runs_unchanged.py`` compares ``vcmc demo`` of
two commits file by file.)
"""

import dataclasses

import numpy as np
import pytest

from vcmc.api import fit
from vcmc.config import PrivacyConfig
from vcmc.silo.gate import Gate


def _fit(silos, config):
    return fit(silos, config=config, rng=7, transport="inprocess")


@pytest.fixture(scope="module")
def config(short_config):
    # the one-shot pass: the rounds' draws can hold an empty component's profile entry under the gate's floor
    # (1e-12), which the gate raises in every session, so with them the bypassed run differs in the last bits
    cfg = dataclasses.replace(short_config, sampler=dataclasses.replace(short_config.sampler, n_iter=600,
                                                                        burn_in=300),
                              aggregation=dataclasses.replace(short_config.aggregation, rounds=1))
    assert cfg.privacy == dataclasses.replace(PrivacyConfig(), dp_epsilon=None, suppress_cells_below=0, round_to=1)
    return cfg


def test_the_gate_changes_nothing_of_an_own_data_run(nested_easy, config, monkeypatch):
    through = _fit(nested_easy, config)
    with monkeypatch.context() as m:
        m.setattr(Gate, "admit", lambda self, request: request)
        m.setattr(Gate, "release", lambda self, request, reply: reply)
        bypassed = _fit(nested_easy, config)
    for field in ("weights", "profiles", "partition_counts", "pi_draws", "profile_draws", "weights_ci",
                  "profiles_ci"):
        np.testing.assert_array_equal(getattr(through, field), getattr(bypassed, field), err_msg=field)
    for a, b in zip(through.assignments, bypassed.assignments, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(through.memberships, bypassed.memberships, strict=True):
        np.testing.assert_array_equal(a, b)
    # the assessment (WAIC sums, predictive checks, the posterior of K) too
    assert through.diagnostics.get("waic") == bypassed.diagnostics.get("waic")
    assert through.diagnostics.get("n_clusters_posterior") == bypassed.diagnostics.get("n_clusters_posterior")
    assert through.diagnostics.get("ppc") == bypassed.diagnostics.get("ppc")
    assert "waic" in through.diagnostics or "assessment" in through.diagnostics


def test_the_bypass_is_real_a_rounded_run_differs(nested_easy, config, monkeypatch):
    # the comparison above can fail: with rounding set the gate changes the replies (rounded counts, WAIC on
    # its grid, profile draws from the protected table), and the bypassed run differs
    rounded = dataclasses.replace(config, privacy=dataclasses.replace(config.privacy, round_to=5))
    through = _fit(nested_easy, rounded)
    with monkeypatch.context() as m:
        m.setattr(Gate, "admit", lambda self, request: request)
        m.setattr(Gate, "release", lambda self, request, reply: reply)
        bypassed = _fit(nested_easy, rounded)
    assert through.diagnostics["waic"] != bypassed.diagnostics["waic"]
    assert not np.array_equal(through.profile_draws, bypassed.profile_draws)
