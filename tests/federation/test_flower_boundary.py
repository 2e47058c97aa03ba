"""What crosses in Flower messages, for every strategy and every disclosure option.

The server side is the real ``FlowerTransport`` and ``run_vcmc``; the silo side is the deployed ClientApp
handler (``client_handle``) with each silo's operator settings in its node config. Between them, every
message goes through Flower's wire encoding (``message_to_proto`` -> bytes -> ``message_from_proto``), and
the test reads what crossed, decoded from those bytes, exactly as the other side receives it. (The real
network, TLS and SuperNode authentication are tested in ``test_flower.py``.)
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("flwr")

N_ROWS = 151          # prime, and no other dimension of any message: a row-level array would show it
N_SILOS = 4
STRATEGIES = ("contingency", "federated-gradient", "design")
DISCLOSURE = {
    "defaults": {},
    "min-cluster-size": {"min-cluster-size": 30},
    "suppression": {"suppress-cells-below": 8},
    "rounding": {"round-to": 5},
    "dp-noise": {"dp-epsilon": 1.0},
    "no-counts": {"share-counts": False},
}
RUN = {"sampler.n-iter": 400, "sampler.burn-in": 200, "aggregation.max-iter": 15, "aggregation.n-starts": 20,
       "aggregation.design-iter": 3, "aggregation.assign-draws": 20}


class WireGrid:
    """A Flower ``Grid`` whose SuperNodes are the ClientApp handler in this process, every message passing
    through Flower's protobuf wire format; keeps what crossed (decoded from the bytes)."""

    def __init__(self, node_configs: dict[int, dict]):
        from flwr.app import Context, RecordDict

        self.contexts = {nid: Context(run_id=1, node_id=nid, node_config=cfg, state=RecordDict(), run_config={})
                         for nid, cfg in node_configs.items()}
        self.crossed: list[tuple[str, int, str, object]] = []     # (direction, node, message type, Message)
        self._ids = itertools.count(1)

    def get_node_ids(self):
        return list(self.contexts)

    @staticmethod
    def _wire(message):
        from flwr.common.serde import message_from_proto, message_to_proto
        from flwr.proto.message_pb2 import Message as ProtoMessage

        return message_from_proto(ProtoMessage.FromString(message_to_proto(message).SerializeToString()))

    def send_and_receive(self, messages, *, timeout=None):
        from vcmc.flower.client import client_handle

        replies = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = f"m{next(self._ids)}"   # as the SuperLink stamps it
            inbound = self._wire(m)
            node = int(inbound.metadata.dst_node_id)
            self.crossed.append(("to-silo", node, inbound.metadata.message_type, inbound))
            reply = self._wire(client_handle(inbound, self.contexts[node]))
            self.crossed.append(("to-server", node, inbound.metadata.message_type, reply))
            replies.append(reply)
        return replies


@pytest.fixture(scope="module")
def silo_files(tmp_path_factory):
    from vcmc.research.simulate import simulate_design

    folder = tmp_path_factory.mktemp("boundary")
    sim = simulate_design("nested", "easy", rng=3, n_per_silo=N_ROWS)
    sim.schema.to_json(folder / "schema.json")
    paths = {}
    for d in sim.silos[:N_SILOS]:
        paths[d.name] = folder / f"{d.name}.csv"
        d.to_frame().to_csv(paths[d.name], index=False)
    return folder / "schema.json", paths, sim


@pytest.fixture
def task_identity(monkeypatch):
    """The server-side identity a ServerApp process has (Flower sets it when it starts the ServerApp)."""
    from flwr.supercore.task_identity import TaskIdentity

    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)


def _run(silo_files, strategy, disclosure):
    """(grid, result or the ConfigError that stopped the run)."""
    from vcmc.config import config_from_mapping
    from vcmc.exceptions import ConfigError, SiloFailure
    from vcmc.flower.server import FlowerTransport, discover_silos
    from vcmc.pipeline import run_vcmc

    schema, paths, _ = silo_files
    # the operators allow the strategies that need count round trips (refused by default: vcmc.silo.gate)
    configs = {100 + i: {"data-path": str(p), "schema-path": str(schema), "silo-name": name,
                         "allow-strategies": "contingency,federated-gradient,design", **disclosure}
               for i, (name, p) in enumerate(sorted(paths.items()))}
    grid = WireGrid(configs)
    names, failures = discover_silos(grid, grid.get_node_ids())
    assert failures == [] and sorted(names) == sorted(paths)
    config = config_from_mapping({**RUN, "aggregation.strategy": strategy})
    try:
        return grid, run_vcmc(FlowerTransport(grid, names), config, rng=11)
    except (ConfigError, SiloFailure) as err:
        return grid, err


