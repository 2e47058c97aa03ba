"""The rounds stage: after the one-shot pass's matching and aggregation, the pooled model's blocked Gibbs sampler
across the silos (docs/design.md §16), with the server as a relay (docs/federation.md, "The rounds").

The server builds the start (each silo's local clusters to components, from the matching: ``start_components``)
and the chain's plan, sends every participant the same start, then relays every participant's vector of each
round to every participant until the silos' pooled chain stops; it then asks for the silos' labels, the chain's
answer (the same in every silo: checked) and its assessment. It computes nothing from the rounds' sums: in a
deployment it cannot (each vector is masked and padded with the silos' group secret) and in the analyst's own
session it need not (the silos compute the same chain either way, so both sample the same model).
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from vcmc._rng import as_seed_sequence
from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.federation.faults import FaultPolicy, gather
from vcmc.federation.transport import local_rows
from vcmc.model import beta_per_column
from vcmc.pooled.chain import doubling
from vcmc.progress import progress_bar
from vcmc.protocol.rounds import (
    RoundAssessRequest,
    RoundFinishRequest,
    RoundResultRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.results import GlobalResult

AUTO_FIRST_CHECK = 250     # the auto rounds' first checkpoint; then 500, 1,000 (docs/design.md §16)
AUTO_MAX_ROUNDS = 1000     # the most rounds of the auto plan (the agreement issue's bar)
AUTO_ANNEAL = 2.0          # the auto plan's inverse temperature of its second chain in the first half of its first
                           # burn-in (rounds 2-63): the start's copies of a cluster merge there instead of by drift,
                           # while the first chain's plain burn-in keeps what tempering would merge (docs/design.md §16)
AUTO_CHAINS = 2            # chains of the auto plan, side by side in the same rounds: settled only when they agree,
                           # else the answer (the chain of higher posterior) may be a poor mode (docs/design.md §16)
MAX_STORED_DRAWS = 500     # kept draws stored per window (the answer's draws and the memberships' rounds)
START_CAP_PER_PRIOR = 4    # aggregation.round_components = 0: at most 4 x prior.n_components start components
POOLED_K_DEFINITION = "occupied components of the pooled chain"   # as vcmc.research.baselines.full_mcmc's
START_COPY_BELOW = 2000    # a (silo, cluster) pair gets a component of its own in the start only below this many
                           # rows: the sweep merges two copies of one profile by their weights alone, in a time that
                           # grows with their rows, so a larger copy stays apart for the 1,000 rounds where the
                           # silos' versions agree (docs/design.md §16, "Start"; docs/results/real/rounds)


def start_components(partition_counts: np.ndarray, max_components: int | None = None,
                     copy_below: int | None = START_COPY_BELOW) -> tuple[np.ndarray, int]:
    """The over-complete start: ``start[s, k]``, the component of silo s's rows of global cluster k. The first
    silo holding cluster k keeps component k; every other (silo, cluster) pair with rows gets its own component;
    a pair with none starts in component k. A pair with ``copy_below`` rows or more (None: no such limit) is not
    copied: it starts in component k, as does then the first of the others. Returns the map and the number of
    components it uses.

    With ``max_components`` (at least K) and more pairs than that, cluster k's holders share ``1 + e_k``
    components, dealt in turn in silo order, where the ``max_components - K`` extra components are shared out
    in proportion to each cluster's other holders (largest remainders). Any start is valid for the chain
    (docs/design.md §16); this one keeps a round's cost bounded at the application's scale (30 silos x 27
    clusters would be 810 components) and still separates silos' versions of every shared cluster."""
    counts = np.asarray(partition_counts)
    n_silos, k = counts.shape
    start = np.tile(np.arange(k, dtype=np.int64), (n_silos, 1))
    copied = (counts > 0) if copy_below is None else (counts > 0) & (counts < copy_below)
    holders = [np.flatnonzero(copied[:, c]) for c in range(k)]
    others = np.asarray([max(h.size - 1, 0) for h in holders], dtype=np.int64)
    extra = others.copy()
    if max_components is not None and k + others.sum() > max_components:
        budget = max(int(max_components) - k, 0)
        share = budget * others / max(others.sum(), 1)
        extra = np.floor(share).astype(np.int64)
        left = budget - int(extra.sum())
        for c in np.argsort(-(share - extra), kind="stable")[:left]:
            extra[c] += 1
    nxt = k
    for c in range(k):
        groups = [c] + list(range(nxt, nxt + int(extra[c])))
        nxt += int(extra[c])
        for i, s in enumerate(holders[c][1:], start=1):
            start[s, c] = groups[i % len(groups)]
    return start, nxt


