"""The ``GlobalResult`` of a VCMC run, assembled from what the pipeline's stages returned.

``vcmc.pipeline`` runs the stages (summaries, matching, aggregation, partition, assessment) and talks to the
silos; this module only assembles: the diagnostics recorded in ``result.json`` (docs/design.md §12.3), the
artefact warnings, the classification quality and the posterior of the number of clusters. It sends
nothing and prints nothing, and its words name options by their run-config keys (``sampler.n-iter``), never
by a command-line flag: the same result comes out of the API, the CLI and the Flower ServerApp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.assessment import local_k_posterior
from vcmc.config import FitConfig
from vcmc.exceptions import SiloFailure
from vcmc.matching.types import Matching
from vcmc.protocol import SiloSummary
from vcmc.results import GlobalResult

K_POSTERIOR_DEFINITION = (
    "global: at each assessment draw every silo samples each row's allocation from its allocation "
    "probabilities under that draw; K = number of global clusters receiving at least one row (the occupied "
    "components of an over-fitted mixture, over all silos); global_per_silo: the same within each silo; "
    "local: each silo's posterior of its number of occupied components in its own chains "
    "(docs/design.md §14.3)")


@dataclass(frozen=True)
class StageOutputs:
    """What the server's stages produced, in the order they ran (the inputs of ``build_result``)."""

    summaries: list[SiloSummary]
    matching: Matching
    matched: object            # vcmc.matching.MatchedDraws
    aggregate: object          # vcmc.aggregation's result (draws, weights, ELBO trace)
    partition: dict | None     # silo name -> AssignReply (None: the rounds label the rows)
    assignments: tuple | None  # row-level labels, only from the user's own machine's transports
    memberships: tuple | None
    assessment: dict | None
    assessment_notes: list[str]
    failures: list[SiloFailure]


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


def convergence_warnings(summaries: list[SiloSummary], sampler) -> list[str]:
    """One line per silo whose chains ran to the maximum without meeting the convergence targets of
    ``sampler.stop = "converged"`` (docs/design.md §4.1.1), naming the targets it missed with their values."""
    out = []
    for s in summaries:
        if s.diagnostics.get("converged") == 0.0:
            out.append(f"silo {s.silo!r}: " + _unmet_targets(s.diagnostics, sampler) + f" within {sampler.n_iter} "
                       "iterations (sampler.stop = 'converged'); its draws are used as they are: raise the maximum "
                       "(sampler.n-iter; see result.json, diagnostics.local)")
    return out


def _unmet_targets(d: dict, sampler) -> str:
    """Which of the convergence targets a silo missed, with its values (R-hat, ESS or both)."""
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


def one_cluster_silo_warnings(partition_counts: np.ndarray, names) -> list[str]:
    """One line per silo whose labelled rows all fall into one cluster while the result has several (a silo
    labelled one class as a whole: a coding or population difference, or a silo the pass did not resolve)."""
    counts = np.asarray(partition_counts)
    if np.count_nonzero(counts.sum(axis=0)) < 2:
        return []
    out = []
    for name, row in zip(names, counts, strict=True):
        if row.sum() > 1 and np.count_nonzero(row) == 1:
            out.append(f"silo {name!r}: all its labelled rows ({int(row.sum())}) fall into one cluster "
                       f"({int(np.argmax(row)) + 1}); it may differ from the other silos as a whole, or the pass "
                       "did not resolve it (aggregation.rounds; docs/design.md §16)")
    return out


def failure_warnings(failures: list[SiloFailure]) -> list[str]:
    """One line per silo left out of the run."""
    return [f"silo {f.silo!r} left out: {f.reason}" for f in failures]


def artefact_warnings(stages: StageOutputs, config: FitConfig) -> tuple[list[str], list, list]:
    """Warnings about the result itself (matching checks, unconverged chains, prior-dominated profiles,
    silos left out of the assessment), with the matching checks and prior-dominated profiles they come
    from."""
    from vcmc.aggregation.checks import describe_prior_dominated, prior_dominated_profiles
    from vcmc.matching.checks import matching_checks, summarise_checks

    summaries, matching, agg = stages.summaries, stages.matching, stages.aggregate
    checks = matching_checks(summaries, matching, level=config.matching.level)
    dominated = prior_dominated_profiles(summaries, matching, agg.profile_draws, beta=config.prior.beta,
                                         n_modalities=summaries[0].n_modalities, pi_draws=agg.pi_draws)
    words = (summarise_checks(checks, matching.method) + convergence_warnings(summaries, config.sampler)
             + describe_prior_dominated(dominated) + stages.assessment_notes)
    return words, checks, dominated


def build_result(stages: StageOutputs, config: FitConfig, *, method: str, timings: dict[str, float],
                 seed, artefacts: tuple[list[str], list, list] | None = None) -> GlobalResult:
    """The ``GlobalResult`` of the run: global draws, partition counts, row labels where available and the
    diagnostics of ``result.json``."""
    summaries, matching, agg = stages.summaries, stages.matching, stages.aggregate
    names = tuple(s.silo for s in summaries)
    words, checks, dominated = artefacts if artefacts is not None else artefact_warnings(stages, config)
    if stages.partition is not None:
        partition_counts = np.stack([np.asarray(stages.partition[n].counts, dtype=np.int64) for n in names])
    else:                 # the local clusters' sizes through the matching (the rounds' start; they relabel)
        partition_counts = np.stack([np.bincount(np.asarray(a, dtype=np.int64), weights=s.cluster_sizes,
                                                 minlength=matching.n_global).astype(np.int64)
                                     for a, s in zip(matching.assignment, summaries, strict=True)])
    assessment = stages.assessment
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
        "classification": None if stages.partition is None else classification_quality(
            [stages.partition[n] for n in names], names),
        "n_clusters_posterior": {
            "global": None if assessment is None else assessment["k_global"],
            "local": local_k_posterior(summaries),
            "global_per_silo": None if assessment is None else assessment["k_global_per_silo"],
            "definition": K_POSTERIOR_DEFINITION},
        "n_chains": int(config.sampler.n_chains),
        "warnings": failure_warnings(stages.failures) + words + one_cluster_silo_warnings(partition_counts, names),
    }
    if assessment is not None:
        diagnostics["ppc"] = assessment["ppc"]
        diagnostics["waic"] = assessment["waic"]
    return GlobalResult.from_draws(
        pi_draws=agg.pi_draws, profile_draws=agg.profile_draws, gaussian_draws=agg.gaussian_draws, method=method,
        n_modalities=summaries[0].n_modalities, silos=names, partition_counts=partition_counts,
        assignments=stages.assignments, memberships=stages.memberships, n_chains=agg.n_chains,
        timings=timings, config=config.to_dict(), seed=seed, diagnostics=diagnostics, matching=matching)
