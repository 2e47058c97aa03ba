"""The attacks of a malicious (modified) server on the rounds and their secure sums (docs/federation.md, "The
rounds: a server that relays"), sent through a Flower ``Grid`` to the deployed ClientApp.

Three silos whose operators pinned each other's keys (``vcmc keygen``, node config ``rounds-key`` and
``rounds-peers``, ``min-peers`` 3) and a fourth, the outsider, whose operator did not allow the rounds. Each
attack records what every silo it was sent to answered (the reply's fields, or the error's text); the test
(tests/federation/test_malicious_rounds.py) asserts that each was refused for the rule it breaks and that nothing
below the operators' limits came back. The honest chain at the end records every vector the server relayed.

The messages are few (every message to a SuperNode is a fresh ClientApp process): attacks of one kind go to
different silos in the same exchange, an attack refused at the door costs no chain, and four short chains carry
the rest. A silo's request budgets count refused requests too, so the operators of this test raised the budgets
of the rounds' start, finish, result and assessment (node config ``request-budget``): each crafted request then
meets its own rule rather than a spent budget. The default budget (one start per run) is tested on its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.config import config_from_mapping
from vcmc.exceptions import SiloFailure
from vcmc.flower.records import decode_record, encode_record
from vcmc.flower.server import FlowerTransport, discover_silos, wait_for_nodes
from vcmc.model import beta_per_column
from vcmc.protocol import SiloConfig, SummarizeRequest
from vcmc.protocol.rounds import (
    RoundAssessRequest,
    RoundFinishRequest,
    RoundResultRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.silo import secure_sum

NO_TAGS = np.zeros(0, dtype=np.uint8)
THIN_COMPONENTS = 500      # the silo's cap on n_components (SiloPolicy.max_clusters): within it
THIN_PRIOR = 1e6           # alpha and beta: every row equally likely in each of the 500 components


def _plain(reply) -> dict:
    """What came back, as JSON: the reply's fields, or the refusal's text."""
    if isinstance(reply, SiloFailure):
        return {"ok": False, "reason": reply.reason}
    out = {"ok": True, "kind": reply.KIND}
    for key, value in reply.to_arrays().items():
        if isinstance(value, np.ndarray):
            out[key] = value.tolist()
        elif isinstance(value, (bool, int, float, str)):
            out[key] = value
    return out


class ChainBroken(Exception):
    """A step that had to be answered was not: the attacks after it are not run."""


class Attacker:
    """The malicious server: sends, records, relays."""

    def __init__(self, transport: FlowerTransport, silos: list[str]):
        self.tr = transport
        self.silos = silos
        self.results: dict = {"relayed": []}

    def send(self, name: str, requests: dict) -> dict:
        """One exchange; ``requests`` silo -> request. Recorded under ``name``."""
        replies = self.tr.call(requests)
        self.results[name] = {silo: _plain(reply) for silo, reply in replies.items()}
        return replies

    def attacks(self, attacks: dict[str, tuple[str, object]]) -> None:
        """Several attacks in one exchange, each to its own silo: ``name -> (silo, request)``."""
        replies = self.tr.call({silo: request for silo, request in attacks.values()})
        for name, (silo, _) in attacks.items():
            self.results[name] = {silo: _plain(replies[silo])}

    def to_all(self, name: str, request) -> dict:
        return self.send(name, dict.fromkeys(self.silos, request))

    def answered(self, name: str, replies: dict) -> dict:
        """The replies of a step the chain needs; ``ChainBroken`` naming the step otherwise."""
        if any(isinstance(r, SiloFailure) for r in replies.values()):
            raise ChainBroken(name)
        return replies

    def relay(self, chain: str, replies: dict, round_number: int) -> RoundSweepRequest:
        """The honest relay of a round: every participant's vector (and tag) as it replied."""
        vectors = np.stack([np.asarray(replies[n].vector, dtype=np.uint64) for n in self.silos])
        tags = np.stack([np.asarray(replies[n].tag, dtype=np.uint8) for n in self.silos]) if round_number >= 0 \
            else NO_TAGS
        self.results["relayed"].append({"chain": chain, "round": round_number, "vectors": vectors.tolist()})
        return RoundSweepRequest(round=round_number, vectors=vectors, tags=tags)

    def rounds(self, chain: str, replies: dict, first: int, last: int | None = None) -> tuple[dict, int]:
        """Relay rounds ``first``, ``first + 1``, ... honestly until every silo says stopped (or round ``last``
        was relayed); returns the last replies and the next round."""
        r = first
        while not all(getattr(reply, "stop", False) for reply in replies.values()):
            if last is not None and r > last:
                break
            replies = self.answered(f"{chain}:round {r}", self.to_all(f"{chain}:round {r}",
                                                                      self.relay(chain, replies, r)))
            r += 1
        return replies, r