def local_start(one_shot: GlobalResult, max_components: int) -> tuple[np.ndarray, int]:
    """(S, K_max) each silo's local clusters to components (-1 past a silo's clusters): its clusters' global
    clusters (the matching) through ``start_components`` of the one-shot partition counts."""
    by_global, used = start_components(one_shot.partition_counts, max_components=max_components)
    assignment = one_shot.matching.assignment
    width = max(len(a) for a in assignment)
    out = np.full((len(assignment), width), -1, dtype=np.int64)
    for s, a in enumerate(assignment):
        out[s, :len(a)] = by_global[s, np.asarray(a, dtype=np.int64)]
    return out, used


def plan_of(one_shot: GlobalResult, config, *, secure: bool, root: np.random.SeedSequence, stop: bool) -> dict:
    """The fields of every participant's ``RoundStartRequest``."""
    agg, prior = config.aggregation, config.prior
    cap = int(agg.round_components) or START_CAP_PER_PRIOR * int(prior.n_components)
    start, used = local_start(one_shot, max(cap, one_shot.n_clusters))
    free = int(prior.n_components) - int(one_shot.n_clusters)
    birth_budget = (max(free, 0) + 1) // 2 if float(agg.round_births) > 0 else 0
    n_rounds = int(agg.rounds)
    checkpoints = doubling(min(AUTO_FIRST_CHECK, n_rounds), n_rounds) if stop else (n_rounds,)
    first_burn = (checkpoints[0] - 1) // 2
    gaussian = {}
    if getattr(one_shot, "gaussian_draws", None) is not None:
        # the pooled model's prior of the Gaussian items, unfractionated (one chain of all the rows)
        from vcmc.family import GAUSSIAN

        g = np.shape(one_shot.gaussian_draws)[2] // 2
        gaussian = {"gaussian_prior": np.asarray(GAUSSIAN.local_prior(config.prior, g, 1), dtype=np.float64)}
    return {"start": start, "n_components": max(int(prior.n_components), used + birth_budget),
            "alpha": float(prior.alpha), "beta": beta_per_column(prior.beta, one_shot.n_modalities),
            "checkpoints": np.asarray(checkpoints, dtype=np.int64), "stop": bool(stop),
            "n_chains": AUTO_CHAINS if stop else 1,
            "anneal": max(float(agg.round_anneal), AUTO_ANNEAL) if stop else float(agg.round_anneal),
            "anneal_until": 1 + first_burn // 2,
            "max_stored": MAX_STORED_DRAWS, "min_size": max(1, int(config.privacy.min_cluster_size)),
            "birth_share": float(agg.round_births), "birth_budget": birth_budget,
            "silo_weight_prior": float(prior.alpha) if agg.round_labels == "silo" else 0.0, "secure": secure,
            "seed_entropy": int(root.entropy), "spawn_key": tuple(int(k) for k in root.spawn_key), **gaussian}


