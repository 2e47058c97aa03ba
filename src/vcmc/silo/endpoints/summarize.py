"""Summarize: the apply step on the silo's rows, the minimum cluster size, and the summary as it may leave
(docs/design.md §4.3, docs/federation.md)."""

from __future__ import annotations

import logging

import numpy as np

from vcmc.disclosure import apply_min_cluster_size, effective_privacy, round_counts, suppress_small_cells
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import SiloSummary, SummarizeRequest
from vcmc.silo import checks as rc
from vcmc.silo import summary_cache
from vcmc.silo.endpoints import endpoint
from vcmc.silo.gaussian import release_gaussian

silo_log = logging.getLogger("vcmc.silo")


def admit(gate, request: SummarizeRequest) -> SummarizeRequest:
    config = request.config          # a typed SiloConfig, checked when the request was decoded
    strategy = config.strategy
    if strategy not in gate.policy.allowed_strategies:
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator does not allow the {strategy!r} strategy "
                              "(its count round trips sum the silo's rows at parameters the server chooses; "
                              "docs/federation.md)")
    _refuse_unallowed_rounds(gate, config)
    total = int(config.sampler.n_iter) * int(config.sampler.n_chains)
    cap = gate.policy.max_iterations
    if cap is not None and total > int(cap):
        raise DisclosureError(f"silo {gate.silo.name!r}: the request asks for {total} Gibbs iterations "
                              f"(iterations x chains); its operator allows at most {int(cap)}")
    if not 1 <= int(request.n_silos) <= 10000 or len(request.spawn_key) > 16:
        raise ConfigError("summarize: n_silos must be in [1, 10000] and the spawn key at most 16 numbers")
    if int(config.postprocess.summary_draws) > gate.policy.max_draws:
        raise ConfigError(f"summarize: at most {gate.policy.max_draws} summary draws may be asked for")
    if getattr(gate.silo, "values", None) is not None and not gate.silo.own_session:
        from vcmc.family.gaussian import prior_too_strong

        why = prior_too_strong(config.prior.mean_precision, config.prior.variance_shape)
        if why:
            raise DisclosureError(f"silo {gate.silo.name!r}: summarize: {why}")
    st = gate.state
    st.summarized, st.announced, st.strategy = False, False, strategy
    st.beta = float(config.prior.beta)
    st.gaussian_prior = [float(config.prior.mean_precision), float(config.prior.variance_shape),
                         float(config.prior.variance_rate)]
    st.assignment, st.pi_rows, st.profile_rows = None, [], []
    st.sent_profile_mean, st.sent_profile_radius = [], []
    noise = np.random.SeedSequence(int(request.seed_entropy), spawn_key=tuple(int(k) for k in request.spawn_key))
    st.noise_entropy, st.noise_key = int(noise.entropy), [int(k) for k in noise.spawn_key]
    return request


def _refuse_unallowed_rounds(gate, config) -> None:
    """The rounds a summarize request announces, refused here (before sampling) when the operator would
    refuse them at the round start (the rounds' endpoint still applies its rules round by round)."""
    if int(config.rounds) <= 1 or set(gate.policy.allowed_strategies) & {"rounds", "secure-rounds"}:
        return
    raise DisclosureError(f"silo {gate.silo.name!r}: the run announces {int(config.rounds) - 1} global-informed "
                          "rounds and its operator does not allow the 'rounds' (node config allow-strategies; "
                          "docs/federation.md)")


def answer(silo, request: SummarizeRequest) -> SiloSummary:
    """The summary of a saved identical request (``summary_cache``), or the apply step run now and saved."""
    cached = summary_cache.load(silo, request)
    if cached is not None:
        return cached
    summary = summarize(silo, request)
    summary_cache.save(silo, request, summary)
    return summary


