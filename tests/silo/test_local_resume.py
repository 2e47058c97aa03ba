"""A silo with a state folder answers a repeated summarize request without re-running its sampler."""

import json

import numpy as np
import pytest

import vcmc.silo.apply as apply_mod
from vcmc.config import FitConfig, SamplerConfig
from vcmc.protocol import AssignRequest, SummarizeRequest
from vcmc.silo.local import LocalSilo
from vcmc.simulate import simulate_design


@pytest.fixture(scope="module")
def silo_data():
    return simulate_design("nested", "easy", rng=4, n_per_silo=300).silos[0]


def request(seed=1):
    cfg = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200))
    return SummarizeRequest(config_json=json.dumps(cfg.to_dict()), n_silos=4, seed_entropy=seed, spawn_key=(0, 0))


def test_repeated_request_is_served_from_the_state_folder(tmp_path, silo_data, monkeypatch):
    first = LocalSilo(silo_data, state_dir=tmp_path)
    s1 = first.summarize(request())
    assert len(list(tmp_path.glob("*.npz"))) == 1

    def boom(*a, **k):
        raise AssertionError("the sampler must not run again")

    monkeypatch.setattr(apply_mod, "run_apply_step", boom)
    again = LocalSilo(silo_data, state_dir=tmp_path)
    s2 = again.summarize(request())
    np.testing.assert_array_equal(s1.pi_draws, s2.pi_draws)
    np.testing.assert_array_equal(s1.counts, s2.counts)
    # the restored silo can answer the later requests (its local partition came back too)
    reply = again.assign(AssignRequest(assignment=np.arange(s2.n_clusters), n_global=s2.n_clusters))
    np.testing.assert_array_equal(reply.counts, s2.cluster_sizes)
    # another seed is another request: not served from the folder
    with pytest.raises(AssertionError, match="must not run again"):
        again.summarize(request(seed=2))


def test_damaged_state_file_is_recomputed(tmp_path, silo_data):
    silo = LocalSilo(silo_data, state_dir=tmp_path)
    s1 = silo.summarize(request())
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not an npz")
    s2 = LocalSilo(silo_data, state_dir=tmp_path).summarize(request())
    np.testing.assert_array_equal(s1.pi_draws, s2.pi_draws)