def refine(one_shot: GlobalResult, transport, config, *, rng, policy: FaultPolicy | None = None,
           show_progress: bool | None = None, stop: bool = False) -> GlobalResult:
    """The rounds from ``one_shot`` (its matching and partition counts; its draws if the rounds fail nothing);
    the refined ``GlobalResult``. ``stop``: the chain stops at the first checkpoint where it settled (the auto
    plan, ``vcmc.rounds.plan``), else it makes ``aggregation.rounds`` rounds.

    Every silo of the one-shot result is required in every round: a silo lost mid-rounds ends the run with a
    ``SiloFailure`` naming it (the pooled model would change under the chain, and the others' vectors cannot be
    unmasked without its)."""
    policy = policy or FaultPolicy()
    every = FaultPolicy(min_silos=None, timeout=policy.timeout)
    names = tuple(one_shot.silos)
    secure = not bool(getattr(transport, "own_session", False))
    fields = plan_of(one_shot, config, secure=secure, root=as_seed_sequence(rng), stop=stop)
    t0 = time.perf_counter()
    start = RoundStartRequest(names=names, **fields)
    replies, _ = gather(transport, dict.fromkeys(names, start), every, stage="round start")
    trace_bytes, r = [], -1
    cap = int(fields["checkpoints"][-1])
    with progress_bar(cap - 1, "Global-informed rounds", enabled=show_progress, unit="round") as bar:
        while True:
            stops = {bool(replies[n].stop) for n in names}
            if stops == {True}:
                break
            if len(stops) > 1:
                raise InconsistentSiloSummaries(f"round {r + 1}: some silos' pooled chains stopped and others did not "
                                                "(the silos must compute the same chain from the same sums)")
            vectors = np.stack([np.asarray(replies[n].vector, dtype=np.uint64) for n in names])
            tags = np.stack([np.asarray(replies[n].tag, dtype=np.uint8) for n in names]) if r >= 0 and secure \
                else np.zeros(0, dtype=np.uint8)
            trace_bytes.append(int(vectors.nbytes + tags.nbytes))
            request = RoundSweepRequest(round=r, vectors=vectors, tags=tags)
            replies, _ = gather(transport, dict.fromkeys(names, request), every, stage=f"round {r + 1}")
            r += 1
            if r >= 2 and not any(replies[n].stop for n in names):      # a sweep was made (round r)
                bar.update(1)
    labels, _ = gather(transport, dict.fromkeys(names, RoundFinishRequest()), every, stage="round finish")
    answers, _ = gather(transport, dict.fromkeys(names, RoundResultRequest()), every, stage="round result")
    answer = _agreed(answers, names)
    seconds = time.perf_counter() - t0
    result = _result(one_shot, transport, names, answer, labels, trace_bytes, config, seconds, secure=secure,
                     n_components=int(fields["n_components"]))
    if config.assessment.enabled:
        _assess(result, transport, names, answer, config, policy)
    return result


def _agreed(answers, names):
    """The pooled chain's answer, which every silo computed alike (a digest of each reply compared)."""
    def digest(reply):
        h = hashlib.sha256()
        for key, value in sorted(reply.to_arrays().items()):
            h.update(key.encode() + np.ascontiguousarray(value).tobytes() if isinstance(value, np.ndarray)
                     else (key + repr(value)).encode())
        return h.hexdigest()

    digests = {n: digest(answers[n]) for n in names}
    if len(set(digests.values())) != 1:
        odd = [n for n in names if digests[n] != digests[names[0]]]
        raise InconsistentSiloSummaries(f"the silos' pooled chains give different answers ({odd} differ from "
                                        f"{names[0]!r}): they did not compute the same chain")
    return answers[names[0]]


