"""Shared fixtures: small simulated datasets and short-chain configurations used across the suite."""

import numpy as np
import pytest

from vcmc.config import FitConfig, SamplerConfig


@pytest.fixture(scope="session")
def nested_easy():
    """The paper's nested design, easy separability, 4 silos of 1,000 (seeded)."""
    from vcmc.simulate import simulate_design

    return simulate_design("nested", "easy", rng=11)


@pytest.fixture(scope="session")
def short_config():
    """Short chains that still recover well-separated clusters (checked by the pipeline tests)."""
    return FitConfig(sampler=SamplerConfig(n_iter=3000, burn_in=1500, thin=5))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
