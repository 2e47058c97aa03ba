"""The attacks of a curious (modified) server, sent through a Flower ``Grid`` to the deployed ClientApp.

Each attack records what came back (the reply's fields, or the error text); the test
(tests/federation/test_curious_server.py) asserts that nothing below the silo operator's limits was learnt.
"""

import dataclasses

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from flwr.app import Message as FlowerMessage

from vcmc.config import config_from_mapping
from vcmc.exceptions import SiloFailure
from vcmc.flower.records import decode_record, encode_record
from vcmc.flower.server import FlowerTransport, discover_silos, wait_for_nodes
from vcmc.model import profile_offsets
from vcmc.protocol import (
    AnnounceRequest,
    AssessRequest,
    AssignRequest,
    CountsRequest,
    DivergenceRequest,
    HelloRequest,
    SiloConfig,
    SummarizeRequest,
)


def _raw_record(arrays: dict) -> RecordDict:
    """A message as ``encode_record`` lays it out, from a hand-made flat encoding (what a modified or older
    server could send that no vcmc message class would build)."""
    return RecordDict({"arrays": ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()
                                              if isinstance(v, np.ndarray)}),
                       "scalars": ConfigRecord({k: v for k, v in arrays.items() if not isinstance(v, np.ndarray)}),
                       "bigints": ConfigRecord({})})


def _plain(reply) -> dict:
    if isinstance(reply, SiloFailure):
        return {"ok": False, "reason": reply.reason}
    out = {"ok": True, "kind": reply.KIND}
    for key, value in reply.to_arrays().items():
        if isinstance(value, np.ndarray):
            out[key] = value.tolist()
        elif isinstance(value, (int, float, str, bool)):
            out[key] = value
    return out


def _session(grid):
    """The silo the attacks go to, the server's transport, what came back of each attack, and ``ask(name,
    request)`` that sends one and records its reply (or refusal) under ``name``."""
    nodes = wait_for_nodes(grid, 1, timeout=120)
    names, _ = discover_silos(grid, nodes, timeout=120)
    silo = sorted(names)[0]
    tr = FlowerTransport(grid, names, default_timeout=240)
    results = {}

    def ask(name, request):
        results[name] = _plain(tr.call({silo: request})[silo])
        return results[name]

    return silo, tr, results, ask


def summarize(config):
    """The summarize request of ``config`` for the one silo attacked."""
    return SummarizeRequest(config=SiloConfig.from_fit_config(config), n_silos=1, seed_entropy=5, spawn_key=(0, 0))