def _result(one_shot: GlobalResult, transport, names, answer, labels, trace_bytes, config, seconds: float, *,
            secure: bool, n_components: int) -> GlobalResult:
    """The refined result: the pooled chain's answer (its clusters, their stored draws), each silo's labels of
    them, and the rounds' record."""
    from vcmc.result_builder import classification_quality, one_cluster_silo_warnings

    partition_counts = np.stack([np.asarray(labels[n].counts, dtype=np.int64) for n in names])
    trace_k = np.asarray(answer.trace_k, dtype=np.int64)
    trace_lj = np.asarray(answer.trace_log_joint, dtype=np.float64)
    first = int(answer.first_kept)
    per_round = [{"round": i + 1, "k": int(trace_k[i]), "log_joint": float(trace_lj[i]), "kept": i + 1 > first,
                  "bytes_sent": trace_bytes[i + 1] if i + 1 < len(trace_bytes) else 0}
                 for i in range(trace_k.size)]
    stability = {"stable": bool(answer.settled), "rhat": None if not np.isfinite(answer.rhat) else float(answer.rhat),
                 "reason": str(answer.reason), "chains_agree": bool(answer.chains_agree)}
    kept_k = trace_k[first:]
    diagnostics = dict(one_shot.diagnostics)
    diagnostics["one_shot"] = {"n_clusters": int(one_shot.n_clusters),
                               "partition_counts": one_shot.partition_counts.tolist(),
                               "matching_checks": one_shot.diagnostics.get("matching_checks")}
    births = {"share": float(config.aggregation.round_births), "columns": answer.birth_columns.tolist(),
              "rows": answer.birth_rows.tolist(), "components": answer.birth_components.tolist(),
              "clusters": [int(c) + 1 if c >= 0 else None for c in answer.birth_clusters]}
    if not births["columns"]:
        births["none_because"] = "no value is the least probable of the minimum cluster size of the silos' " \
                                 "worst-explained rows" if births["share"] > 0 else "aggregation.round_births is 0"
    diagnostics["rounds"] = {
        "design": "blocked Gibbs of the pooled model across silos, the server a relay (docs/design.md §16)",
        "n_rounds": int(trace_k.size), "burn_in": first, "n_kept": int(trace_k.size - first),
        "n_draws": int(np.asarray(answer.pi_draws).shape[0]), "components": n_components,
        "kept_components": np.asarray(answer.clusters).tolist(), "labels": str(config.aggregation.round_labels),
        "secure_sum": secure, "log_joint_grid": float(answer.log_joint_grid), "seconds": seconds,
        "per_round": per_round, "stability": stability, "births": births, "chosen_chain": int(answer.chosen),
        "disclosed": _disclosed(secure, answer, trace_bytes)}
    diagnostics["classification"] = classification_quality([labels[n] for n in names], names)
    ks, n_k = np.unique(kept_k if kept_k.size else trace_k, return_counts=True)
    local_k = (one_shot.diagnostics.get("n_clusters_posterior") or {}).get("local", {})
    diagnostics["n_clusters_posterior"] = {
        "global": {"values": ks.tolist(), "probabilities": (n_k / n_k.sum()).tolist()}, "local": local_k,
        "global_per_silo": None, "definition": POOLED_K_DEFINITION}
    for key in ("ppc", "waic", "prior_dominated", "matching_checks"):
        diagnostics.pop(key, None)
    notes = [] if stability["stable"] else [_unsettled(stability, trace_k.size)]
    withheld = None if answer.gaussian_withheld is None else np.asarray(answer.gaussian_withheld, dtype=bool)
    if withheld is not None:
        diagnostics["rounds"]["gaussian_withheld"] = withheld.astype(int).tolist()
        if withheld.any():
            cells = [f"cluster {k + 1} item {g + 1}" for k, g in zip(*np.nonzero(withheld), strict=True)]
            notes.append(f"the rounds' Gaussian draws of {', '.join(cells)} are the prior's: observed in fewer rows "
                         "than the minimum cluster size on average over the kept rounds, they were withheld "
                         "(docs/design.md §17.8)")
    diagnostics["warnings"] = [w for w in diagnostics.get("warnings", []) if "labelled rows" not in w] \
        + one_cluster_silo_warnings(partition_counts, names) + notes \
        + ["the matching checks describe the one-shot pass; they were not recomputed after the rounds (nothing to "
           "do: the result's clusters are the rounds', the pooled model's sampler across the silos, not a matching; "
           "a warning above about the silos' resolution describes the one-shot pass that the rounds correct)"]
    timings = dict(one_shot.timings)
    timings["rounds"] = seconds
    timings["total"] = timings.get("total", 0.0) + seconds
    return GlobalResult.from_draws(
        pi_draws=np.asarray(answer.pi_draws), profile_draws=np.asarray(answer.profile_draws),
        gaussian_draws=None if answer.gaussian_draws is None else np.asarray(answer.gaussian_draws, dtype=np.float64),
        method=one_shot.method, n_modalities=one_shot.n_modalities, silos=names, partition_counts=partition_counts,
        assignments=local_rows(transport, "local_assignments", names),
        memberships=local_rows(transport, "local_memberships", names), n_chains=1, timings=timings,
        config=one_shot.config, seed=one_shot.seed, diagnostics=diagnostics, matching=None)


