"""The server algorithm, written once against a ``Transport`` to the silos (docs/design.md §12.1).

    silo data -> apply step (inside each silo) -> SiloSummary -> matching -> aggregation -> global partition

``summarize_silos`` asks every silo for its summary (one round); ``server_steps`` runs matching,
aggregation and the global partition on those summaries, asking the silos again only where the chosen
options need it (minimum-divergence matching, the federated-gradient strategy, the final relabelling).
The same functions run in-process, over a process pool and inside the Flower ``ServerApp``.
"""

from __future__ import annotations

import json
import logging
import time
import warnings

import numpy as np

from vcmc._rng import RngLike, as_seed_sequence, root_entropy
from vcmc.assessment import local_k_posterior
from vcmc.config import FitConfig
from vcmc.exceptions import SiloFailure
from vcmc.federation.faults import FaultPolicy, gather
from vcmc.federation.announce import announce_global_draws
from vcmc.matching.types import Matching
from vcmc.protocol import (
    AssignRequest,
    CountsRequest,
    DivergenceReply,
    DivergenceRequest,
    SiloSummary,
    SummarizeRequest,
)
from vcmc.results import GlobalResult

log = logging.getLogger(__name__)

# Stream layout under the root seed: silo s samples from SeedSequence(root, spawn_key=(0, s)); the server
# from spawn_key (1,); silo s's model assessment (replicated datasets, sampled allocations) from (2, s).
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


def summarize_silos(transport, config: FitConfig, *, rng: RngLike = None,
                    policy: FaultPolicy | None = None) -> tuple[list[SiloSummary], list[SiloFailure]]:
    """Round 1: every silo runs its apply step and returns a ``SiloSummary`` (in transport order).

    Silos that fail are dropped when ``policy`` allows it (a warning names them) and reported in the
    second element; otherwise ``SiloFailure`` is raised naming the silo.
    """
    policy = policy or FaultPolicy()
    root = _root(rng)
    names = tuple(transport.silos)
    cfg_json = json.dumps(config.to_dict())
    requests = {
        name: SummarizeRequest(config_json=cfg_json, n_silos=len(names), seed_entropy=int(root.entropy),
                               spawn_key=(*root.spawn_key, _SILO_KEY, s))
        for s, name in enumerate(names)
    }
    replies, failures = gather(transport, requests, policy, stage="summarize")
    summaries = [replies[n] for n in names if n in replies]
    return summaries, failures


def _ask_one(transport, name: str, request, expected: type, stage: str):
    reply = transport.call({name: request}).get(name)
    if isinstance(reply, SiloFailure):
        raise reply
    if not isinstance(reply, expected):
        raise SiloFailure(name, f"{stage}: expected a {expected.__name__}, got {type(reply).__name__}")
    return reply


def _divergence_fn(transport, names):
    def divergence(silo_index: int, request: DivergenceRequest) -> DivergenceReply:
        return _ask_one(transport, names[silo_index], request, DivergenceReply, "membership divergence")

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


def _even(n_total: int, n_take: int) -> np.ndarray:
    return np.unique(np.linspace(0, n_total - 1, min(n_total, n_take)).round().astype(np.int64))


def _assign_requests(names, matching: Matching, matched, agg, config) -> dict[str, AssignRequest]:
    """One request per silo: the global profile draws with that silo's own weights of the global clusters
    (``AggregationConfig.assign == "posterior"``), or the matching alone (``"local"``)."""
    if config.assign == "local":
        return {n: AssignRequest(assignment=matching.assignment[s], n_global=matching.n_global)
                for s, n in enumerate(names)}
    idx = _even(agg.profile_draws.shape[0], config.assign_draws)
    profiles = np.asarray(agg.profile_draws[idx], dtype=np.float64)
    reqs = {}
    for s, n in enumerate(names):
        pi_s = np.asarray(matched.pi[s], dtype=np.float64)
        pi_s = pi_s[_even(pi_s.shape[0], idx.size)]
        if pi_s.shape[0] != idx.size:          # a silo with fewer draws than asked: repeat them in turn
            pi_s = pi_s[np.arange(idx.size) % pi_s.shape[0]]
        reqs[n] = AssignRequest(assignment=matching.assignment[s], n_global=matching.n_global, pi=pi_s,
                                profiles=profiles)
    return reqs


