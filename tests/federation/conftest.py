"""Shared fixtures of the federation tests: four small simulated silos and very short chains."""

import json

import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig

N_ROWS = 137   # prime, and equal to no other dimension of any message (the row-level test relies on it)


@pytest.fixture(scope="session")
def small_sim():
    from vcmc.simulate import simulate_design

    return simulate_design("nested", "easy", rng=21, n_per_silo=N_ROWS)


@pytest.fixture(scope="session")
def tiny_config():
    """30 kept draws per silo; enough for every message type, not for good clusters."""
    return FitConfig(sampler=SamplerConfig(n_iter=300, burn_in=150, thin=5),
                     postprocess=PostprocessConfig(min_cluster_fraction=0.05),
                     privacy=PrivacyConfig(min_cluster_size=5))


@pytest.fixture(scope="session")
def summarize_request():
    """``summarize_request(config, index)``: the request the pipeline sends to silo ``index``."""
    from vcmc.federation.protocol import SummarizeRequest

    def make(config, index=0, n_silos=4, entropy=2024):
        return SummarizeRequest(config_json=json.dumps(config.to_dict()), n_silos=n_silos,
                                seed_entropy=entropy, spawn_key=(0, index))

    return make
