"""The three inference strategies of the aggregate step (docs/design.md §7) and the push-forward.

=====================  ==============================================  ===================================
strategy               what is shared after the upload of the draws    rounds of silo communication
=====================  ==============================================  ===================================
``contingency``        each silo's matched contingency table (in the   0: everything runs on the server
                       upload); objective (a) on the server
``federated-gradient`` per iteration: M + n_eval aggregated draws out,  1 per iteration (objective (b));
                       summed soft counts and log-likelihood back; no   1 in all for the hard-count
                       fixed count table leaves a silo                  objective (a)
``design``             as ``contingency`` (or as federated-gradient     0 with the counts, else
                       when the counts were withheld), all starts       ``design_iter`` + 1
                       batched in each round
=====================  ==============================================  ===================================
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from vcmc._rng import as_generator, as_seed_sequence
from vcmc.aggregation._kernels import push_pairs
from vcmc.aggregation.designs import latin_hypercube_blocks
from vcmc.aggregation.elbo import CountsFn, Objective, check_matched, evaluation_tuples
from vcmc.aggregation.optimize import run_starts
from vcmc.aggregation.weights import AggregationWeights, BlockLayout, count_blocks, project_simplex
from vcmc.config import AggregationConfig, PriorConfig
from vcmc.exceptions import ConfigError
from vcmc.matching.types import MatchedDraws, MatchedProfiles, take_profiles


@dataclass(frozen=True)
class AggregationResult:
    """Output of the aggregate step.

    Attributes
    ----------
    weights : AggregationWeights
    pi_draws : ndarray of shape (T, C)
        Aggregated global draws of the weights (each row on the simplex by construction).
    profile_draws : ndarray of shape (T, C, P)
    elbo : float
        Relaxed ELBO on the fixed evaluation tuples at the returned weights (nan when not computable).
    elbo_trace : ndarray
        ELBO per evaluated iteration of the best start.
    n_iter : int
    converged : bool
    n_rounds : int
        Rounds of silo communication after the upload of the summaries.
    strategy, objective, shares : str
        Strategy, objective ("complete"/"observed"/"none") and what was shared, in plain language.
    seconds : float
    n_starts : int
    starts : dict
        Diagnostics of the starting points (ELBO per kind of start, number of starts).
    timings : dict
        Seconds spent in ``setup`` (objective and evaluation tuples), ``optimise`` and ``push_forward``.
    pairing : ndarray of shape (S, T), int, or None
        The silos' draws behind each output draw (``pair_draws``): output draw t is the push-forward of
        draw ``pairing[s, t]`` of every silo s.
    n_chains : int
        Chains of the output draws (chain-major, ``T / n_chains`` draws each; ``pair_draws``).
    gaussian_draws : ndarray of shape (T, C, 2G), or None
        With Gaussian items, their global means and variances (``vcmc.aggregation.gaussian``, the same pairing).
    """

    weights: AggregationWeights
    pi_draws: np.ndarray
    profile_draws: np.ndarray
    elbo: float
    elbo_trace: np.ndarray
    n_iter: int
    converged: bool
    n_rounds: int
    strategy: str
    objective: str
    shares: str
    seconds: float
    n_starts: int
    starts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    pairing: np.ndarray | None = None
    n_chains: int = 1
    gaussian_draws: np.ndarray | None = None

    def summary(self) -> dict:
        """JSON-ready summary (weights, ELBO, rounds, what was shared)."""
        return {"strategy": self.strategy, "objective": self.objective, "shares": self.shares,
                "elbo": self.elbo, "n_iter": self.n_iter, "converged": self.converged,
                "n_rounds": self.n_rounds, "seconds": self.seconds, "n_starts": self.n_starts,
                "starts": self.starts, "weights": self.weights.to_dict(),
                "elbo_trace": self.elbo_trace.tolist()}


_DEFAULT_CONFIG = AggregationConfig()
# draws gathered per silo at a time by the push-forward (bounds its work memory)
_PUSH_ROWS = 512
_DEFAULT_PRIOR = PriorConfig()

_SHARES = {
    "contingency": ("each silo's matched contingency table (cluster sizes and modality counts of its local "
                    "clusters) with its label-free posterior draws; the optimisation runs on the server "
                    "with no further communication"),
    "federated-observed": ("label-free posterior draws only in the upload; then one round per iteration: "
                           "the server sends M aggregated parameter draws, each silo returns E-step soft "
                           "counts summed over its rows (M x C x (1+P) numbers) and its log-likelihood; "
                           "no fixed count table leaves a silo"),
    "federated-complete": ("label-free posterior draws in the upload; then one round in which the silos "
                           "return the hard counts of the propagated partition summed over silos (C x (1+P)"
                           " numbers); the optimisation then runs on the server"),
}


def _seeds(rng):
    """Independent streams: evaluation tuples, minibatches, design, output pairing."""
    return as_seed_sequence(rng).spawn(4)


def pair_draws(matched: MatchedDraws, rng=None, n_out: int | None = None, n_chains: int = 1) -> np.ndarray:
    """Indices (S, T) pairing the silos' draws.

    One chain: the t-th draw of each silo after a seeded shuffle; ``T = min_s T_s`` by default, and with
    ``n_out`` each silo's shuffled draws are repeated as needed.

    ``n_chains > 1`` (docs/design.md §8.1): every silo's draws are its ``n_chains`` chains concatenated
    chain-major (``vcmc.mcmc.apply``), ``L_s = T_s / n_chains`` each. Output chain j, draw t, combines draw
    t of chain j of every silo, in order: each output chain is then a function of one Markov chain per
    silo at the same iteration, so ArviZ's R-hat and ESS of the output chains measure the silos' mixing
    (a shuffle would make every chain look independent). Chains are ``L = min_s L_s`` long (``n_out /
    n_chains`` when given, at most that); a longer silo chain contributes its last ``L`` draws (the ones
    furthest from the burn-in). The stream ``rng`` is not used.
    """
    if n_chains > 1:
        return _pair_chains(matched, n_out, int(n_chains))
    gen = as_generator(rng)
    lengths = [p.shape[0] for p in matched.pi]
    t = min(lengths) if n_out is None else int(n_out)
    if t < 1:
        raise ConfigError(f"The 'n_out' parameter must be an int >= 1. Got {n_out!r} instead.")
    rows = []
    for length in lengths:                       # a loop over silos only
        reps = -(-t // length)
        rows.append(np.concatenate([gen.permutation(length) for _ in range(reps)])[:t])
    return np.stack(rows)


def _pair_chains(matched: MatchedDraws, n_out: int | None, n_chains: int) -> np.ndarray:
    lengths = [p.shape[0] for p in matched.pi]
    for name, length in zip(matched.silos, lengths, strict=True):
        if length % n_chains:
            raise ConfigError(f"silo {name!r} sent {length} draws, not a whole number per chain for "
                              f"{n_chains} chains (sampler.n_chains)")
    per_chain = [length // n_chains for length in lengths]
    chain_len = min(per_chain)
    if n_out is not None:
        if n_out < n_chains or n_out // n_chains > chain_len:
            raise ConfigError(f"The 'n_out' parameter must be an int in [{n_chains}, {n_chains * chain_len}] "
                              f"with {n_chains} chains of {chain_len} paired draws. Got {n_out!r} instead.")
        chain_len = int(n_out) // n_chains
    rows = []
    for length in per_chain:                     # a loop over silos only
        start = length - chain_len
        rows.append(np.concatenate([j * length + start + np.arange(chain_len) for j in range(n_chains)]))
    return np.stack(rows).astype(np.int64)


def push_forward(matched: MatchedDraws, weights: AggregationWeights, idx: np.ndarray):
    """Aggregated draws ``sum_s omega^s theta^s`` of paired draws ``idx`` (S, T) (docs/design.md §8).

    Only each silo's present clusters are gathered, ``_PUSH_ROWS`` draws at a time, so the work memory
    does not grow with the number of draws (the silos are added in order, as a plain loop would).
    """
    var_col = BlockLayout(matched.present, matched.n_modalities).var_of_col
    t = idx.shape[1]
    c = matched.n_global
    pi_out = np.zeros((t, c))
    prof_out = np.zeros((t, c, var_col.size))
    for s in range(matched.n_silos):             # a loop over silos only
        pi_out += weights.pi[s] * matched.pi[s][idx[s]]
        present = np.flatnonzero(matched.present[s])
        wcol = weights.profiles[s][present][:, var_col]                  # (C_s, P)
        prof = matched.profiles[s]
        direct = prof.direct_local(present) if isinstance(prof, MatchedProfiles) else None
        if direct is not None:                   # straight from the local draws, no gathered copy
            push_pairs(direct[0], np.ascontiguousarray(idx[s]), direct[1], present, wcol, prof_out)
            continue
        for t0 in range(0, t, _PUSH_ROWS):
            rows = idx[s, t0:t0 + _PUSH_ROWS]
            prof_out[t0:t0 + _PUSH_ROWS, present, :] += wcol * take_profiles(prof, rows, present)
    return pi_out, prof_out


def aggregate_with_weights(matched: MatchedDraws, weights: AggregationWeights, *, rng=None,
                           n_out: int | None = None, prior: PriorConfig = _DEFAULT_PRIOR,
                           n_eval: int = _DEFAULT_CONFIG.n_eval, strategy: str = "fixed-weights",
                           shares: str = "label-free posterior draws only", n_chains: int = 1
                           ) -> AggregationResult:
    """Push the silos' paired draws through fixed weights (the consensus baselines use this).

    The relaxed ELBO (objective (a), when the matched contingency counts are available) is evaluated on
    the same evaluation tuples as ``aggregate`` with the same ``rng``, so the two are comparable.
    """
    t0 = time.perf_counter()
    check_matched(matched)
    ss_eval, _, _, ss_out = _seeds(rng)
    layout = BlockLayout.from_matched(matched, "per_block")
    layout.from_weights(weights)                  # validates shapes and constraints
    elbo = float("nan")
    if matched.counts is not None:
        obj = Objective(matched, layout, "complete", prior)
        tup = obj.tuples(evaluation_tuples(matched, n_eval, ss_eval))
        elbo = float(obj.evaluate(layout.from_weights(weights)[None], [(tup, 0)])[0].value[0])
    idx = pair_draws(matched, ss_out, n_out, n_chains)
    pi_d, prof_d = push_forward(matched, weights, idx)
    return AggregationResult(weights=weights, pi_draws=pi_d, profile_draws=prof_d, elbo=elbo,
                             elbo_trace=np.asarray([elbo]), n_iter=0, converged=True, n_rounds=0,
                             strategy=strategy, objective="complete" if np.isfinite(elbo) else "none",
                             shares=shares, seconds=time.perf_counter() - t0, n_starts=1, pairing=idx,
                             n_chains=int(n_chains))


def _initial_blocks(layout: BlockLayout, matched: MatchedDraws, init, floor: float) -> np.ndarray:
    if init is None or (isinstance(init, str) and init == "count"):
        blocks = count_blocks(layout, matched.n_rows, matched.sizes)
    elif isinstance(init, str) and init == "uniform":
        blocks = layout.mask / layout.block_size[:, None]
    elif isinstance(init, AggregationWeights):
        blocks = layout.from_weights(init)
    else:
        raise ConfigError(f"The 'init' parameter of aggregate must be 'count', 'uniform' or "
                          f"AggregationWeights. Got {init!r} instead.")
    return project_simplex(blocks, layout.mask, floor)


def aggregate(matched: MatchedDraws, *, config: AggregationConfig = _DEFAULT_CONFIG,
              prior: PriorConfig = _DEFAULT_PRIOR, counts_fn: CountsFn | None = None, rng=None,
              n_out: int | None = None, init=None, n_chains: int = 1) -> AggregationResult:
    """Optimise the aggregation weights by the relaxed ELBO and push the draws through them.

    Parameters
    ----------
    matched : MatchedDraws
        Matched per-silo draws (and contingency counts for the server-side objective).
    config : AggregationConfig
        Strategy, objective, tie, optimiser, stopping rule, design size.
    prior : PriorConfig
        Global priors (alpha over the C global clusters, beta per variable).
    counts_fn : CountsFn, optional
        Round trip to the silos: ``counts_fn(pi (M, C), profiles (M, C, P))`` returns soft counts summed
        over silos ``(cluster (M, C), modality (M, C, P), loglik (M,))``; ``counts_fn(None, None)``
        returns the hard counts of the propagated partition. Needed by "federated-gradient" (and by
        "design" when ``matched.counts`` is None).
    rng : int, Generator, SeedSequence or None
        Root of four independent streams: evaluation tuples, minibatches, design, output pairing.
    n_out : int, optional
        Number of output draws (default: the shortest chain).
    init : {"count", "uniform"} or AggregationWeights, optional
        Starting point of the contingency / federated-gradient strategies (default count weights);
        "design" always adds the count weights to its space-filling starts.
    n_chains : int
        Chains in every silo's draws (``sampler.n_chains``): the output keeps them (``pair_draws``).

    Returns
    -------
    AggregationResult
    """
    t0 = time.perf_counter()
    check_matched(matched)
    ss_eval, ss_opt, ss_design, ss_out = _seeds(rng)
    layout = BlockLayout.from_matched(matched, config.tie)
    objective = config.resolved_objective
    strategy = config.strategy
    if strategy == "contingency":
        if objective != "complete":
            raise ConfigError("strategy 'contingency' runs on the server only and needs objective "
                              f"'complete' (or 'auto'); got objective {config.objective!r}. Use "
                              "strategy='federated-gradient' for the observed-data objective.")
        if matched.counts is None:
            raise ConfigError("strategy 'contingency' needs every silo's contingency table, but at least one "
                              "silo withheld it (matched.counts is None). Use "
                              "strategy='federated-gradient'.")
        obj = Objective(matched, layout, "complete", prior)
        shares = _SHARES["contingency"]
    elif strategy == "federated-gradient":
        if counts_fn is None:
            raise ConfigError("strategy 'federated-gradient' needs counts_fn (the round trip to the silos)")
        obj = Objective(matched, layout, objective, prior, counts_fn, use_counts_fn=True)
        shares = _SHARES[f"federated-{objective}"]
    else:   # design
        server_side = objective == "complete" and matched.counts is not None
        if not server_side and counts_fn is None:
            raise ConfigError("strategy 'design' with objective 'observed' or withheld counts needs "
                              "counts_fn")
        obj = Objective(matched, layout, objective, prior, None if server_side else counts_fn,
                        use_counts_fn=not server_side)
        base = "contingency" if server_side else f"federated-{objective}"
        shares = (_SHARES[base] + f"; {config.n_starts} space-filling starts x {config.design_iter} "
                  "iterations, all starts batched in each round, best relaxed ELBO kept")
    eval_tup = obj.tuples(evaluation_tuples(matched, config.n_eval, ss_eval))
    t1 = time.perf_counter()
    starts: dict = {}
    if strategy == "design":
        count0 = count_blocks(layout, matched.n_rows, matched.sizes)[None]
        lhs = latin_hypercube_blocks(layout, max(config.n_starts - 1, 0), ss_design)
        init_blocks = np.concatenate([count0, lhs]) if lhs.shape[0] else count0
        # the paper's protocol: design_iter iterations per start, all starts batched in each round, then
        # one evaluation of every start on the fixed tuples (evaluating each iteration would cost 4x more)
        out = run_starts(obj, init_blocks, config, ss_opt, eval_tuples=eval_tup, n_iter=config.design_iter,
                         evaluate_each=False)
        best = int(np.argmax(out.value))
        starts = {"n_design": int(lhs.shape[0]), "count_start_elbo": float(out.value[0]),
                  "design_best_elbo": float(out.value[1:].max()) if lhs.shape[0] else None,
                  "best_start": "count" if best == 0 else "design", "design_iter": config.design_iter}
        n_starts = int(init_blocks.shape[0])
    else:
        init_blocks = _initial_blocks(layout, matched, init, config.floor)[None]
        out = run_starts(obj, init_blocks, config, ss_opt, eval_tuples=eval_tup)
        best = 0
        starts = {"init": init if isinstance(init, str) else ("count" if init is None else "given"),
                  "init_elbo": float(out.trace[0][0]) if out.trace[0].size else None}
        n_starts = 1
    weights = layout.to_weights(out.blocks[best])
    t2 = time.perf_counter()
    idx = pair_draws(matched, ss_out, n_out, n_chains)
    pi_d, prof_d = push_forward(matched, weights, idx)
    t3 = time.perf_counter()
    return AggregationResult(weights=weights, pi_draws=pi_d, profile_draws=prof_d,
                             elbo=float(out.value[best]), elbo_trace=out.trace[best],
                             n_iter=int(out.n_iter[best]), converged=bool(out.converged[best]),
                             n_rounds=int(obj.n_rounds), strategy=strategy, objective=objective,
                             shares=shares, seconds=t3 - t0, n_starts=n_starts, starts=starts,
                             timings={"setup": t1 - t0, "optimise": t2 - t1, "push_forward": t3 - t2},
                             pairing=idx, n_chains=int(n_chains))