@pytest.mark.slow
@pytest.mark.flower
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("option", list(DISCLOSURE))
def test_what_crosses_in_flower_messages(silo_files, task_identity, strategy, option):
    from vcmc.flower.records import decode_record
    from vcmc.model import profile_offsets
    from vcmc.protocol import CountsReply, SiloSummary

    disclosure = DISCLOSURE[option]
    grid, result = _run(silo_files, strategy, disclosure)
    if option == "no-counts" and strategy == "design":
        # the design strategy's hard counts are a count table: a silo with share-counts = false refuses them
        # (vcmc.silo.gate), so the run stops at its first counts round, naming the option
        assert "share-counts = false" in str(result)
        return
    kinds = {t for _, _, t, _ in grid.crossed}
    if option == "no-counts" and strategy == "contingency":
        # the silos withheld their tables; the strategy that needs them stops, naming one that does not
        # ("design" then works from count round trips, like federated-gradient)
        assert "federated-gradient" in str(result) and "query.assign" not in kinds
    elif option == "suppression" and strategy != "federated-gradient" and not hasattr(result, "n_clusters"):
        # the one-shot pass under suppression with complements: a small silo whose whole block of a variable was
        # suppressed sent draws that say nothing of it, and the honest global profile of that cluster (built from
        # the other silos) lies farther from them than the announcement check allows. The check cannot tell it
        # from a crafted profile (rare values are the suppressed ones), so the silo refuses, naming the rule;
        # the rounds, a deployment's default, announce nothing (docs/federation.md)
        assert "announced profile draw" in str(result) and "query.assign" not in kinds, str(result)
    else:
        assert result.n_clusters >= 1 and {"query.hello", "query.summarize", "query.assign"} <= kinds
    if strategy == "federated-gradient" or (strategy == "design" and option == "no-counts"):
        assert "query.counts" in kinds                  # one round trip per gradient step
    if strategy == "contingency":
        assert "query.counts" not in kinds              # the server works from the tables alone
    summaries = []
    for direction, _node, kind, message in grid.crossed:
        if message.has_error():
            # under DP the silos refuse the assessment round (its sums are not noised); the run goes on
            assert (option == "dp-noise" and kind == "query.assess") or (option == "suppression"
                                                                          and kind == "query.announce"), \
                (kind, message.error)
            continue
        content = message.content
        # plain numeric arrays, none with a silo's row count as a dimension; no text longer than a name
        for key, array in content["arrays"].items():
            a = array.numpy()
            assert a.dtype.kind in "biuf", (direction, kind, key)
            assert N_ROWS not in a.shape and (a.size % N_ROWS or a.size == 0), (direction, kind, key, a.shape)
        for key, value in dict(content["scalars"]).items():
            assert not isinstance(value, bytes), (kind, key)
            if isinstance(value, str):
                assert len(value) <= 64, (kind, key, value)
        if direction == "to-server" and kind == "query.summarize":
            summaries.append((decode_record(content), set(content["arrays"])))
        if direction == "to-server" and kind == "query.counts":
            reply = decode_record(content)
            assert isinstance(reply, CountsReply) and N_ROWS not in reply.modality.shape
    assert len(summaries) == N_SILOS and all(isinstance(s, SiloSummary) for s, _ in summaries)
    minimum = disclosure.get("min-cluster-size", 10)
    offsets = profile_offsets(summaries[0][0].n_modalities)
    for s, sent in summaries:
        # the minimum cluster size: no local cluster under it leaves the silo
        assert s.cluster_sizes.min() >= minimum, (s.silo, s.cluster_sizes)
        if strategy == "federated-gradient" or option == "no-counts":
            assert s.counts is None and "counts" not in sent      # no count table leaves the silo
            continue
        assert "counts" in sent
        assert s.counts is not None
        counts = np.asarray(s.counts)
        if option == "suppression":
            assert not np.any((counts >= 1) & (counts < 8))
        if option == "rounding":
            np.testing.assert_array_equal(counts % 5, 0)
        # without noise or suppression each variable's counts of a cluster add up to its size (no missing
        # values in these data); discrete Laplace noise breaks that in some block with overwhelming odds
        sums = np.stack([counts[:, offsets[q]:offsets[q + 1]].sum(axis=1) for q in range(len(offsets) - 1)], 1)
        exact = np.all(sums == s.cluster_sizes[:, None])
        if option in ("defaults", "min-cluster-size"):
            assert exact
        if option == "dp-noise":
            assert not exact and counts.dtype.kind in "iuf"