def classification_quality(replies, names) -> dict:
    """Relative entropy ``1 - E / (n log K)`` overall and per silo (as Mplus and StepMix report it: 1 when
    every row is certain, 0 when memberships are uniform) and the average posterior probability of
    assignment per global cluster, from the silos' cluster-level sums."""
    def relative(entropy, n, k):
        return float(1.0 - entropy / (n * np.log(k))) if k > 1 and n > 0 else 1.0

    k = int(np.asarray(replies[0].counts).shape[0])
    counts = np.sum([np.asarray(r.counts, dtype=np.float64) for r in replies], axis=0)
    prob = np.sum([np.asarray(r.probability if r.probability is not None else r.counts, dtype=np.float64)
                   for r in replies], axis=0)
    per_silo = {n: relative(float(r.entropy), float(np.sum(r.counts)), k) for n, r in zip(names, replies,
                                                                                         strict=True)}
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.where(counts > 0, prob / counts, np.nan)
    return {"relative_entropy": relative(float(sum(r.entropy for r in replies)), float(counts.sum()), k),
            "relative_entropy_per_silo": per_silo,
            "average_probability": [None if not np.isfinite(v) else float(v) for v in avg],
            "monte_carlo": monte_carlo_of_labelling(replies, names)}


def monte_carlo_of_labelling(replies, names) -> dict | None:
    """Draws each silo's memberships averaged and the largest Monte Carlo standard error of a membership
    they left (``AssignReply``; docs/design.md §8); None when the local posterior was propagated."""
    if not any(int(getattr(r, "n_draws", 0)) for r in replies):
        return None

    def num(x):
        return float(x) if np.isfinite(x) else None

    return {"target": num(max(float(r.mc_target) for r in replies)),
            "max_error": num(max(float(r.mc_error) for r in replies)),
            "draws_per_silo": {n: int(r.n_draws) for n, r in zip(names, replies, strict=True)},
            "error_per_silo": {n: num(float(r.mc_error)) for n, r in zip(names, replies, strict=True)},
            "definition": "largest over rows and clusters of sd_t(w_ict) / sqrt(T): the standard error of a "
                          "membership probability averaged over T global draws"}


K_POSTERIOR_DEFINITION = (
    "global: at each assessment draw every silo samples each row's allocation from its allocation "
    "probabilities under that draw; K = number of global clusters receiving at least one row (the occupied "
    "components of an over-fitted mixture, over all silos); global_per_silo: the same within each silo; "
    "local: each silo's posterior of its number of occupied components in its own chains "
    "(docs/design.md §14.3)")


def _local_rows(transport, attribute: str, names) -> tuple | None:
    fetch = getattr(transport, attribute, None)
    if not callable(fetch):
        return None
    got = fetch()
    if got is None or not all(n in got for n in names):
        return None
    return tuple(got[n] for n in names)


def run_assessment(transport, names, matched, agg, config: FitConfig, rng: RngLike,
                   policy: FaultPolicy | None) -> tuple[dict | None, list[str]]:
    """The model-assessment round (docs/design.md §14): predictive checks, WAIC, occupied clusters.

    A silo that fails or refuses (its operator's ``share_assessment = False``) is left out of the
    assessment only, named in the returned warnings; the pooled checks then cover the other silos.
    """
    from vcmc.assessment import assess_requests, combine_assessment
    from vcmc.federation.faults import validate_reply

    root = _root(rng)
    index = {n: i for i, n in enumerate(transport.silos)}
    reqs, _ = assess_requests(names, index, matched, agg, config, root, _ASSESS_KEY)
    raw = transport.call(reqs, timeout=(policy or FaultPolicy()).timeout)
    replies, notes = {}, []
    for name in names:
        reply = raw.get(name)
        if isinstance(reply, SiloFailure) or reply is None:
            reason = reply.reason if isinstance(reply, SiloFailure) else "no reply"
            notes.append(f"silo {name!r} left out of the model assessment: {reason}")
            continue
        try:
            validate_reply(name, reqs[name], reply)
        except Exception as exc:  # noqa: BLE001 - a malformed reply leaves that silo out, nothing else
            notes.append(f"silo {name!r} left out of the model assessment: {exc}")
            continue
        replies[name] = reply
    if not replies:
        return None, notes
    return combine_assessment(replies, reqs, matched.n_modalities), notes