def honest_start(names: list[str], k_local: dict[str, int], n_modalities, config, checkpoints: int) -> dict:
    """The start an honest server sends every participant: each local cluster its own component, one birth."""
    width = max(k_local.values())
    start = np.full((len(names), width), -1, dtype=np.int64)
    used = 0
    for i, name in enumerate(names):
        start[i, :k_local[name]] = used + np.arange(k_local[name])
        used += k_local[name]
    return {"names": tuple(names), "start": start, "n_components": used + 1, "alpha": float(config.prior.alpha),
            "beta": beta_per_column(config.prior.beta, n_modalities), "checkpoints": np.asarray([checkpoints]),
            "stop": False, "n_chains": 1, "anneal": 1.0, "anneal_until": 1, "max_stored": 50,
            "min_size": int(config.privacy.min_cluster_size), "birth_share": 0.05, "birth_budget": 1,
            "silo_weight_prior": 0.0, "secure": True, "seed_entropy": 1234, "spawn_key": ()}


def as_the_silo_reads_it(request):
    """The request as a silo decodes it from Flower's record (the fields its context digest covers)."""
    return decode_record(encode_record(request))


def own_key_in_a_peers_place(start: RoundStartRequest, publics: dict[str, str], peer: str, run_key: str):
    """The best forgery of ``peer``'s shares a server can make: its own key pair in the peer's place, the run's
    context computed exactly as every silo does (the run id and the start's fields, which the server knows),
    a fresh share encrypted to every other participant. No silo pinned that key, so none decrypts it."""
    names = list(start.names)
    fields = {k: v for k, v in as_the_silo_reads_it(start).to_arrays().items() if not k.startswith("__")}
    context = secure_sum.context_digest(run_key, fields)
    private, public = secure_sum.new_key()
    index = names.index(peer)
    keys = [public if n == peer else publics[n] for n in names]
    secrets = secure_sum.pair_secrets(private, keys, index, context)
    return secure_sum.encrypt_share(secure_sum.new_share(), secrets, index).view(np.uint64).ravel(), context


def run_round_attacks(grid, plan: dict, *, run_key: str) -> dict:
    """Every attack, in the order a run allows them; returns what the server received for each."""
    silos, outsider = list(plan["silos"]), plan["outsider"]
    nodes = wait_for_nodes(grid, len(silos) + 1, timeout=120)
    names, _ = discover_silos(grid, nodes, timeout=120)
    tr = FlowerTransport(grid, names, default_timeout=300)
    server = Attacker(tr, silos)
    a, b, c = silos
    config = config_from_mapping(plan["config"])
    summarize = SummarizeRequest(config=SiloConfig.from_fit_config(config), n_silos=len(silos), seed_entropy=5,
                                 spawn_key=(0,))
    summaries = server.send("summaries", dict.fromkeys([*silos, outsider], summarize))
    if any(isinstance(summaries[n], SiloFailure) for n in summaries):
        server.results["abort"] = "summaries"
        return server.results
    k_local = {n: len(summaries[n].cluster_sizes) for n in silos}
    n_modalities = summaries[a].n_modalities
    fields = honest_start(silos, k_local, n_modalities, config, int(plan["checkpoints"]))
    start = RoundStartRequest(**fields)

    def crafted(**changes):
        return dataclasses.replace(start, **changes)

    door = bool(plan.get("door", True))      # the gate's own rules: the same code whatever the transport
    # -- refused at the door: no chain needed (each silo's start budget is spent by these too)
    if door:
        _door_attacks(server, start, crafted, silos, outsider)
    try:
        _relay_attacks(server, start, crafted, silos, k_local, plan, run_key, thin=door)
    except ChainBroken as broken:
        server.results["abort"] = str(broken)
    return server.results


def _door_attacks(server, start, crafted, silos, outsider) -> None:
    a, b, c = silos
    server.attacks({
        "plain-round-start": (a, crafted(secure=False)),
        "unpinned-participant": (b, crafted(names=(*silos, "mallory"),
                                            start=np.vstack([start.start, start.start[:1]]))),
        "too-few-participants": (c, crafted(names=(b, c), start=start.start[1:])),
        "strategy-not-allowed": (outsider, start),
    })
    server.attacks({
        "n-components-beyond-cap": (a, crafted(n_components=THIN_COMPONENTS + 1)),
        "checkpoints-beyond-sweep-budget": (b, crafted(checkpoints=np.asarray([4, 20000]))),
        "anneal-below-1": (c, crafted(anneal=0.5)),
    })
    out_of_range = start.start.copy()
    out_of_range[1, 0] = start.n_components
    server.attacks({
        "birth-share-out-of-range": (a, crafted(birth_share=0.9)),
        "start-entry-out-of-range": (b, crafted(start=out_of_range)),
        "sweep-before-start": (c, RoundSweepRequest(round=-1, vectors=np.zeros((3, 18), dtype=np.uint64),
                                                    tags=NO_TAGS)),
    })