def summarize(silo, request: SummarizeRequest) -> SiloSummary:
    """Apply step, then disclosure control, then the summary (docs/design.md §4.3).

    Order: the Gibbs sampler and post-processing (``run_apply_step``); the minimum cluster size
    (``max(privacy.min_cluster_size, postprocess threshold)``); ``build_summary``; then suppression,
    rounding and DP noise of the counts. Counts are left out when either privacy config forbids them or the
    strategy is "federated-gradient" (which never needs a fixed table).
    """
    from vcmc.mcmc.apply import run_apply_step
    from vcmc.silo.build_summary import build_summary

    config = request.config
    privacy = effective_privacy(silo.privacy, config.privacy)
    seed = np.random.SeedSequence(int(request.seed_entropy), spawn_key=tuple(int(k) for k in request.spawn_key))
    sampler_seed, noise_seed = seed.spawn(2)
    local = run_apply_step(silo.codes, silo.n_modalities, prior=config.prior, sampler=config.sampler,
                           postprocess=config.postprocess, n_silos=int(request.n_silos), rng=sampler_seed,
                           jobs=silo.jobs, progress=silo.gate.cpu_guard(silo.progress), values=silo.values)
    local, n_merged = apply_min_cluster_size(local, silo.codes, privacy,
                                             floor=config.postprocess.threshold(silo.data.n_rows))
    include_counts = privacy.share_counts and config.strategy != "federated-gradient"
    summary = build_summary(local, silo.codes, silo=silo.name, schema_fingerprint=silo.data.schema.fingerprint(),
                            n_modalities=silo.n_modalities, include_counts=include_counts,
                            summary_draws=config.postprocess.summary_draws, values=silo.values)
    n_suppressed = 0
    counts = summary.counts
    if counts is not None:
        counts, n_suppressed = silo.gate.protect_table(counts, privacy, np.random.default_rng(noise_seed))
    # from here on the silo needs only what it sent (min-divergence matching reads these draws): the other kept
    # draws are dropped, so a process serving many silos holds 1,000 draws of each
    silo.local = local.thinned(config.postprocess.summary_draws)
    silo.privacy_in_force = privacy
    silo.assignments = silo.memberships = None
    silo.rounds = silo.round_session = silo.chain = None
    diagnostics = {**summary.diagnostics, "process_peak_rss_mb": _peak_rss_mb()}
    return summary.with_changes(counts=counts, n_withheld=int(n_merged), counts_suppressed=n_suppressed,
                                diagnostics=diagnostics)


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB): a machine figure, reported for benchmarks."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak / 2**20 if sys.platform == "darwin" else peak / 2**10)   # bytes on macOS, KiB on Linux


def release(gate, request, reply: SiloSummary) -> SiloSummary:
    """No local cluster under the minimum size; the schema fingerprint keyed per run; the table suppressed
    and rounded; under protection, the draws and point estimate computed from the protected table alone."""
    privacy = gate.privacy
    gate.state.summarized = True
    if reply.cluster_sizes.size == 0 or int(np.min(reply.cluster_sizes)) < gate.min_size:
        raise DisclosureError(f"silo {gate.silo.name!r}: a local cluster below the minimum cluster size "
                              f"({gate.min_size}) would be sent")
    changes: dict[str, object] = {"schema_fingerprint": gate.fingerprint(reply.schema_fingerprint)}
    protected = privacy.suppress_cells_below > 1 or privacy.round_to > 1 or privacy.dp_epsilon is not None
    table = None
    if reply.counts is not None:
        # the table was noised, suppressed and rounded once when it was built (``Gate.protect_table``, so a
        # cached summary re-sent spends no new privacy budget); suppression and rounding are re-applied here,
        # which leaves a protected table unchanged and protects any table that was not
        counts, _ = suppress_small_cells(reply.counts, privacy.suppress_cells_below, reply.n_modalities, columns=True,
                                         round_to=privacy.round_to)
        changes["counts"] = round_counts(counts, privacy.round_to)
    if protected and gate.silo.local is not None:
        # the point estimate of the profiles must not undo the table's protection (size x estimate would
        # give back the suppressed cells): with suppression, rounding or noise it is computed from the
        # protected table (the silo's own, also when the table itself is not sent)
        if reply.counts is not None:
            table = np.asarray(changes["counts"])
        else:
            table, _ = gate.protect_table(gate.silo.local_table(), privacy, gate.noise_rng())
        sizes = np.asarray(reply.cluster_sizes)
        changes["profile_estimate"] = rc.estimate_from_table(table, reply.n_modalities, gate.state.beta, sizes)
        # and so must the draws (their mean is the unprotected estimate): drawn from the protected table, on a
        # stream of the request's seed, so a re-sent (cached) summary is the same message
        stream = np.random.default_rng(np.random.SeedSequence(request.seed_entropy,
                                                              spawn_key=(*request.spawn_key, 0x9A7E)))
        changes["profile_draws"] = rc.draws_from_table(table, reply.n_modalities, gate.state.beta,
                                                       reply.profile_draws.shape[0], stream, sizes)
    if reply.gaussian_draws is not None:
        changes.update(release_gaussian(gate, request, reply, privacy))
    # what was sent is what a later announcement is checked against (the announce endpoint)
    mean, radius = rc.sent_profile_spread(np.asarray(changes.get("profile_draws", reply.profile_draws)),
                                          reply.n_modalities)
    gate.state.sent_profile_mean, gate.state.sent_profile_radius = mean.tolist(), radius.tolist()
    if privacy.dp_epsilon is not None:
        # the epsilon of each noised release of this run, for the server's account (vcmc.federation.accounting)
        changes["diagnostics"] = {**reply.diagnostics, "dp_epsilon": float(privacy.dp_epsilon)}
    return reply.with_changes(**changes)


endpoint(SummarizeRequest, admit=admit, answer=answer, release=release)