def run_attacks(grid, plan: dict) -> dict:
    """Every attack, in the order a run allows them; returns what the server received for each."""
    silo, tr, results, ask = _session(grid)
    n_mod = tuple(plan["n_modalities"])
    offsets = profile_offsets(n_mod)
    target = plan["target_row"]                      # the record the attacker wants (side knowledge)
    person = np.full(int(offsets[-1]), 1e-300)
    for q, code in enumerate(target):
        block = slice(int(offsets[q]), int(offsets[q + 1]))
        person[block] = 0.0
        person[int(offsets[q]) + int(code)] = 1.0
    honest = config_from_mapping(plan["config"])

    def send_raw(name, arrays: dict):
        raw = FlowerMessage(_raw_record(arrays), dst_node_id=tr.node_ids[silo], message_type="query.summarize",
                            group_id=name)
        reply = grid.send_and_receive([raw], timeout=240)[0]
        results[name] = ({"ok": False, "reason": reply.error.reason} if reply.has_error()
                         else {"ok": True, "kind": decode_record(reply.content).KIND})

    k_guess = 3
    one = np.tile(person, (1, k_guess, 1))
    uniform_pi = np.full((1, k_guess), 1 / k_guess)
    # -- before any summary: soft counts, assign with parameters, assess at server-chosen draws
    ask("soft-counts-before-summary", CountsRequest(mode="soft", pi=uniform_pi, profiles=one, n_global=k_guess))
    ask("assign-before-summary", AssignRequest(assignment=np.zeros(k_guess, np.int64), n_global=k_guess,
                                               pi=uniform_pi, profiles=one))
    ask("assess-before-summary", AssessRequest(pi=uniform_pi, profiles=one, pairs=np.zeros((0, 2), np.int64),
                                               seed_entropy=1, spawn_key=(2, 0)))
    # -- a message on the wrong handler: a summarize request sent as query.hello
    wrong = FlowerMessage(encode_record(summarize(honest)), dst_node_id=tr.node_ids[silo],
                          message_type="query.hello", group_id="wrong")
    reply = grid.send_and_receive([wrong], timeout=120)[0]
    results["wrong-handler"] = ({"ok": False, "reason": reply.error.reason} if reply.has_error()
                                else {"ok": True, "kind": decode_record(reply.content).KIND})
    # -- unsafe strategies and the iteration cap
    ask("federated-gradient-strategy", summarize(dataclasses.replace(honest, aggregation=dataclasses.replace(
        honest.aggregation, strategy="federated-gradient"))))
    ask("design-strategy", summarize(dataclasses.replace(honest, aggregation=dataclasses.replace(
        honest.aggregation, strategy="design"))))
    ask("huge-n-iter", summarize(dataclasses.replace(honest, sampler=dataclasses.replace(
        honest.sampler, n_iter=100000000))))
    # -- the configuration as an older server sends it (JSON text), and with an option the silo does not know
    send_raw("json-configuration", {"__kind__": "summarize_request", "__version__": 1, "config_json": "{}",
                                    "n_silos": 1, "seed_entropy": 5, "spawn_key": np.array([0, 0])})
    send_raw("unknown-option", {**summarize(honest).to_arrays(), "config.privacy.trust-the-server": True})
    # -- the honest summary
    summary = ask("summary", summarize(honest))
    if not summary["ok"]:
        results["abort"] = True
    else:
        k = int(len(summary["cluster_sizes"]))
        pi_draws = np.asarray(summary["pi_draws"], dtype=np.float64)
        prof_draws = np.asarray(summary["profile_draws"], dtype=np.float64)
        person_k = np.tile(person, (1, k, 1))
        ask("soft-counts-after-summary", CountsRequest(mode="soft", pi=np.full((1, k), 1 / k), profiles=person_k,
                                                       n_global=k))
        ask("hard-counts-no-share", CountsRequest(mode="hard", assignment=np.arange(k), n_global=k))
        nan = np.array(prof_draws[0], copy=True)
        nan[0, 0] = np.nan
        ask("nan-divergence", DivergenceRequest(reference_pi=np.full(k, 1 / k), reference_profiles=nan,
                                                rule="penalised"))
        ask("negative-divergence", DivergenceRequest(reference_pi=np.full(k, 1 / k) * np.r_[-1, np.ones(k - 1)],
                                                     reference_profiles=prof_draws[0], rule="penalised"))
        ask("assign-without-announcement", AssignRequest(assignment=np.arange(k), n_global=k))
        crafted = np.array(prof_draws, copy=True)
        crafted[0, 0] = person
        ask("announce-one-person-profile", AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi_draws,
                                                           profiles=crafted))
        ask("announce-server-weights", AnnounceRequest(assignment=np.arange(k), n_global=k,
                                                       pi=np.tile(np.r_[1.0, np.zeros(k - 1)], (1, 1)),
                                                       profiles=prof_draws))
        ask("announce-honest", AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi_draws, profiles=prof_draws))
        ask("announce-again", AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi_draws, profiles=crafted))
        ask("assign-unannounced-draws", AssignRequest(assignment=np.arange(k), n_global=k, pi=pi_draws[:1],
                                                      profiles=person_k))
        ask("assign-honest", AssignRequest(assignment=np.arange(k), n_global=k, pi=pi_draws[:20],
                                           profiles=prof_draws[:20]))
        ask("assign-again", AssignRequest(assignment=np.arange(k), n_global=k, pi=pi_draws[:1],
                                          profiles=prof_draws[:1]))
        pairs = np.array([[int(offsets[0]), int(offsets[1])]], dtype=np.int64)
        ask("assess-honest", AssessRequest(pi=pi_draws[:10], profiles=prof_draws[:10], pairs=pairs, seed_entropy=1,
                                           spawn_key=(2, 0)))
        moved = np.array(prof_draws[:10], copy=True)
        moved[:, 0, int(offsets[0]):int(offsets[1])] = moved[:, 0, int(offsets[0]):int(offsets[1])][:, ::-1]
        ask("assess-differencing", AssessRequest(pi=pi_draws[:10], profiles=moved, pairs=pairs, seed_entropy=1,
                                                 spawn_key=(2, 0)))
    ask("hello", HelloRequest())
    return results