def _relay_attacks(server, start, crafted, silos, k_local, plan, run_key, *, thin: bool) -> None:
    a, b, c = silos
    # -- the server's own key in a peer's place: c's shares replaced by ones under the server's key
    shares = server.answered("forged-share:start", server.to_all("forged-share:start", start))
    forged, context = own_key_in_a_peers_place(start, plan["publics"], c, run_key)
    relayed = server.relay("forged-share", shares, -1)
    vectors = relayed.vectors.copy()
    vectors[silos.index(c)] = forged
    server.results["server-context"] = context.hex()
    server.to_all("server-key-in-a-peers-place", dataclasses.replace(relayed, vectors=vectors))

    # -- split view: c is sent another start map than a and b (its own clusters in one component)
    other = start.start.copy()
    other[silos.index(c), :k_local[c]] = 0
    shares = server.answered("split-view:start", server.send("split-view:start", {
        a: start, b: start, c: crafted(start=other)}))
    server.to_all("split-view", server.relay("split-view", shares, -1))

    if thin:
        _thin_model_attacks(server, start, crafted, silos)
    _tamper_and_honest(server, start, silos)


def _thin_model_attacks(server, start, crafted, silos) -> None:
    a, b, c = silos
    # -- a model within the caps that spreads the rows thin: 500 components, alpha and beta 1e6
    thin = crafted(n_components=THIN_COMPONENTS, alpha=THIN_PRIOR, beta=np.full(start.beta.size, THIN_PRIOR),
                   checkpoints=np.asarray([2]), birth_budget=0)
    replies = server.answered("thin:start", server.to_all("thin:start", thin))
    replies, r = server.rounds("thin", replies, -1, last=0)
    server.attacks({"finish-before-stop": (a, RoundFinishRequest()),
                    "result-before-stop": (b, RoundResultRequest()),
                    "assess-before-stop": (c, RoundAssessRequest(n_replicates=1, max_pairs=0))})
    replies, r = server.rounds("thin", replies, r)
    server.attacks({"sweep-after-stop": (a, RoundSweepRequest(
                        round=r, vectors=np.zeros((3, 4), dtype=np.uint64),
                        tags=np.zeros((3, secure_sum.TAG_BYTES), dtype=np.uint8))),
                    "thin-answer-finish": (b, RoundFinishRequest()),
                    "thin-answer-result": (c, RoundResultRequest())})
    server.attacks({"thin-answer-result-2": (a, RoundResultRequest()),
                    "thin-answer-assess": (c, RoundAssessRequest(n_replicates=1, max_pairs=0))})



def _tamper_and_honest(server, start, silos) -> None:
    a, b, c = silos
    # -- the relayed vectors of a sweep: dropped, skipped, replayed, then altered, reordered, replaced
    replies = server.answered("tamper:start", server.to_all("tamper:start", start))
    replies, r = server.rounds("tamper", replies, -1, last=0)
    honest = server.relay("tamper", replies, r)
    server.attacks({
        "vector-dropped": (a, dataclasses.replace(honest, vectors=honest.vectors[:2], tags=honest.tags[:2])),
        "round-skipped": (b, dataclasses.replace(honest, round=r + 1)),
        "round-replayed": (c, dataclasses.replace(honest, round=r - 1)),
    })
    plus_one = honest.vectors.copy()
    plus_one[1, 0] += np.uint64(1)                            # one more row of b's in component 0
    order = [1, 0, 2]
    replaced_v, replaced_t = honest.vectors.copy(), honest.tags.copy()
    replaced_v[0], replaced_t[0] = honest.vectors[1], honest.tags[1]   # a's vector replaced by b's
    server.attacks({
        "vector-altered": (a, dataclasses.replace(honest, vectors=plus_one)),
        "vectors-reordered": (b, dataclasses.replace(honest, vectors=honest.vectors[order],
                                                     tags=honest.tags[order])),
        "vector-replaced": (c, dataclasses.replace(honest, vectors=replaced_v, tags=replaced_t)),
    })

    # -- the honest chain through the same server, every vector it relayed recorded
    replies = server.answered("honest:start", server.to_all("honest:start", start))
    replies, _ = server.rounds("honest", replies, -1)
    server.to_all("honest:finish", RoundFinishRequest())
    server.to_all("honest:result", RoundResultRequest())

