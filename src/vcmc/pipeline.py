"""The server algorithm, written once against a ``Transport`` to the silos (docs/design.md §12.1).

    silo data -> apply step (inside each silo) -> SiloSummary -> matching -> aggregation -> global partition
              -> model assessment

One function per stage: ``summarize_silos`` (round 1, every silo's summary), ``match_stage``,
``aggregate_stage``, ``partition_stage`` and ``assessment_stage``; each asks the silos again only where the
chosen options need it (minimum-divergence matching, the federated-gradient strategy, the final
relabelling, the assessment round), and every reply is collected by ``vcmc.federation.faults.gather``.
``server_steps`` runs the stages after round 1 and hands their outputs to ``vcmc.result_builder``, which
assembles the ``GlobalResult``. The same functions run in-process, over a process pool and inside the
Flower ``ServerApp``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings

import numpy as np

from vcmc._rng import RngLike, as_seed_sequence, root_entropy
from vcmc.config import FitConfig
from vcmc.exceptions import SiloFailure
from vcmc.federation.announce import announce_global_draws
from vcmc.federation.faults import FaultPolicy, gather
from vcmc.federation.transport import local_rows
from vcmc.matching.types import Matching
from vcmc.protocol import (
    AssignRequest,
    CountsRequest,
    DivergenceReply,
    DivergenceRequest,
    SiloConfig,
    SiloSummary,
    SummarizeRequest,
)
from vcmc.result_builder import StageOutputs, artefact_warnings, build_result, failure_warnings
from vcmc.results import GlobalResult
from vcmc.spacing import evenly_spaced

log = logging.getLogger(__name__)

# Stream layout under the root seed: silo s samples from SeedSequence(root, spawn_key=(0, s)); the server
# from spawn_key (1,); silo s's model assessment (replicated datasets, sampled allocations) from (2, s); the
# global-informed rounds (vcmc.rounds.stage.ROUNDS_KEY): the server's draws from (3,), silo s's sweep of
# round r from (3, r, s).
# Adding a silo never changes another silo's draws, and the server's randomness (matching orders, draw
# pairing, starting points) never depends on how many silos there are.
_SILO_KEY = 0
_SERVER_KEY = 1
_ASSESS_KEY = 2


def _root(rng: RngLike) -> np.random.SeedSequence:
    return as_seed_sequence(rng)


def server_generator(rng: RngLike) -> np.random.Generator:
    root = _root(rng)
    return np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key,
                                                                                  _SERVER_KEY)))


def plan_rounds(config: FitConfig, transport, method: str = "vcmc") -> tuple[FitConfig, dict]:
    """``config`` with ``aggregation.rounds = 0`` (auto) decided for this transport's silos
    (``vcmc.rounds.plan``), and the record of the decision."""
    from vcmc.rounds.plan import resolve_rounds

    return resolve_rounds(config, own_session=bool(getattr(transport, "own_session", False)), method=method,
                          ready=getattr(transport, "rounds_ready", None))


def summarize_silos(transport, config: FitConfig, *, rng: RngLike = None,
                    policy: FaultPolicy | None = None) -> tuple[list[SiloSummary], list[SiloFailure]]:
    """Round 1: every silo runs its apply step and returns a ``SiloSummary`` (in transport order).

    Silos that fail are dropped when ``policy`` allows it (a warning names them) and reported in the
    second element; otherwise ``SiloFailure`` is raised naming the silo.
    """
    policy = policy or FaultPolicy()
    root = _root(rng)
    names = tuple(transport.silos)
    config, _ = plan_rounds(config, transport)   # the silos are told the rounds the run will make
    silo_config = SiloConfig.from_fit_config(config)
    requests = {
        name: SummarizeRequest(config=silo_config, n_silos=len(names), seed_entropy=int(root.entropy),
                               spawn_key=(*root.spawn_key, _SILO_KEY, s))
        for s, name in enumerate(names)
    }
    replies, failures = gather(transport, requests, policy, stage="summarize")
    summaries = [replies[n] for n in names if n in replies]
    return summaries, failures


def _ask_one(transport, name: str, request, stage: str):
    """One silo's reply to one request (minimum-divergence matching asks silo by silo); every silo is
    required."""
    replies, _ = gather(transport, {name: request}, FaultPolicy(), stage=stage)
    return replies[name]


def _divergence_fn(transport, names):
    def divergence(silo_index: int, request: DivergenceRequest) -> DivergenceReply:
        return _ask_one(transport, names[silo_index], request, "membership divergence")

    return divergence


def _counts_fn(transport, names, matching: Matching, policy: FaultPolicy):
    """Federated-gradient round trip: the silos' counts at the server's parameters, summed over silos."""
    rounds = {"n": 0}

    def counts(pi, profiles):
        rounds["n"] += 1
        if pi is None:
            reqs = {n: CountsRequest(mode="hard", assignment=matching.assignment[s], n_global=matching.n_global)
                    for s, n in enumerate(names)}
        else:
            reqs = {n: CountsRequest(mode="soft", pi=pi, profiles=profiles, n_global=matching.n_global)
                    for n in names}
        replies, _ = gather(transport, reqs, FaultPolicy(min_silos=None, timeout=policy.timeout),
                            stage="counts")
        cl = sum(r.cluster for r in replies.values())
        mo = sum(r.modality for r in replies.values())
        ll = sum(r.loglik for r in replies.values())
        return cl, mo, ll

    counts.rounds = rounds  # type: ignore[attr-defined]
    return counts


def _assign_requests(names, matching: Matching, matched, agg, config) -> dict[str, AssignRequest]:
    """One request per silo: the global profile draws with that silo's own weights of the global clusters
    (``AggregationConfig.assign == "posterior"``), or the matching alone (``"local"``)."""
    if config.assign == "local":
        return {n: AssignRequest(assignment=matching.assignment[s], n_global=matching.n_global)
                for s, n in enumerate(names)}
    idx = evenly_spaced(agg.profile_draws.shape[0], config.assign_draws)
    profiles = np.asarray(agg.profile_draws[idx], dtype=np.float64)
    reqs = {}
    for s, n in enumerate(names):
        pi_s = np.asarray(matched.pi[s], dtype=np.float64)
        pi_s = pi_s[evenly_spaced(pi_s.shape[0], idx.size)]
        if pi_s.shape[0] != idx.size:          # a silo with fewer draws than asked: repeat them in turn
            pi_s = pi_s[np.arange(idx.size) % pi_s.shape[0]]
        gaussian = None if agg.gaussian_draws is None else np.asarray(agg.gaussian_draws[idx], dtype=np.float64)
        reqs[n] = AssignRequest(assignment=matching.assignment[s], n_global=matching.n_global, pi=pi_s,
                                profiles=profiles, gaussian=gaussian)
    return reqs


def match_stage(summaries: list[SiloSummary], transport, config: FitConfig, srv: np.random.Generator):
    """Matching of the silos' local clusters (docs/design.md §5) and the matched draws aggregation uses."""
    from vcmc.matching import match, matched_draws

    names = tuple(s.silo for s in summaries)
    matching = match(summaries, config.matching, divergence=_divergence_fn(transport, names), rng=srv)
    matched = matched_draws(summaries, matching, config.matching, prior=config.prior, rng=srv)
    if summaries[0].gaussian_draws is not None:                        # docs/design.md §17.6
        from vcmc.matching.gaussian import matched_gaussian

        matched = dataclasses.replace(matched, gaussian=matched_gaussian(summaries, matching))
    return matching, matched


