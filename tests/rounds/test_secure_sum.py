"""The rounds in a deployment (docs/federation.md, "The rounds"): the same chain as the analyst's own session,
the server a relay that learns nothing of any round, and a server that alters, swaps or crafts what it relays
refused (the silos as a SuperNode builds them, in this process)."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("cryptography")

from vcmc.config import config_from_mapping  # noqa: E402
from vcmc.exceptions import SiloFailure  # noqa: E402
from vcmc.federation.transport import InProcessTransport  # noqa: E402
from vcmc.metrics import adjusted_rand_index  # noqa: E402
from vcmc.pipeline import run_vcmc  # noqa: E402
from vcmc.protocol.rounds import RoundStartRequest, RoundSweepRequest, RoundVectorReply  # noqa: E402
from vcmc.silo.local import LocalSilo  # noqa: E402
from vcmc.silo.policy import SiloPolicy  # noqa: E402
from vcmc.silo.secure_sum import new_key  # noqa: E402

BASE = {"sampler.n-iter": 300, "aggregation.max-iter": 60, "privacy.min-cluster-size": 5, "aggregation.rounds": 30,
        "assessment.enabled": False}


@pytest.fixture(scope="module")
def sim():
    from vcmc.research.simulate import simulate_design

    return simulate_design("nested", "easy", rng=3, n_per_silo=120)


@pytest.fixture(scope="module")
def keys(sim):
    return {d.name: new_key() for d in sim.silos}


class Relay(InProcessTransport):
    """The server's transport, recording what it receives, and altering what it sends where a test says."""

    def __init__(self, silos, tamper=None):
        super().__init__(silos)
        self.tamper = tamper
        self.received: list = []

    def call(self, requests, **kwargs):
        if self.tamper is not None:
            requests = {n: self.tamper(n, r) for n, r in requests.items()}
        replies = super().call(requests, **kwargs)
        self.received.extend(replies.values())
        return replies


def _deployed(sim, keys, *, reproducible=False, **policy):
    peers = {n: k[1] for n, k in keys.items()}
    return [LocalSilo(d, policy=SiloPolicy(reproducible_rounds=reproducible, **policy), run_key="run-7",
                      rounds_key=keys[d.name][0], rounds_peers=peers) for d in sim.silos]


def _run(silos, tamper=None, **overrides):
    with Relay(silos, tamper) as relay:
        return run_vcmc(relay, config_from_mapping({**BASE, **overrides}), rng=11), relay


def test_a_reproducible_deployment_samples_the_analysts_chain_to_the_bit(sim, keys):
    own, _ = _run([LocalSilo(d) for d in sim.silos])
    deployed, _ = _run(_deployed(sim, keys, reproducible=True))
    assert deployed.diagnostics["rounds"]["secure_sum"] and not own.diagnostics["rounds"]["secure_sum"]
    np.testing.assert_array_equal(own.profile_draws, deployed.profile_draws)
    np.testing.assert_array_equal(own.weights, deployed.weights)
    # a deployment reports its log joints on the grid (docs/federation.md), the K the same
    ko = [r["k"] for r in own.diagnostics["rounds"]["per_round"]]
    assert ko == [r["k"] for r in deployed.diagnostics["rounds"]["per_round"]]


def test_the_server_receives_nothing_of_any_round(sim, keys):
    silos = _deployed(sim, keys)
    result, relay = _run(silos, **{"aggregation.rounds": 0})          # auto: until settled
    vectors = [r for r in relay.received if isinstance(r, RoundVectorReply) and r.round >= 0 and r.vector.size]
    assert vectors
    n_rows = sum(d.n_rows for d in sim.silos)
    for reply in vectors:
        # a table's entries are counts of at most n_rows; a masked and padded one is uniform over 2^64
        assert np.mean(reply.vector.astype(float) > 4 * n_rows) > 0.99
    # nor in the sum over the silos of one round (the pads stay): what a server summing them would get
    by_round = {}
    for reply in vectors:
        by_round.setdefault(reply.round, []).append(reply.vector)
    total = np.sum(by_round[3], axis=0, dtype=np.uint64).view(np.int64).astype(float)
    assert np.mean(np.abs(total) > 4 * n_rows) > 0.99
    # the answer is still the pooled analysis's: the truth recovered
    truth = np.concatenate(sim.labels)
    est = np.concatenate([s.assignments for s in silos])
    assert adjusted_rand_index(truth, est) > 0.9


def _altered_vector(name, request):
    if isinstance(request, RoundSweepRequest) and request.round == 4 and name == "silo_2":
        vectors = request.vectors.copy()
        vectors[0, 7] += np.uint64(500)                     # 500 more rows of one kind in silo_1's table
        return dataclasses.replace(request, vectors=vectors)
    return request