def _disclosed(secure: bool, answer, trace_bytes) -> dict:
    """What the rounds disclosed to the server in total (docs/federation.md, "The rounds")."""
    k, t = np.asarray(answer.pi_draws).shape[1], np.asarray(answer.pi_draws).shape[0]
    return {"per_round": ("nothing: every vector masked and padded with the silos' group secret, uniform to the "
                          "server alone or summed") if secure
            else "each silo's plain counts (the analyst's own session)",
            "answer": f"{t} stored draws of the weights and profiles" + (
                " and the Gaussian items' means and variances" if answer.gaussian_draws is not None else "")
                      + f" of {k} clusters of at least the minimum cluster size, the trace of K and of the log joint"
                      + (" (on its grid)" if secure else ""),
            "per_silo": "the labels' cluster-level sums (an assign reply's rules) and the assessment's sums (an assess "
                        "reply's rules)",
            "bytes_relayed": int(sum(trace_bytes))}


def _unsettled(stability: dict, n_rounds: int) -> str:
    if not stability["chains_agree"]:
        return (f"the rounds' two chains did not agree within {n_rounds} rounds: the answer is the chain of higher "
                "posterior, and it may be a poor mode; raise aggregation.rounds (--rounds) and compare")
    rhat = "" if stability["rhat"] is None else \
        f" (the log joint's R-hat over the kept rounds is {stability['rhat']:.3f})"
    return (f"the rounds did not settle within {n_rounds} rounds{rhat}; raise aggregation.rounds (--rounds) and "
            "compare")


def _assess(result: GlobalResult, transport, names, answer, config, policy: FaultPolicy) -> None:
    """The model assessment (docs/design.md §14) of the rounds' answer, in place: each silo checks its rows at
    ``assessment.n_replicates`` of the answer's stored draws, which it has (``RoundAssessRequest``), with the
    weights its rows are labelled with: its own (``round_labels = "silo"``, the default, in the analyst's own
    session without secure sum), else the pooled ones."""
    from vcmc.assessment import combine_assessment
    from vcmc.protocol import AssessRequest
    from vcmc.rows.ppc import choose_pairs
    from vcmc.spacing import evenly_spaced

    t0 = time.perf_counter()
    diag = result.diagnostics
    request = RoundAssessRequest(n_replicates=int(config.assessment.n_replicates),
                                 max_pairs=int(config.assessment.max_pairs))
    replies, failures = gather(transport, dict.fromkeys(names, request), FaultPolicy(timeout=policy.timeout),
                               stage="round assessment", optional=True)
    notes = [f"silo {f.silo!r} left out of the model assessment: {f.reason}" for f in failures]
    if replies:
        pi, prof = np.asarray(answer.pi_draws), np.asarray(answer.profile_draws)
        idx = evenly_spaced(pi.shape[0], int(request.n_replicates))
        pairs = choose_pairs(pi[idx].mean(axis=0), prof[idx].mean(axis=0), result.n_modalities, request.max_pairs)
        # each silo's replicates were drawn at the weights it says (its own, where its rows are labelled under
        # them), so its expected counts are computed at those (docs/design.md §16)
        own = {n: np.asarray(r.weights) for n, r in replies.items() if np.asarray(r.weights).size}
        as_checked = {n: AssessRequest(pi=own.get(n, pi[idx]), profiles=prof[idx], pairs=pairs, seed_entropy=0,
                                       spawn_key=()) for n in replies}
        assessment = combine_assessment(replies, as_checked, result.n_modalities)
        diag["ppc"], diag["waic"] = assessment["ppc"], assessment["waic"]
        diag["n_clusters_posterior"]["global_per_silo"] = assessment["k_global_per_silo"]
    seconds = time.perf_counter() - t0
    if replies:
        diag["rounds"]["assessment"] = {"n_replicates": int(idx.size), "seconds": seconds,
                                        "weights": "silo" if len(own) == len(replies) else
                                        "pooled" if not own else f"silo ({len(own)} of {len(replies)} silos)"}
    result.timings["rounds_assessment"] = seconds
    result.timings["total"] = result.timings.get("total", 0.0) + seconds
    diag["warnings"] = [*diag["warnings"], *notes]