def aggregate_stage(matched, matching: Matching, transport, names, config: FitConfig, srv: np.random.Generator,
                    *, method: str, policy: FaultPolicy):
    """Variational aggregation (docs/design.md §6-7), or consensus weights on the same matched draws."""
    from vcmc.aggregation import aggregate, consensus

    n_chains = int(config.sampler.n_chains)
    if method == "vcmc":
        agg = aggregate(matched, config=config.aggregation, prior=config.prior,
                        counts_fn=_counts_fn(transport, names, matching, policy), rng=srv, n_chains=n_chains)
    elif method == "consensus":
        agg = consensus(matched, kind="inverse-variance", rng=srv, n_chains=n_chains)
    else:
        raise ValueError(f"server_steps handles method 'vcmc' or 'consensus', got {method!r}")
    if matched.gaussian is None:
        return agg
    from vcmc.aggregation.gaussian import aggregate_gaussian  # docs/design.md §17.6: the same pairing

    g = matched.gaussian[0].shape[2] // 2
    return dataclasses.replace(agg, gaussian_draws=aggregate_gaussian(matched.gaussian, g, agg.pairing.T))


def partition_stage(names, transport, matching: Matching, matched, agg, config: FitConfig,
                    policy: FaultPolicy) -> dict:
    """Every silo labels its rows under the global posterior and returns cluster-level sums (its
    ``AssignReply``); every silo is required."""
    announce_global_draws(transport, names, matching, matched, agg, policy)   # the silos check them (gate)
    reqs = _assign_requests(names, matching, matched, agg, config.aggregation)
    replies, _ = gather(transport, reqs, FaultPolicy(min_silos=None, timeout=policy.timeout), stage="assign")
    return replies


def assessment_stage(transport, names, matched, agg, config: FitConfig, rng: RngLike,
                     policy: FaultPolicy | None) -> tuple[dict | None, list[str]]:
    """The model-assessment round (docs/design.md §14): predictive checks, WAIC, occupied clusters.

    A silo that fails or refuses (its operator's ``share_assessment = False``) is left out of the
    assessment only, named in the returned notes; the pooled checks then cover the other silos.
    """
    from vcmc.assessment import assess_requests, combine_assessment

    root = _root(rng)
    index = {n: i for i, n in enumerate(transport.silos)}
    reqs, _ = assess_requests(names, index, matched, agg, config, root, _ASSESS_KEY)
    replies, failures = gather(transport, reqs, FaultPolicy(timeout=(policy or FaultPolicy()).timeout),
                               stage="assessment", optional=True)
    notes = [f"silo {f.silo!r} left out of the model assessment: {f.reason}" for f in failures]
    if not replies:
        return None, notes
    return combine_assessment(replies, reqs, matched.n_modalities), notes