def _other_start(name, request):
    if isinstance(request, RoundStartRequest) and name == "silo_2":
        start = request.start.copy()
        start[1] = 50 % request.n_components                 # silo_2's rows in a component of their own
        return dataclasses.replace(request, start=start)
    return request


def _swapped_vectors(name, request):
    if isinstance(request, RoundSweepRequest) and request.round == 2 and name == "silo_1":
        order = [1, 0, *range(2, request.vectors.shape[0])]
        return dataclasses.replace(request, vectors=request.vectors[order], tags=request.tags[order])
    return request


def _crafted_start(name, request):
    if isinstance(request, RoundStartRequest):
        return dataclasses.replace(request, secure=False)    # plain vectors: each silo's table to the server
    return request


def _thin_model(name, request):
    if isinstance(request, RoundStartRequest):
        # within every cap, a model that spreads the rows over 500 components of about one row each: the chain's
        # rule then keeps the largest component alone, below the minimum cluster size
        return dataclasses.replace(request, n_components=500, alpha=1e6, beta=np.full(request.beta.size, 1e6))
    return request


@pytest.mark.parametrize("tamper, match", [
    (_altered_vector, "does not verify"), (_other_start, "does not"), (_swapped_vectors, "does not verify"),
    (_crafted_start, "plain"), (_thin_model, "holds the minimum cluster size"),
], ids=["altered-vector", "another-start-for-one-silo", "swapped-vectors", "plain-vectors", "thin-model"])
def test_a_server_that_tampers_with_the_rounds_is_refused(sim, keys, tamper, match):
    with pytest.raises(SiloFailure, match=match):
        _run(_deployed(sim, keys), tamper)


def test_a_substituted_key_is_refused(sim, keys):
    # the server passes its own key off as silo_3's: no silo has pinned it, so silo_3's shares do not decrypt
    peers = {n: k[1] for n, k in keys.items()}
    fake = {**peers, "silo_3": new_key()[1]}
    silos = [LocalSilo(d, policy=SiloPolicy(), run_key="run-7", rounds_key=keys[d.name][0],
                       rounds_peers=peers if d.name == "silo_3" else fake) for d in sim.silos]
    with pytest.raises(SiloFailure, match="does not decrypt"):
        _run(silos)


def test_too_few_participants_are_refused(sim, keys):
    silos = _deployed(sim, keys, min_peers=len(sim.silos) + 1)
    with pytest.raises(SiloFailure, match="participants"):
        _run(silos)


def test_a_lost_silo_ends_the_rounds_naming_it(sim, keys):
    def lose(name, request):
        if isinstance(request, RoundSweepRequest) and request.round == 3 and name == "silo_4":
            raise RuntimeError("silo_4 lost")
        return request

    class Losing(Relay):
        def call(self, requests, **kwargs):
            try:
                return super().call(requests, **kwargs)
            except RuntimeError:
                out = super().call({n: r for n, r in requests.items() if n != "silo_4"}, **kwargs)
                out["silo_4"] = SiloFailure("silo_4", "no reply (connection lost)")
                return out

    silos = _deployed(sim, keys)
    with Losing(silos, lose) as relay, pytest.raises(SiloFailure, match="silo_4") as info:
        run_vcmc(relay, config_from_mapping(BASE), rng=11)
    assert "every silo is required" in str(info.value)


@pytest.fixture(scope="module")
def mixed():
    """A design with Gaussian items beside the categorical ones (docs/design.md §17.8)."""
    from types import SimpleNamespace

    from vcmc.research.simulate_mixed import simulate_mixed

    silos, _ = simulate_mixed([90, 110, 130], [0.5, 0.3, 0.2], [[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]],
                              [[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]], missing=0.03, rng=2)
    return SimpleNamespace(silos=silos)


def test_with_gaussian_items_a_reproducible_deployment_samples_the_analysts_chain_to_the_bit(mixed):
    keys = {d.name: new_key() for d in mixed.silos}
    own, _ = _run([LocalSilo(d) for d in mixed.silos])
    deployed, relay = _run(_deployed(mixed, keys, reproducible=True))
    assert deployed.diagnostics["rounds"]["secure_sum"] and own.gaussian_draws is not None
    np.testing.assert_array_equal(own.profile_draws, deployed.profile_draws)
    np.testing.assert_array_equal(own.gaussian_draws, deployed.gaussian_draws)
    for a, b in zip(own.assignments, deployed.assignments, strict=True):
        np.testing.assert_array_equal(a, b)
    # the vectors carry the Gaussian items' grid sums (per chain: C sizes, C x P counts, C x 3G sums), masked
    vectors = [r.vector for r in relay.received if isinstance(r, RoundVectorReply) and r.round >= 1 and r.vector.size]
    c, p = deployed.diagnostics["rounds"]["components"], int(np.sum(deployed.n_modalities))
    assert vectors and {v.size for v in vectors} == {c * (1 + p + 3 * 2)}