def convergence_warnings(summaries: list[SiloSummary], sampler) -> list[str]:
    """One line per silo whose chains ran to the maximum without meeting ``--iterations auto``'s targets."""
    out = []
    for s in summaries:
        if s.diagnostics.get("converged") == 0.0:
            out.append(f"silo {s.silo!r}: " + _unmet_targets(s.diagnostics, sampler) + f" within {sampler.n_iter} "
                       "iterations (--iterations auto); its draws are used as they are: raise --max-iterations "
                       "(see result.json, diagnostics.local)")
    return out


def _unmet_targets(d: dict, sampler) -> str:
    """Which of --iterations auto's targets a silo missed, with its values (R-hat, ESS or both)."""
    def worst(keys, pick):
        vals = [float(d[k]) for k in keys if isinstance(d.get(k), int | float) and np.isfinite(d[k])]
        return pick(vals) if vals else None

    rhat = worst(("rhat_log_posterior", "rhat_pi_max"), max)
    ess = worst(("ess_bulk_log_posterior", "ess_tail_log_posterior", "ess_bulk_pi_min", "ess_tail_pi_min"), min)
    missed = []
    if rhat is not None and rhat > sampler.target_rhat:
        missed.append(f"R-hat {rhat:.3f} > {sampler.target_rhat:g}")
    if ess is not None and ess < sampler.target_ess:
        missed.append(f"ESS {ess:.0f} < {sampler.target_ess:g}")
    if not missed:
        return (f"the chains did not reach R-hat <= {sampler.target_rhat:g} and ESS >= {sampler.target_ess:g} "
                "at a check")
    return "the chains did not converge: " + " and ".join(missed)


