"""The rounds stage: after the one-shot result, ``R - 1`` rounds of the pooled blocked Gibbs sampler across
the silo boundary (docs/design.md §16), then the result rebuilt from the kept rounds.

Start (over-complete, from the one-shot answer): each (silo, global cluster) pair with rows is its own
component (``start_components``), so
a silo whose one-shot clusters merged several pooled clusters is not tied to the merge, and the sampler's
sparse weight prior empties the components the pooled data do not need (the over-fitted mixture's rule,
docs/design.md §2). The first half of the rounds is burn-in; the kept half gives the global draws and the
memberships. Every round's request and reply passes the silo's gate (strategy "rounds").
"""

from __future__ import annotations

import time

import numpy as np

from vcmc._rng import as_seed_sequence
from vcmc.federation.faults import FaultPolicy, gather
from vcmc.federation.transport import local_rows
from vcmc.model import beta_per_column, kept_component_profiles, profile_offsets
from vcmc.progress import progress_bar
from vcmc.protocol.rounds import (
    RoundBirthRequest,
    RoundFinishRequest,
    RoundKeyRequest,
    RoundMoveRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.results import GlobalResult
from vcmc.rounds.blocked_gibbs import align_to, draw_parameters, log_joint
from vcmc.rounds.moves import propose, split_log_ratio

ROUNDS_KEY = 3            # the rounds' stream under the root seed (the layout: vcmc.pipeline)
MAX_KEPT_DRAWS = 1000      # global draws kept in the result (evenly spaced over the kept rounds)
START_CAP_PER_PRIOR = 4    # aggregation.round_components = 0: at most 4 x prior.n_components start components


def _sum(replies, n_components: int, *, secure: bool, stage: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The summed counts of a round's replies (under secure aggregation: of their masked vectors, the only
    form in which the server receives them) and the bytes the silos sent."""
    if secure:
        from vcmc.rounds.secure_sum import total

        cluster, modality = total(replies, n_components, stage)
        return cluster, modality, sum(int(np.asarray(r.masked).nbytes) for r in replies.values())
    cluster = np.sum([np.asarray(r.cluster, dtype=np.float64) for r in replies.values()], axis=0)
    modality = np.sum([np.asarray(r.modality, dtype=np.float64) for r in replies.values()], axis=0)
    sent = sum(int(np.asarray(r.cluster).nbytes + np.asarray(r.modality).nbytes) for r in replies.values())
    return cluster, modality, sent


def refine(one_shot: GlobalResult, transport, config, *, rng, policy: FaultPolicy | None = None,
           show_progress: bool | None = None) -> GlobalResult:
    """``config.aggregation.rounds - 1`` rounds from ``one_shot``; the refined ``GlobalResult``.

    Every silo of the one-shot result is required in every round (a silo lost mid-rounds would change the
    pooled model under the chain). ``diagnostics.rounds`` records per round the occupied components (K), the
    collapsed log joint ``log p(x, z)``, the components born (occupied again) and emptied, the least number
    of rows that changed component (half the L1 change of the summed counts), and the bytes the silos sent.
    """
    policy = policy or FaultPolicy()
    every = FaultPolicy(min_silos=None, timeout=policy.timeout)
    n_rounds = int(config.aggregation.rounds)
    names = tuple(one_shot.silos)
    cap = int(config.aggregation.round_components) or START_CAP_PER_PRIOR * int(config.prior.n_components)
    starts, used = start_components(one_shot.partition_counts, max_components=max(cap, one_shot.n_clusters))
    # the births take components of their own beyond the start's: the silos' pieces stay as they were (fewer,
    # larger pieces of a cluster all silos hold are copies the chain takes far longer to merge)
    births = _births(one_shot, transport, names, every, config)
    n_birth = len(births["columns"])
    births["components"] = list(range(used, used + n_birth))
    n_comp = max(int(config.prior.n_components), used + n_birth)
    alpha = float(config.prior.alpha)
    beta_cols = beta_per_column(config.prior.beta, one_shot.n_modalities)
    root = as_seed_sequence(rng)
    srv = np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, ROUNDS_KEY)))
    t0 = time.perf_counter()

    own = alpha if config.aggregation.round_labels == "silo" else 0.0
    secure = bool(config.aggregation.round_secure_sum)
    keys, key_sent = None, 0
    if secure:
        from vcmc.rounds.secure_sum import public_keys

        key_replies, _ = gather(transport, {n: RoundKeyRequest(n_silos=len(names)) for n in names}, every,
                                stage="round keys")
        keys = public_keys(key_replies, names)
        key_sent = int(keys.nbytes)
    birth_fields = ({"birth_share": births["share"], "birth_columns": np.asarray(births["columns"], dtype=np.int64),
                     "birth_components": np.asarray(births["components"], dtype=np.int64)} if n_birth else {})
    replies, _ = gather(transport, {n: RoundStartRequest(start=starts[s], n_components=n_comp, silo_weight_prior=own,
                                                         peer_keys=keys, peer_index=s if secure else -1,
                                                         **birth_fields)
                                    for s, n in enumerate(names)}, every, stage="round start")
    cluster, modality, sent = _sum(replies, n_comp, secure=secure, stage="round start")
    sent += key_sent
    start_joint = log_joint(cluster, modality, alpha=alpha, beta_cols=beta_cols, n_modalities=one_shot.n_modalities)
    trace = [{"round": 1, "k": int(np.count_nonzero(cluster)), "log_joint": start_joint, "born": 0, "emptied": 0,
              "rows_moved_at_least": 0, "bytes_sent": sent, "kept": False, "inverse_temperature": 1.0}]
    burn = (n_rounds - 1) // 2
    n_keep = n_rounds - 1 - burn
    stored = set(np.unique(np.linspace(0, n_keep - 1, min(n_keep, MAX_KEPT_DRAWS)).round().astype(int)).tolist())
    kept_pi, kept_prof = [], []
    reference, kept_sum, n_kept = None, None, 0
    size_sum = np.zeros(n_comp)
    anneal = float(config.aggregation.round_anneal)
    moves = bool(config.aggregation.round_split_merge)
    offsets = profile_offsets(one_shot.n_modalities)
    n_moves = {"merge": [0, 0], "split": [0, 0]}      # proposed, accepted
    origin = np.arange(n_comp)                         # the start component of each label (alignment permutes)
    with progress_bar(n_rounds - 1, "Global-informed rounds", enabled=show_progress, unit="round") as bar:
        for r in range(2, n_rounds + 1):
            log_pi, log_prof = draw_parameters(cluster, modality, alpha=alpha, beta_cols=beta_cols,
                                               n_modalities=one_shot.n_modalities, rng=srv)
            perm = np.arange(n_comp) if reference is None else align_to(log_prof, reference)
            log_pi, log_prof = log_pi[perm], log_prof[perm]
            origin = origin[perm]
            keep = r - 1 > burn
            # the silos add memberships at the kept rounds whose draws the result keeps (at most
            # MAX_KEPT_DRAWS, evenly spaced): the memberships are then the result's own draws' (docs/design.md
            # §16), and the other kept rounds are plain sweeps (a silo's memberships pass costs more than its sweep)
            store = keep and n_kept in stored
            inv_temp = anneal if r - 1 <= burn // 2 else 1.0
            reqs = {n: RoundSweepRequest(round=r, log_pi=log_pi, log_profiles=log_prof, keep=store,
                                         seed_entropy=int(root.entropy), spawn_key=(*root.spawn_key, ROUNDS_KEY, r, s),
                                         inverse_temperature=inv_temp)
                    for s, n in enumerate(names)}
            replies, _ = gather(transport, reqs, every, stage=f"round {r}")
            before = cluster[perm]             # the last counts under this round's labels
            cluster, modality, sent = _sum(replies, n_comp, secure=secure, stage=f"round {r}")
            move, accepted = None, False
            if moves and r < n_rounds:
                move, accepted, cluster, modality, move_sent = _split_merge(
                    transport, names, every, cluster, modality, r, root, srv, alpha=alpha, beta_cols=beta_cols,
                    offsets=offsets)
                sent += move_sent
                if move is not None:
                    n_moves[move][0] += 1
                    n_moves[move][1] += int(accepted)
            prof = np.exp(log_prof)
            if keep:
                # the reference of the next alignment: the mean of the kept draws (this draw during burn-in)
                kept_sum = prof if kept_sum is None else kept_sum + prof
                size_sum += cluster
                if store:
                    kept_pi.append(log_pi)
                    kept_prof.append(log_prof)
                n_kept += 1
                reference = kept_sum / n_kept
            else:
                reference = prof
            trace.append({"round": r, "k": int(np.count_nonzero(cluster)),
                          "log_joint": log_joint(cluster, modality, alpha=alpha, beta_cols=beta_cols,
                                                 n_modalities=one_shot.n_modalities),
                          "born": int(np.count_nonzero((cluster > 0) & (before == 0))),
                          "emptied": int(np.count_nonzero((cluster == 0) & (before > 0))),
                          "rows_moved_at_least": int(np.abs(cluster - before).sum() // 2), "bytes_sent": sent,
                          "kept": bool(keep), "inverse_temperature": inv_temp,
                          **({"move": move, "move_accepted": accepted} if moves else {})})
            bar.update(1)
    min_size = max(1, int(config.privacy.min_cluster_size))
    result = _result(one_shot, transport, names, trace, np.asarray(kept_pi), np.asarray(kept_prof),
                     size_sum / max(n_kept, 1), min_size, every, time.perf_counter() - t0,
                     labels=str(config.aggregation.round_labels), secure=secure)
    _assess(result, transport, names, np.asarray(kept_prof), config, root, policy)
    # which births are global clusters of the result (its 1-based number; None: emptied or under the minimum)
    kept = result.diagnostics["rounds"]["kept_components"]
    labels = [int(np.flatnonzero(origin == c)[0]) for c in births["components"]]
    births["clusters"] = [kept.index(lab) + 1 if lab in kept else None for lab in labels]
    result.diagnostics["rounds"]["births"] = births
    if moves:
        result.diagnostics["rounds"]["split_merge"] = {
            kind: {"proposed": p, "accepted": a} for kind, (p, a) in n_moves.items()}
    return result


POOLED_K_DEFINITION = "occupied components of the pooled chain"   # as vcmc.research.baselines.full_mcmc's

MOVE_KEY = 1   # the silos' streams of a split proposal: (..., ROUNDS_KEY, round, silo, MOVE_KEY)
ASSESS_KEY = 2  # the silos' streams of the assessment after the rounds: (..., ROUNDS_KEY, 0, silo, ASSESS_KEY)
ONE_SHOT_ASSESSMENT = ("the model assessment (predictive checks, WAIC) and the matching checks describe the one-shot "
                       "pass; they were not recomputed after the rounds")


def _assess(result: GlobalResult, transport, names, log_prof, config, root, policy) -> None:
    """The model assessment (docs/design.md §14) of the rounds' answer, in place: each silo checks its rows
    at R of the kept rounds' draws (``RoundAssessRequest``: the profiles as their sweeps sent them, the
    result's clusters and the pooled weights of those draws). The pooled weights whatever the labels: the
    model the rounds sample is the pooled one (a silo's own weights, ``round_labels = "silo"``, are a way of
    labelling its rows, and the server knows them only through disclosure-protected counts, which withhold a
    small silo's clusters). Answered only in the analyst's own session, so a deployment's rounds keep the
    one-shot pass's warning instead."""
    if not config.assessment.enabled or not getattr(transport, "own_session", False) or log_prof.shape[0] == 0:
        return
    from vcmc.assessment import choose_pairs, combine_assessment, even_draws
    from vcmc.protocol import AssessRequest
    from vcmc.protocol.rounds import RoundAssessRequest

    t0 = time.perf_counter()
    diag = result.diagnostics
    keep = np.asarray(diag["rounds"]["kept_components"], dtype=np.int64)
    idx = even_draws(log_prof.shape[0], int(config.assessment.n_replicates))
    sent = np.ascontiguousarray(log_prof[idx])
    prof = kept_component_profiles(sent, keep, result.n_modalities)
    pooled_pi = np.asarray(result.pi_draws)[idx]            # the kept draws' weights of the result's clusters
    pairs = choose_pairs(pooled_pi.mean(axis=0), prof.mean(axis=0), result.n_modalities,
                         int(config.assessment.max_pairs))
    reqs, as_checked = {}, {}
    for s, name in enumerate(names):
        key = (*root.spawn_key, ROUNDS_KEY, 0, s, ASSESS_KEY)
        reqs[name] = RoundAssessRequest(log_profiles=sent, keep=keep, pi=pooled_pi, pairs=pairs,
                                        seed_entropy=int(root.entropy), spawn_key=key)
        as_checked[name] = AssessRequest(pi=pooled_pi, profiles=prof, pairs=pairs, seed_entropy=int(root.entropy),
                                         spawn_key=key)
    replies, failures = gather(transport, reqs, FaultPolicy(timeout=(policy or FaultPolicy()).timeout),
                               stage="round assessment", optional=True)
    notes = [f"silo {f.silo!r} left out of the model assessment: {f.reason}" for f in failures]
    if not replies:
        diag["warnings"] = [*diag["warnings"], *notes]
        return
    assessment = combine_assessment(replies, as_checked, result.n_modalities)
    diag["ppc"], diag["waic"] = assessment["ppc"], assessment["waic"]
    diag["n_clusters_posterior"]["global_per_silo"] = assessment["k_global_per_silo"]
    seconds = time.perf_counter() - t0
    diag["rounds"]["assessment"] = {"n_replicates": int(idx.size), "weights": "pooled", "seconds": seconds}
    result.timings["rounds_assessment"] = seconds
    result.timings["total"] = result.timings.get("total", 0.0) + seconds
    diag["warnings"] = [("the matching checks describe the one-shot pass; they were not recomputed after the "
                         "rounds") if w == ONE_SHOT_ASSESSMENT else w for w in diag["warnings"]] + notes


def _births(one_shot: GlobalResult, transport, names, every: FaultPolicy, config) -> dict:
    """The births of the start (docs/design.md §16, "Births"): each silo counts, per profile column, its
    worst-explained rows whose least probable value it is (``RoundBirthRequest``); the columns held by at least
    the minimum cluster size of those rows over the silos, most first, each start a new component beyond the
    start's, as many as half of the components the one-shot clusters leave free in ``prior.n_components``.
    Returns the record of ``diagnostics.rounds.births`` (``columns`` empty when there are none, with the
    reason)."""
    agg = config.aggregation
    share = float(agg.round_births)
    free = int(config.prior.n_components) - int(one_shot.n_clusters)
    budget = (max(free, 0) + 1) // 2
    record = {"share": share, "budget": budget, "columns": [], "rows": [], "components": [], "clusters": []}
    reason = None
    if share <= 0:
        reason = "aggregation.round_births is 0"
    elif budget <= 0:
        reason = "the one-shot clusters fill prior.n_components"
    elif agg.assign != "posterior":
        reason = ("the one-shot labels were made from the matching alone (assign = local), without the global "
                  "profiles the misfits are scored under")
    elif agg.round_secure_sum:
        reason = "secure-sum rounds (a silo's birth counts would reach the server unmasked)"
    if reason is not None:
        record["none_because"] = reason
        return record
    replies, _ = gather(transport, {n: RoundBirthRequest(share=share) for n in names}, every, stage="round births")
    counts = np.sum([np.asarray(r.counts, dtype=np.float64) for r in replies.values()], axis=0)
    min_size = max(1, int(config.privacy.min_cluster_size))
    order = np.argsort(-counts, kind="stable")
    chosen = [int(j) for j in order[:budget] if counts[j] >= min_size]
    record.update(columns=chosen, rows=[int(counts[j]) for j in chosen])
    if not chosen:
        record["none_because"] = (f"no value is the least probable of {min_size} (the minimum cluster size) of the "
                                  "silos' worst-explained rows")
    return record


def _split_merge(transport, names, every, cluster, modality, r, root, srv, *, alpha, beta_cols, offsets):
    """One split-merge proposal on the allocation after round r's sweep (``vcmc.rounds.moves``), decided
    here: an accepted move changes the counts the next draw is made from (the silos' next sweep draws every
    row afresh given that draw, so they need not apply it). Returns the kind proposed (None: no candidate),
    whether it was accepted, the counts after it, and the bytes the silos sent."""
    prop = propose(cluster, modality, alpha=alpha, beta_cols=beta_cols, offsets=offsets, rng=srv)
    if prop is None:
        return None, False, cluster, modality, 0
    reqs = {n: RoundMoveRequest(kind=prop.kind, a=prop.a, b=prop.b, log_profile_a=prop.log_theta_a,
                                log_profile_b=prop.log_theta_b, log_rho=prop.log_rho, log_1m_rho=prop.log_1m_rho,
                                seed_entropy=int(root.entropy),
                                spawn_key=(*root.spawn_key, ROUNDS_KEY, r, s, MOVE_KEY))
            for s, n in enumerate(names)}
    replies, _ = gather(transport, reqs, every, stage=f"round {r} move")
    log_q = float(sum(rep.log_q for rep in replies.values()))
    sent = sum(8 + int(np.asarray(rep.modality_b).nbytes) for rep in replies.values())
    if prop.kind == "merge":
        log_ratio = prop.log_server + log_q
        new_cluster, new_modality = cluster.copy(), modality.copy()
        new_cluster[prop.a] += cluster[prop.b]
        new_modality[prop.a] += modality[prop.b]
        new_cluster[prop.b] = 0.0
        new_modality[prop.b] = 0.0
    else:
        n_b = float(sum(rep.cluster_b for rep in replies.values()))
        ct_b = np.sum([np.asarray(rep.modality_b, dtype=np.float64) for rep in replies.values()], axis=0)
        log_ratio, new_cluster, new_modality = split_log_ratio(prop, cluster, modality, n_b, ct_b, alpha=alpha,
                                                               beta_cols=beta_cols, offsets=offsets)
        log_ratio -= log_q
    accept = bool(np.log(srv.random()) < log_ratio)
    if accept:
        return prop.kind, True, new_cluster, new_modality, sent
    return prop.kind, False, cluster, modality, sent


def start_components(partition_counts: np.ndarray, max_components: int | None = None) -> tuple[np.ndarray, int]:
    """The over-complete start: ``start[s, k]``, the component of silo s's rows labelled k. The first silo
    holding cluster k keeps component k; every other (silo, cluster) pair with labelled rows gets its own
    component; a pair with none counted (none, or fewer than the minimum cluster size, withheld) starts in
    component k. Returns the map and the number of components it uses.

    With ``max_components`` (at least K) and more pairs than that, cluster k's holders share ``1 + e_k``
    components, dealt in turn in silo order, where the ``max_components - K`` extra components are shared out
    in proportion to each cluster's other holders (largest remainders). Any start is valid for the chain
    (docs/design.md §16); this one keeps a round's cost bounded at the application's scale (30 silos x 27
    clusters would be 810 components) and still separates silos' versions of every shared cluster."""
    counts = np.asarray(partition_counts)
    n_silos, k = counts.shape
    start = np.tile(np.arange(k, dtype=np.int64), (n_silos, 1))
    holders = [np.flatnonzero(counts[:, c] > 0) for c in range(k)]
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


def stability_of(kept: list[dict], max_rhat: float = 1.05) -> dict:
    """Did the kept rounds settle? ArviZ's rank-normalised split R-hat of the collapsed log joint over the
    kept rounds (two halves as two chains), and the most frequent occupied K of each half: stable when R-hat
    is below ``max_rhat`` (the sampler's target, docs/design.md §4.1.1) and the halves' K agree."""
    import arviz as az

    lj = np.asarray([t["log_joint"] for t in kept], dtype=np.float64)
    ks = np.asarray([t["k"] for t in kept], dtype=np.int64)
    half = lj.size // 2
    if half < 10:
        return {"stable": False, "rhat": None, "k_first": None, "k_second": None,
                "said": f"the rounds kept {lj.size} rounds, too few to judge whether they settled; raise "
                        "aggregation.rounds (--rounds)"}
    halves = np.stack([lj[:half], lj[half:2 * half]])
    rhat = float(az.rhat(halves)) if np.ptp(halves) > 0 else 1.0
    k1, k2 = (int(np.bincount(k).argmax()) for k in (ks[:half], ks[half:]))
    stable = bool(rhat < max_rhat and k1 == k2)
    said = "" if stable else (
        f"the rounds did not settle: over the kept rounds the occupied components went from {k1} to {k2} and the "
        f"log joint's R-hat is {rhat:.3f} (target < {max_rhat:g}); raise aggregation.rounds (--rounds) and "
        "compare, or, in the analyst's own session, anneal the burn-in (aggregation.round-anneal = 2, which settled "
        "the application-scale runs that had not: docs/results/ehr/README.md)")
    return {"stable": stable, "rhat": rhat, "k_first": k1, "k_second": k2, "said": said}


def _result(one_shot: GlobalResult, transport, names, trace, log_pi, log_prof, mean_size, min_size: int,
            every: FaultPolicy, seconds: float, *, labels: str, secure: bool) -> GlobalResult:
    """The refined result: the components with at least ``min_size`` rows on average over the kept rounds
    (the minimum cluster size, the rule every local and full-data partition follows) are the global clusters,
    largest first; the silos' memberships of them; the kept draws restricted to them."""
    pi = np.exp(log_pi)
    kept_rounds = [t for t in trace if t["kept"]]
    keep = np.flatnonzero(mean_size >= min_size)
    if keep.size == 0:
        keep = np.asarray([int(np.argmax(mean_size))])
    keep = keep[np.argsort(-mean_size[keep], kind="stable")]
    replies, _ = gather(transport, {n: RoundFinishRequest(keep=keep.astype(np.int64)) for n in names}, every,
                        stage="round finish")
    pi_k = pi[:, keep]
    pi_k = pi_k / pi_k.sum(axis=1, keepdims=True)
    prof_k = np.exp(log_prof[:, keep, :])
    partition_counts = np.stack([np.asarray(replies[n].counts, dtype=np.int64) for n in names])
    from vcmc.result_builder import classification_quality, one_cluster_silo_warnings

    diagnostics = dict(one_shot.diagnostics)
    diagnostics["one_shot"] = {"n_clusters": int(one_shot.n_clusters),
                               "partition_counts": one_shot.partition_counts.tolist(),
                               "matching_checks": one_shot.diagnostics.get("matching_checks"),
                               # the one-shot pass's WAIC: the only one a deployment's rounds have (the assessment
                               # after the rounds is answered in the analyst's own session only)
                               "waic": one_shot.diagnostics.get("waic")}
    diagnostics["rounds"] = {
        "design": "blocked Gibbs of the pooled model across silos, over-complete start from the one-shot answer "
                  "(docs/design.md §16)",
        "n_rounds": len(trace), "burn_in": len(trace) - len(kept_rounds), "n_kept": len(kept_rounds),
        "n_draws": int(pi.shape[0]), "components": int(pi.shape[1]), "kept_components": keep.tolist(),
        "labels": labels, "secure_sum": secure,
        "seconds": seconds, "per_round": trace}
    diagnostics["classification"] = classification_quality([replies[n] for n in names], names)
    # the pooled chain's posterior of K (its occupied components over the kept rounds), as full-data MCMC's;
    # the silos' own posteriors of their local K stay as the one-shot pass recorded them
    ks, n_k = np.unique([t["k"] for t in kept_rounds] or [int(np.count_nonzero(mean_size))], return_counts=True)
    local_k = (one_shot.diagnostics.get("n_clusters_posterior") or {}).get("local", {})
    diagnostics["n_clusters_posterior"] = {
        "global": {"values": ks.tolist(), "probabilities": (n_k / n_k.sum()).tolist()}, "local": local_k,
        "global_per_silo": None, "definition": POOLED_K_DEFINITION}
    stability = stability_of(kept_rounds)
    diagnostics["rounds"]["stability"] = stability
    for key in ("ppc", "waic", "prior_dominated", "matching_checks"):
        diagnostics.pop(key, None)
    one_shot_words = [w for w in diagnostics.get("warnings", []) if "labelled rows" not in w]
    diagnostics["warnings"] = one_shot_words + one_cluster_silo_warnings(partition_counts, names) + [
        ONE_SHOT_ASSESSMENT] + ([] if stability["stable"] else [stability["said"]])
    timings = dict(one_shot.timings)
    timings["rounds"] = seconds
    timings["total"] = timings.get("total", 0.0) + seconds
    return GlobalResult.from_draws(
        pi_draws=pi_k, profile_draws=prof_k, method=one_shot.method, n_modalities=one_shot.n_modalities,
        silos=names, partition_counts=partition_counts,
        assignments=local_rows(transport, "local_assignments", names),
        memberships=local_rows(transport, "local_memberships", names), n_chains=1, timings=timings,
        config=one_shot.config, seed=one_shot.seed, diagnostics=diagnostics, matching=None)
