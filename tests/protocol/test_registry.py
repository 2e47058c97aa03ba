"""A request declares itself (vcmc.protocol.registry): adding one touches its protocol family, its endpoint and
the server stage that sends it, and every table of the boundary follows (CONTRIBUTING.md, "Adding a request")."""

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from vcmc.exceptions import DisclosureError, InconsistentSiloSummaries
from vcmc.federation.faults import gather
from vcmc.federation.transport import InProcessTransport
from vcmc.protocol import Reply, Request, decode_message, registry
from vcmc.protocol.hello import HelloReply
from vcmc.silo.endpoints import ENDPOINTS, endpoint
from vcmc.silo.local import LocalSilo
from vcmc.silo.policy import SiloPolicy

APP = Path(__file__).resolve().parents[2] / "flower_app" / "vcmc_flower" / "client_app.py"
DECLARED = {"action": "probe", "reply": HelloReply, "budget": 3}


def _define(**declarations):
    return dataclasses.dataclass(frozen=True)(type("ProbeRequest", (Request,), {"VERSION": 1}, **declarations))


@pytest.mark.parametrize("missing", ["action", "reply", "budget"])
def test_a_request_class_missing_a_declaration_fails_when_it_is_defined(missing):
    with registry.scope(), pytest.raises(TypeError, match=f"must declare its {missing}"):
        _define(**{k: v for k, v in DECLARED.items() if k != missing})


@pytest.mark.parametrize(("name", "value"), [("action", "not an identifier"), ("reply", dict), ("budget", -1),
                                             ("strategies", "rounds")])
def test_a_malformed_declaration_fails_when_the_class_is_defined(name, value):
    with registry.scope(), pytest.raises(TypeError, match="must declare"):
        _define(**{**DECLARED, name: value})


def test_every_table_of_the_boundary_is_read_from_the_declarations():
    with registry.scope():
        probe = _define(**DECLARED, strategies=("x",))
        assert registry.by_kind("probe_request") is probe and (HelloReply,) == probe.REPLY
        assert "probe" in registry.actions() and registry.default_budgets()["probe"] == 3
        assert registry.unsafe_strategies()[-1] == "x"
        assert "x" in SiloPolicy.own_data().allowed_strategies
    assert registry.by_kind("probe_request") is None and "x" not in registry.unsafe_strategies()


@pytest.fixture
def margin():
    """A request defined in the test as a developer would add one: a protocol family (its reply and request),
    its endpoint (admit, answer, release); the server stage is the test itself, through ``gather``."""
    with registry.scope():
        # 1. the protocol family
        @dataclasses.dataclass(frozen=True)
        class MarginReply(Reply):
            """Rows of the silo with each modality of one variable."""

            KIND = "margin_reply"
            VERSION = 1

            counts: np.ndarray

            def check_reply(self, request, silo):
                if np.any(np.asarray(self.counts) < 0):
                    self.refuse(request, silo, "counts are negative")

        @dataclasses.dataclass(frozen=True)
        class MarginRequest(Request, action="margin", reply=MarginReply, budget=1, without_summary=True):
            VERSION = 1

            variable: int

        # 2. the endpoint
        from vcmc.silo.release import protect_vector, withhold

        def admit(gate, request):
            if not 0 <= int(request.variable) < len(gate.silo.n_modalities):
                raise DisclosureError("margin: no such variable")
            return request

        def answer(silo, request):
            x = silo.codes[:, int(request.variable)]
            return MarginReply(counts=np.bincount(x[x >= 0], minlength=silo.n_modalities[int(request.variable)]))

        def release(gate, request, reply):
            return MarginReply(counts=withhold(protect_vector(gate, reply.counts), gate.min_size))

        endpoint(MarginRequest, admit=admit, answer=answer, release=release)
        try:
            yield MarginRequest, MarginReply
        finally:
            del ENDPOINTS[MarginRequest]


def _silos(n=2, rows=300):
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=4, n_per_silo=rows).silos[:n]


def test_a_new_request_is_answered_in_process_through_the_gate_and_gather(margin):
    request_type, reply_type = margin
    data = _silos()
    transport = InProcessTransport([LocalSilo(d) for d in data])
    replies, failures = gather(transport, {d.name: request_type(variable=1) for d in data}, stage="margin")
    assert not failures
    for d in data:
        x = d.codes[:, 1]
        expected = np.bincount(x[x >= 0], minlength=d.schema.n_modalities[1])
        np.testing.assert_array_equal(replies[d.name].counts, expected)
        assert decode_message(replies[d.name].to_arrays()) == replies[d.name]
    # the rules every request shares come from its declarations: the budget (1 per run) in a deployment
    deployed = LocalSilo(data[0], policy=SiloPolicy())
    deployed.handle(request_type(variable=0))
    with pytest.raises(DisclosureError, match="budget of margin requests"):
        deployed.handle(request_type(variable=0))
    with pytest.raises(DisclosureError, match="does not allow margin requests"):
        LocalSilo(data[0], policy=SiloPolicy(allowed_requests=("hello",))).handle(request_type(variable=0))
    # and the server's check of what came back is the reply's own
    with pytest.raises(InconsistentSiloSummaries, match="counts are negative"):
        reply_type(counts=np.array([-1])).check_reply(request_type(variable=0), "a")


def test_the_deployed_clientapp_answers_a_new_request_on_its_action(margin, tmp_path, monkeypatch):
    from flwr.app import Context, RecordDict
    from flwr.app import Message as FlowerMessage
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):   # as a ServerApp process has them
        monkeypatch.setattr(TaskIdentity, name, value)

    from vcmc.flower.records import decode_record, encode_record

    request_type, reply_type = margin
    (data,) = _silos(n=1)
    data.to_frame().to_csv(tmp_path / "a.csv", index=False)
    data.schema.to_json(tmp_path / "schema.json")
    spec = importlib.util.spec_from_file_location("deployed_client_app_margin", APP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)          # registers a handler per action of the registry, this one included
    assert "query.margin" in module.app._registered_funcs
    context = Context(run_id=1, node_id=7, state=RecordDict(), run_config={},
                      node_config={"data-path": str(tmp_path / "a.csv"), "schema-path": str(tmp_path / "schema.json"),
                                   "silo-name": "a"})
    message = FlowerMessage(encode_record(request_type(variable=1)), dst_node_id=7, message_type="query.margin")
    message.metadata.__dict__["_message_id"] = "m1"          # as the SuperLink stamps it
    reply = decode_record(module.app(message, context).content)
    x = data.codes[:, 1]
    assert isinstance(reply, reply_type)
    np.testing.assert_array_equal(reply.counts, np.bincount(x[x >= 0], minlength=data.schema.n_modalities[1]))
