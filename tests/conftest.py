"""Shared fixtures: small simulated datasets and short-chain configurations used across the suite."""


import numpy as np
import pytest

from vcmc.config import FitConfig, PostprocessConfig, PrivacyConfig, SamplerConfig


@pytest.fixture(scope="session")
def nested_easy():
    """The paper's nested design, easy separability, 4 silos of 1,000 (seeded)."""
    from vcmc.research.simulate import simulate_design

    return simulate_design("nested", "easy", rng=11)


@pytest.fixture(scope="session")
def short_config():
    """Short chains that still recover well-separated clusters (checked by the pipeline tests)."""
    return FitConfig(sampler=SamplerConfig(n_iter=3000, burn_in=1500, thin=5))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# --- small silos and very short chains for the boundary, transport and protocol tests
N_ROWS = 137   # prime, and equal to no other dimension of any message (the row-level test relies on it)


@pytest.fixture(scope="session")
def small_sim():
    from vcmc.research.simulate import simulate_design

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
    from vcmc.protocol import SiloConfig, SummarizeRequest

    def make(config, index=0, n_silos=4, entropy=2024):
        return SummarizeRequest(config=SiloConfig.from_fit_config(config), n_silos=n_silos,
                                seed_entropy=entropy, spawn_key=(0, index))

    return make