def server_steps(summaries: list[SiloSummary], transport, config: FitConfig, *, rng: RngLike = None,
                 method: str = "vcmc", policy: FaultPolicy | None = None,
                 timings: dict[str, float] | None = None, failures: list[SiloFailure] | None = None
                 ) -> GlobalResult:
    """Matching, aggregation and the global partition on the silos' summaries.

    Parameters
    ----------
    summaries : list of SiloSummary
        One per silo still taking part, in the order of ``transport.silos``.
    method : {"vcmc", "consensus"}
        Variational aggregation, or Scott et al.'s consensus weights on the same matched draws.
    """
    from vcmc.aggregation import aggregate, consensus
    from vcmc.matching import match, matched_draws

    policy = policy or FaultPolicy()
    timings = dict(timings or {})
    srv = server_generator(rng)
    names = tuple(s.silo for s in summaries)

    t0 = time.perf_counter()
    matching = match(summaries, config.matching, divergence=_divergence_fn(transport, names), rng=srv)
    timings["matching"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    matched = matched_draws(summaries, matching, config.matching, prior=config.prior, rng=srv)
    counts_fn = _counts_fn(transport, names, matching, policy)
    n_chains = int(config.sampler.n_chains)
    if method == "vcmc":
        agg = aggregate(matched, config=config.aggregation, prior=config.prior, counts_fn=counts_fn, rng=srv,
                        n_chains=n_chains)
    elif method == "consensus":
        agg = consensus(matched, kind="inverse-variance", rng=srv, n_chains=n_chains)
    else:
        raise ValueError(f"server_steps handles method 'vcmc' or 'consensus', got {method!r}")
    timings["aggregation"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    announce_global_draws(transport, names, matching, matched, agg, policy)   # the silos check them (gate)
    reqs = _assign_requests(names, matching, matched, agg, config.aggregation)
    replies, _ = gather(transport, reqs, FaultPolicy(min_silos=None, timeout=policy.timeout), stage="assign")
    partition_counts = np.stack([np.asarray(replies[n].counts, dtype=np.int64) for n in names])
    classification = classification_quality([replies[n] for n in names], names)
    timings["partition"] = time.perf_counter() - t0

    # Row-level labels and memberships reach this process only through the in-process and process-pool
    # transports' private calls (the user's own machine); Flower silos keep them on their hosts.
    assignments = _local_rows(transport, "local_assignments", names)
    memberships = _local_rows(transport, "local_memberships", names)

    assessment, assess_warnings = None, []
    if config.assessment.enabled:
        t0 = time.perf_counter()
        assessment, assess_warnings = run_assessment(transport, names, matched, agg, config, rng, policy)
        timings["assessment"] = time.perf_counter() - t0
    timings["total"] = sum(v for k, v in timings.items() if k != "total")

    from vcmc.matching.checks import matching_checks, summarise_checks

    warn = [f"silo {f.silo!r} left out: {f.reason}" for f in (failures or [])]
    checks = matching_checks(summaries, matching, level=config.matching.level)
    from vcmc.aggregation.checks import describe_prior_dominated, prior_dominated_profiles

    dominated = prior_dominated_profiles(summaries, matching, agg.profile_draws, beta=config.prior.beta,
                                         n_modalities=summaries[0].n_modalities, pi_draws=agg.pi_draws)
    artefacts = (summarise_checks(checks, matching.method) + convergence_warnings(summaries, config.sampler)
                 + describe_prior_dominated(dominated) + assess_warnings)
    diagnostics = {
        "elbo": float(agg.elbo) if np.isfinite(agg.elbo) else None,
        "elbo_trace": np.asarray(agg.elbo_trace).tolist(),
        "n_iter": int(agg.n_iter),
        "converged": bool(agg.converged),
        "rounds_after_upload": int(agg.n_rounds),
        "strategy": agg.strategy,
        "objective": agg.objective,
        "shares": agg.shares,
        "aggregation_weights": {"pi": agg.weights.pi.tolist(), "profiles": agg.weights.profiles.tolist()},
        "matching": {"method": matching.method, "assignment": [a.tolist() for a in matching.assignment],
                     "total_cost": matching.total_cost},
        "local": {s.silo: {"n_clusters": s.n_clusters, "n_withheld": s.n_withheld,
                           "counts_suppressed": s.counts_suppressed, **s.diagnostics} for s in summaries},
        "matching_checks": checks,
        "prior_dominated": dominated,
        "classification": classification,
        "n_clusters_posterior": {
            "global": None if assessment is None else assessment["k_global"],
            "local": local_k_posterior(summaries),
            "global_per_silo": None if assessment is None else assessment["k_global_per_silo"],
            "definition": K_POSTERIOR_DEFINITION},
        "n_chains": n_chains,
        "warnings": warn + artefacts,
    }
    if assessment is not None:
        diagnostics["ppc"] = assessment["ppc"]
        diagnostics["waic"] = assessment["waic"]
    for w in warn:
        warnings.warn(w, stacklevel=2)
    for w in artefacts:   # a property of the result, reported in it and by the CLI; not a Python warning
        log.info("%s", w)
    return GlobalResult.from_draws(
        pi_draws=agg.pi_draws, profile_draws=agg.profile_draws, method=method,
        n_modalities=summaries[0].n_modalities, silos=names, partition_counts=partition_counts,
        assignments=assignments, memberships=memberships, n_chains=agg.n_chains, timings=timings,
        config=config.to_dict(), seed=root_entropy(rng), diagnostics=diagnostics, matching=matching)


def run_vcmc(transport, config: FitConfig | None = None, *, rng: RngLike = None, method: str = "vcmc",
             policy: FaultPolicy | None = None, save_dir=None) -> GlobalResult:
    """The whole VCMC run through ``transport``: summaries, matching, aggregation, global partition.

    With ``save_dir`` the silo summaries are saved as soon as they arrive, so the server steps can be
    re-run without re-running the samplers: ``server_steps(list(load_summaries(save_dir).values()),
    transport, config)`` (``vcmc.federation.faults.load_summaries``).
    """
    config = config or FitConfig()
    policy = policy or FaultPolicy()
    t0 = time.perf_counter()
    summaries, failures = summarize_silos(transport, config, rng=rng, policy=policy)
    timings = {"apply": time.perf_counter() - t0}
    if save_dir is not None:
        from vcmc.federation.faults import save_summaries

        save_summaries(summaries, save_dir)
    return server_steps(summaries, transport, config, rng=rng, method=method, policy=policy,
                        timings=timings, failures=failures)