def run_gaussian_attacks(grid, plan: dict) -> dict:
    """The attacks on the Gaussian items' fields of a silo with continuous items (docs/design.md §17.4): a prior
    that pins the draws (at summarize and at the rounds' start), announcements without the Gaussian draws or with
    a mean of the server's choosing, an assign at unannounced means; and the honest summary, announcement and
    assign, whose fields the test checks against the operator's limits."""
    silo, _, results, ask = _session(grid)
    honest = config_from_mapping(plan["config"])
    pinning = dataclasses.replace(honest, prior=dataclasses.replace(honest.prior, variance_shape=1e9,
                                                                    variance_rate=1e-3))
    ask("gaussian-strong-prior-summary", summarize(pinning))
    summary = ask("gaussian-summary", summarize(honest))
    if not summary["ok"]:
        results["abort"] = True
        return results
    from vcmc.protocol.rounds import RoundStartRequest

    k = int(len(summary["cluster_sizes"]))
    pi_draws = np.asarray(summary["pi_draws"], dtype=np.float64)
    prof_draws = np.asarray(summary["profile_draws"], dtype=np.float64)
    gauss = np.asarray(summary["gaussian_draws"], dtype=np.float64)
    g = gauss.shape[2] // 2
    ask("round-start-strong-prior", RoundStartRequest(
        names=(silo,), start=np.arange(k)[None], n_components=k, alpha=0.01, beta=np.full(prof_draws.shape[2], 0.5),
        checkpoints=np.array([6]), stop=False, n_chains=1, anneal=1.0, anneal_until=1, max_stored=50, min_size=10,
        birth_share=0.0, birth_budget=0, silo_weight_prior=0.0, secure=True, seed_entropy=7, spawn_key=(3,),
        gaussian_prior=np.array([0.0, 0.01, 1e9, 1e-3])))
    ask("announce-without-gaussian", AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi_draws,
                                                     profiles=prof_draws))
    far = np.array(gauss, copy=True)
    far[:, 0, 0] += 10.0 * np.sqrt(far[:, 0, g])           # cluster 1's first mean ten of its sds away
    ask("announce-far-gaussian-mean", AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi_draws,
                                                      profiles=prof_draws, gaussian=far))
    ask("announce-honest-gaussian", AnnounceRequest(assignment=np.arange(k), n_global=k, pi=pi_draws,
                                                    profiles=prof_draws, gaussian=gauss))
    moved = np.array(gauss[:1], copy=True)
    moved[:, :, :g] += 0.5
    ask("assign-unannounced-gaussian", AssignRequest(assignment=np.arange(k), n_global=k, pi=pi_draws[:1],
                                                     profiles=prof_draws[:1], gaussian=moved))
    ask("assign-honest-gaussian", AssignRequest(assignment=np.arange(k), n_global=k, pi=pi_draws[:20],
                                                profiles=prof_draws[:20], gaussian=gauss[:20]))
    return results
