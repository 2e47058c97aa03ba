"""Shared fixtures: small simulated datasets and short-chain configurations used across the suite."""


import signal

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


@pytest.fixture(autouse=True)
def ctrl_c_not_ignored():
    """Ctrl-C keeps its default meaning in this test process, so that the commands the tests start inherit it.

    Importing the process pool's fork-server module (``vcmc.federation._forkserver``) or running a Flower
    component in process ignores SIGINT in the importing process, and an ignored signal is inherited across
    ``exec``: a later ``vcmc fit`` started by a test (``test_ctrl_c``) would then ignore the Ctrl-C it is sent
    and finish its run (seen in the full suite, never alone)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Keep a module's ``xdist_group`` on one worker (``--dist=loadgroup``, pyproject's addopts), so that a
    module-scoped real-Flower lab is set up once. pytest-xdist 3.8 names the group in an item's node id by
    assigning ``item._nodeid``, which pytest 9.2 no longer reads (its id is ``item._id``, a ``NodeId``): without
    this, each worker set up its own copy of the lab. Remove once pytest-xdist supports pytest 9.2's ids."""
    if not getattr(config.option, "loadgroup", False):      # set on xdist's workers only
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        node_id = getattr(item, "_id", None)
        if names and node_id is not None and "@" not in item.nodeid:
            object.__setattr__(node_id, "_str_cache", f"{item.nodeid}@{'_'.join(names)}")