def server_steps(summaries: list[SiloSummary], transport, config: FitConfig, *, rng: RngLike = None,
                 method: str = "vcmc", policy: FaultPolicy | None = None,
                 timings: dict[str, float] | None = None, failures: list[SiloFailure] | None = None,
                 rounds_plan: dict | None = None, show_progress: bool | None = None) -> GlobalResult:
    """Matching, aggregation, the global partition and the assessment on the silos' summaries.

    Parameters
    ----------
    summaries : list of SiloSummary
        One per silo still taking part, in the order of ``transport.silos``.
    method : {"vcmc", "consensus"}
        Variational aggregation, or Scott et al.'s consensus weights on the same matched draws.
    rounds_plan : dict, optional
        The record of ``plan_rounds`` made before the summaries (``run_vcmc``); without it the rounds of
        ``config`` are decided here.
    show_progress : bool, optional
        A bar for the global-informed rounds (default: on a terminal, not in CI; ``vcmc.progress``).
    """
    if rounds_plan is None or config.aggregation.rounds == 0:
        config, rounds_plan = plan_rounds(config, transport, method)
    policy = policy or FaultPolicy()
    timings = dict(timings or {})
    srv = server_generator(rng)
    names = tuple(s.silo for s in summaries)
    ledger = getattr(transport, "releases", None)
    before = ledger.snapshot() if ledger is not None else {}

    t0 = time.perf_counter()
    matching, matched = match_stage(summaries, transport, config, srv)
    timings["matching"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    agg = aggregate_stage(matched, matching, transport, names, config, srv, method=method, policy=policy)
    timings["aggregation"] = time.perf_counter() - t0

    # with the rounds to follow, the one-shot pass ends here: the rounds label the rows and assess the answer
    # (docs/design.md §16), and their start needs only the matching and the local clusters' sizes
    rounds = method == "vcmc" and config.aggregation.rounds > 1
    partition = None
    if not rounds:
        t0 = time.perf_counter()
        partition = partition_stage(names, transport, matching, matched, agg, config, policy)
        timings["partition"] = time.perf_counter() - t0

    assessment, notes = None, []
    if config.assessment.enabled and not rounds:
        t0 = time.perf_counter()
        assessment, notes = assessment_stage(transport, names, matched, agg, config, rng, policy)
        timings["assessment"] = time.perf_counter() - t0
    timings["total"] = sum(v for k, v in timings.items() if k != "total")

    # Row-level labels and memberships reach this process only through the in-process and process-pool
    # transports' private calls (the user's own machine); Flower silos keep them on their hosts.
    stages = StageOutputs(summaries=summaries, matching=matching, matched=matched, aggregate=agg,
                          partition=partition, assignments=local_rows(transport, "local_assignments", names),
                          memberships=local_rows(transport, "local_memberships", names),
                          assessment=assessment, assessment_notes=notes,
                          failures=list(failures or []))
    artefacts = artefact_warnings(stages, config)
    for w in failure_warnings(stages.failures):
        warnings.warn(w, stacklevel=2)
    for w in artefacts[0]:   # a property of the result, reported in it and by the CLI; not a Python warning
        log.info("%s", w)
    result = build_result(stages, config, method=method, timings=timings, seed=root_entropy(rng),
                          artefacts=artefacts)
    if rounds:
        from vcmc.rounds import refine

        result = refine(result, transport, config, rng=rng, policy=policy, show_progress=show_progress,
                        stop=bool(rounds_plan.get("stop_when_settled")))
    result.diagnostics["rounds_plan"] = rounds_plan
    from vcmc.federation.accounting import privacy_account

    account = privacy_account(summaries, ledger.since(before) if ledger is not None else {})
    if account is not None:          # only where some silo noised its releases (dp-epsilon)
        result.diagnostics["privacy"] = account
    return result


def run_vcmc(transport, config: FitConfig | None = None, *, rng: RngLike = None, method: str = "vcmc",
             policy: FaultPolicy | None = None, save_dir=None, show_progress: bool | None = None) -> GlobalResult:
    """The whole VCMC run through ``transport``: summaries, matching, aggregation, global partition, and the
    global-informed rounds its ``aggregation.rounds`` decides (``vcmc.rounds.plan``; a bar for them with
    ``show_progress``, by default on a terminal).

    With ``save_dir`` the silo summaries are saved as soon as they arrive, so the server steps can be
    re-run without re-running the samplers: ``server_steps(list(load_summaries(save_dir).values()),
    transport, config)`` (``vcmc.federation.faults.load_summaries``).
    """
    config, plan = plan_rounds(config or FitConfig(), transport, method)
    policy = policy or FaultPolicy()
    t0 = time.perf_counter()
    summaries, failures = summarize_silos(transport, config, rng=rng, policy=policy)
    timings = {"apply": time.perf_counter() - t0}
    if save_dir is not None:
        from vcmc.federation.faults import save_summaries

        save_summaries(summaries, save_dir)
    return server_steps(summaries, transport, config, rng=rng, method=method, policy=policy,
                        timings=timings, failures=failures, rounds_plan=plan, show_progress=show_progress)
