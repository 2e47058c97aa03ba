"""The global-informed rounds (docs/design.md §16; docs/federation.md, "The rounds"): the silo's half of the
pooled model's blocked Gibbs sampler, with the server as a relay.

The silo computes every parameter it uses: from every participant's vector of a round, which the server relays,
it computes the pooled sums itself, and from them the pooled chain's next draw (``vcmc.pooled.chain``, the same
in every silo), its rows' allocations (``vcmc.rows.rounds``), when the chain stops and what it answers. In a
deployment each vector leaves masked, padded and tagged (``vcmc.silo.secure_sum``): the server learns nothing of
any round, cannot alter a vector or give silos different ones, and chooses nothing but the start (which any
start of the chain may be) and when to ask. The rounds are answered once each, in order.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.protocol import AssessRequest, AssignReply
from vcmc.protocol.rounds import (
    RoundAssessRequest,
    RoundFinishRequest,
    RoundResultReply,
    RoundResultRequest,
    RoundStartRequest,
    RoundSweepRequest,
    RoundVectorReply,
    pack,
    unpack,
)
from vcmc.rows import rounds
from vcmc.silo import secure_sum
from vcmc.silo.endpoints import assess, assign, endpoint
from vcmc.silo.round_session import RoundSession

if TYPE_CHECKING:   # the pooled chain's draws import numba: loaded when a round is answered, not for a hello
    from vcmc.pooled.chain import PooledChain

silo_log = logging.getLogger("vcmc.silo")
ASSESS_KEY = 2     # the silos' streams of the assessment after the rounds: (..., ROUNDS_KEY, 0, silo, ASSESS_KEY)
NO_TAG = np.zeros(0, dtype=np.uint8)


def _session(silo) -> RoundSession:
    if silo.round_session is None:
        raise NotFittedError(f"silo {silo.name!r}: no rounds were started in this run")
    return silo.round_session


# -- start ----------------------------------------------------------------------------------------------------

def admit_start(gate, request: RoundStartRequest) -> RoundStartRequest:
    """The participants (this silo once among them; in a deployment every other one pinned by its operator, at
    least ``min_peers``, and the vectors secure), the start map, the model and the plan, within caps."""
    silo, policy = gate.silo, gate.policy
    names = tuple(request.names)
    s = len(names)
    if not 1 <= s <= policy.max_clusters or len(set(names)) != s or names.count(silo.name) != 1:
        raise ConfigError(f"round start: names must be 1 to {policy.max_clusters} distinct participants, this silo "
                          f"({silo.name!r}) once among them")
    c = int(request.n_components)
    start = np.asarray(request.start)
    if start.ndim != 2 or start.shape[0] != s or start.dtype.kind not in "iu" or not 1 <= c <= policy.max_clusters \
            or start.size and (start.min() < -1 or start.max() >= c):
        raise ConfigError(f"round start: start must be ({s}, K) integers in [-1, n_components) and n_components in "
                          f"[1, {policy.max_clusters}]")
    beta = np.asarray(request.beta, dtype=np.float64)
    if beta.shape != (silo.n_columns,) or not (np.all(np.isfinite(beta)) and np.all(beta > 0)) \
            or not (np.isfinite(request.alpha) and float(request.alpha) > 0):
        raise ConfigError(f"round start: alpha must be a positive float and beta {silo.n_columns} positive floats")
    checkpoints = np.asarray(request.checkpoints)
    budget = policy.budget_of("round_sweep")
    if checkpoints.ndim != 1 or checkpoints.size < 1 or checkpoints.dtype.kind not in "iu" \
            or checkpoints[0] < 2 or np.any(np.diff(checkpoints) <= 0) \
            or (budget is not None and int(checkpoints[-1]) + 3 > budget):
        raise ConfigError("round start: checkpoints must be increasing rounds >= 2 within the run's budget of "
                          "round sweeps")
    if int(request.n_chains) not in (1, 2) or not (np.isfinite(request.anneal) and float(request.anneal) >= 1) \
            or int(request.anneal_until) < 1 or not 1 <= int(request.max_stored) <= policy.max_draws \
            or int(request.min_size) < 1 or not 0 <= int(request.birth_budget) <= c \
            or not (np.isfinite(request.silo_weight_prior) and float(request.silo_weight_prior) >= 0) \
            or len(request.spawn_key) > 16:
        raise ConfigError("round start: n_chains 1 or 2, anneal >= 1, anneal_until >= 1, max_stored in [1, "
                          f"{policy.max_draws}], min_size >= 1, birth_budget in [0, n_components], "
                          "silo_weight_prior >= 0, a spawn key of at most 16 numbers")
    from vcmc.config.options import MAX_BIRTH_SHARE

    if not (np.isfinite(request.birth_share) and 0 <= float(request.birth_share) <= MAX_BIRTH_SHARE):
        raise ConfigError(f"round start: birth_share must be in [0, {MAX_BIRTH_SHARE:g}]")
    g = _n_gaussian(silo)
    prior = None if request.gaussian_prior is None else np.asarray(request.gaussian_prior, dtype=np.float64)
    if (prior is None) != (g == 0) or (prior is not None and (
            prior.shape != (4,) or not np.all(np.isfinite(prior)) or np.any(prior[1:] <= 0))):
        raise ConfigError(f"round start: this silo has {g} continuous item(s); the start must carry their prior "
                          "(m0, kappa0 > 0, a0 > 0, b0 > 0) exactly when it has some")
    if not silo.own_session:
        if prior is not None:
            from vcmc.family.gaussian import prior_too_strong

            why = prior_too_strong(prior[1], prior[2])
            if why:
                raise DisclosureError(f"silo {silo.name!r}: round start: {why}")
        if not request.secure:
            raise DisclosureError(f"silo {silo.name!r}: in a deployment the rounds' vectors are masked, padded and "
                                  "tagged (secure); this round start asks for plain ones")
        if silo.rounds_key is None:
            raise DisclosureError(f"silo {silo.name!r}: its operator has not set the rounds' keys (node config "
                                  "'rounds-key' and 'rounds-peers'; docs/federation.md, 'The rounds')")
        unknown = [n for n in names if n != silo.name and n not in silo.rounds_peers]
        if unknown:
            raise DisclosureError(f"silo {silo.name!r}: participants {unknown} have no key pinned by its operator "
                                  "(node config 'rounds-peers')")
        if s < policy.min_peers:
            raise DisclosureError(f"silo {silo.name!r}: its operator requires at least {policy.min_peers} "
                                  f"participants in the rounds (node config 'min-peers'); this start has {s}")
    return request


def _n_gaussian(silo) -> int:
    values = getattr(silo, "values", None)
    return 0 if values is None else int(values.shape[1])


def answer_start(silo, request: RoundStartRequest) -> RoundVectorReply:
    """The silo's place, the context, its pair secrets and its share of the group secret (encrypted to every
    other participant; nothing in the analyst's own session)."""
    names = list(request.names)
    index = names.index(silo.name)
    start = np.asarray(request.start, dtype=np.int64)
    k_local = silo.require_local("round start").n_clusters
    start_row = start[index, :k_local]
    if start.shape[1] < k_local or np.any(start_row < 0):
        raise ConfigError(f"round start: the start map's row of silo {silo.name!r} must name a component for each "
                          f"of its {k_local} local clusters")
    fields = {k: v for k, v in request.to_arrays().items() if not k.startswith("__")}
    context = secure_sum.context_digest(silo.gate.run_key or "", fields)
    min_size = max(int(request.min_size), silo.gate.min_size)
    from vcmc.pooled.chain import ChainPlan

    # the Gaussian items on the rounds' grid: refused here, before any secret is made, if a value lies beyond it
    rounds.grid(silo)
    g = _n_gaussian(silo)
    gaussian = {} if not g else {"n_gaussian": g, "gaussian_prior": tuple(
        float(v) for v in np.asarray(request.gaussian_prior, dtype=np.float64))}

    plan = ChainPlan(n_components=int(request.n_components), alpha=float(request.alpha),
                     beta_cols=tuple(float(b) for b in np.asarray(request.beta)), n_modalities=silo.n_modalities,
                     checkpoints=tuple(int(r) for r in np.asarray(request.checkpoints)), stop=bool(request.stop),
                     n_chains=int(request.n_chains), anneal=float(request.anneal),
                     anneal_until=int(request.anneal_until), max_stored=int(request.max_stored), min_size=min_size,
                     **gaussian)
    session = RoundSession(names=names, index=index, context=context.hex(), secure=bool(request.secure),
                           plan={**dataclasses.asdict(plan), "beta_cols": list(plan.beta_cols),
                                 "n_modalities": list(plan.n_modalities), "checkpoints": list(plan.checkpoints),
                                 "gaussian_prior": list(plan.gaussian_prior)},
                           start_row=start_row.tolist(), used=int(start.max()) + 1 if start.size else 0,
                           birth_share=float(request.birth_share), birth_budget=int(request.birth_budget),
                           silo_weight_prior=float(request.silo_weight_prior),
                           seed_entropy=str(int(request.seed_entropy)),
                           seed_prefix=[int(k) for k in request.spawn_key])
    silo.round_session, silo.chain, silo.rounds = session, None, None
    silo.assignments = silo.memberships = None
    vector = np.zeros(0, dtype=np.uint64)
    if session.secure:
        publics = [secure_sum.public_of(silo.rounds_key) if n == silo.name else silo.rounds_peers[n] for n in names]
        secrets = secure_sum.pair_secrets(silo.rounds_key, publics, index, context)
        share = secure_sum.new_share()
        session.secrets, session.own_share = [s.hex() for s in secrets], share.hex()
        vector = secure_sum.encrypt_share(share, secrets, index).view(np.uint64).ravel()
        silo_log.info("silo %r: the rounds' vectors are secure over %d participants (own key %s)", silo.name,
                      len(names), secure_sum.fingerprint(publics[index]))
    return RoundVectorReply(round=-1, vector=vector, tag=NO_TAG)


def release_vector(gate, request, reply: RoundVectorReply) -> RoundVectorReply:
    """A round's vector leaves masked, padded and tagged (it was made so by the endpoint from the silo's own
    secrets); in a deployment a plain vector is never sent."""
    if not gate.silo.own_session and reply.vector.size and not _session(gate.silo).secure:
        raise DisclosureError(f"silo {gate.silo.name!r}: a round's plain vector is sent only in the analyst's own "
                              "session")
    return reply


# -- the sweeps -----------------------------------------------------------------------------------------------

def admit_sweep(gate, request: RoundSweepRequest) -> RoundSweepRequest:
    """The next round in order (each answered once), every participant's vector of it, tags when secure."""
    session = _session(gate.silo)
    chain = gate.silo.chain
    # a stopped chain stopped at its round's counts (chain.round): that round is still answered by the silos
    # sharing the chain that did not answer it yet (vcmc.pooled.chain.shared_chain), nothing after it
    if chain is not None and chain.stopped and int(request.round) > chain.round:
        raise DisclosureError(f"silo {gate.silo.name!r}: the pooled chain stopped at round {chain.round}; "
                              "no further sweep is answered")
    if int(request.round) != session.next_round:
        raise DisclosureError(f"silo {gate.silo.name!r}: the rounds are answered once each, in order: round "
                              f"{session.next_round} is next, not {int(request.round)}")
    vectors, tags = np.asarray(request.vectors), np.asarray(request.tags)
    s = len(session.names)
    if vectors.ndim != 2 or vectors.shape[0] != s or vectors.dtype != np.uint64:
        raise ConfigError(f"round sweep: vectors must be ({s}, L) uint64, one per participant")
    secure_tags = session.secure and int(request.round) >= 0
    if (secure_tags and (tags.shape != (s, secure_sum.TAG_BYTES) or tags.dtype != np.uint8)) or (
            not secure_tags and tags.size):
        raise ConfigError(f"round sweep: tags must be ({s}, {secure_sum.TAG_BYTES}) uint8 for secure vectors, empty "
                          "otherwise")
    return request


def _pooled(silo, session: RoundSession, request: RoundSweepRequest) -> np.ndarray:
    """The round's pooled int64 vector: the participants' vectors verified and unmasked, or plainly summed."""
    vectors = np.asarray(request.vectors, dtype=np.uint64)
    if session.secure:
        return secure_sum.unmasked_sum(vectors, request.tags, bytes.fromhex(session.group),
                                       bytes.fromhex(session.context), int(request.round), silo=silo.name)
    return vectors.sum(axis=0, dtype=np.uint64).view(np.int64)


def _reply(silo, session: RoundSession, round_number: int, packed: np.ndarray) -> RoundVectorReply:
    if not session.secure:
        return RoundVectorReply(round=round_number, vector=np.asarray(packed, dtype=np.int64).view(np.uint64),
                                tag=NO_TAG)
    group, context = bytes.fromhex(session.group), bytes.fromhex(session.context)
    secrets = [bytes.fromhex(x) for x in session.secrets]
    vector = secure_sum.mask(packed, secrets, group, session.index, context, round_number)
    return RoundVectorReply(round=round_number, vector=vector,
                            tag=secure_sum.tag(group, context, round_number, session.index, vector))


def answer_sweep(silo, request: RoundSweepRequest) -> RoundVectorReply:
    session = _session(silo)
    r = int(request.round)
    session.next_round = r + 1
    if r == -1:
        return _shares_to_births(silo, session, request)
    if r == 0:
        return _births_to_start(silo, session, request)
    if silo.chain is None:
        raise NotFittedError(f"silo {silo.name!r}: round {r} comes before the rounds' start (round 0)")
    plan = silo.chain.plan      # the session's plan, built once (at round 0, or when the state was restored)
    try:
        counts = unpack(_pooled(silo, session, request), plan.n_chains, plan.n_components, plan.n_gaussian)
        if plan.n_gaussian:
            from vcmc.family.gaussian import from_grid

            counts = [(cluster, modality, from_grid(grid)) for cluster, modality, grid in counts]
    except ValueError as err:
        raise DisclosureError(f"silo {silo.name!r}: round {r}'s pooled vector is not the participants' counts "
                              f"({err})") from None
    draws = silo.chain.advance(counts, r)
    if draws is None:
        silo_log.info("silo %r: the pooled chain stopped at round %d (%s)", silo.name, r, silo.chain.reason)
        return RoundVectorReply(round=r + 1, vector=np.zeros(0, dtype=np.uint64), tag=NO_TAG, stop=True)
    state = rounds.require(silo)
    state.new_window(silo.chain.window)
    seeds = session.seeds()
    tables = [rounds.sweep(silo, ch, d.log_pi, d.log_profiles, store=d.store,
                           rng=seeds.sweep(r + 1, session.index, ch), inverse_temperature=d.inverse_temperature,
                           gaussian=d.gaussian)
              for ch, d in enumerate(draws)]
    if draws[0].store:
        state.n_kept += 1
    return _reply(silo, session, r + 1, pack(tables))


def _shares_to_births(silo, session: RoundSession, request: RoundSweepRequest) -> RoundVectorReply:
    """Round -1: every participant's share of the group secret (secure), hence the rounds' seeds; the silo's
    births vector (round 0)."""
    if session.secure:
        s = len(session.names)
        shares = np.ascontiguousarray(request.vectors, dtype=np.uint64).view(np.uint8).reshape(
            s, s, secure_sum.SHARE_BYTES)
        group = secure_sum.group_secret(bytes.fromhex(session.own_share), shares,
                                        [bytes.fromhex(x) for x in session.secrets], session.index,
                                        bytes.fromhex(session.context), silo=silo.name)
        session.group = group.hex()
        if not silo.gate.policy.reproducible_rounds:
            # the streams from the group secret: nobody outside the silos knows them
            session.seed_entropy, session.seed_prefix = str(secure_sum.seed_entropy(group)), []
    from vcmc.pooled.chain import minimum_vector

    births = rounds.birth_vector(silo, session.birth_share) if session.birth_budget > 0 else np.zeros(0)
    # and its minimum cluster size, so that every silo runs the chain with the participants' largest
    return _reply(silo, session, 0, pack([births, minimum_vector(session.chain_plan().min_size)]))


def _births_to_start(silo, session: RoundSession, request: RoundSweepRequest) -> RoundVectorReply:
    """Round 0: the births from every participant's births vector; the start of the rows' allocations, whose
    counts are round 1's vector."""
    from vcmc.pooled.chain import MINIMA, choose_births, common_minimum, shared_chain

    vector = _pooled(silo, session, request).astype(np.float64)
    # the chain's minimum cluster size: the largest of the participants' (the same in every silo)
    session.plan = {**session.plan, "min_size": common_minimum(vector[-MINIMA:])}
    plan = session.chain_plan()
    columns = []
    if session.birth_budget > 0:
        pooled = vector[:-MINIMA]
        columns = choose_births(pooled, session.birth_budget, plan.min_size)
        session.births = {"columns": columns, "rows": [int(pooled[j]) for j in columns],
                          "components": list(range(session.used, session.used + len(columns)))}
        if session.used + len(columns) > plan.n_components:
            raise ConfigError("round start: the births need more components than n_components")
    tables = rounds.start(silo, session.start_row, plan.n_components, n_chains=plan.n_chains,
                          silo_weight_prior=session.silo_weight_prior, birth_share=session.birth_share,
                          birth_columns=columns, birth_components=session.births["components"])
    # one object for the silos of this process that run this chain (vcmc.pooled.chain.shared_chain)
    silo.chain = shared_chain(plan, session.seeds(), (session.context, *session.names))
    return _reply(silo, session, 1, pack(tables))


# -- the answer -----------------------------------------------------------------------------------------------

def _stopped(silo, what: str) -> PooledChain:
    chain = silo.chain
    if chain is None or not chain.stopped:
        raise NotFittedError(f"silo {silo.name!r}: a {what} request comes after the pooled chain stopped")
    return chain


def _answer_of(silo, what: str) -> PooledChain:
    """The stopped chain, whose answer may leave the silo only if each of its clusters holds at least the minimum
    cluster size on average over the kept rounds. The chain's own rule keeps the largest component alone when
    none does; in a deployment that answer is refused: a server that chose a model spreading the rows thin (a
    huge ``alpha`` and ``beta`` over hundreds of components, each within the caps) would otherwise get the draws
    of a component of one or two rows. In the analyst's own session the largest is answered as before."""
    chain = _stopped(silo, what)
    if not silo.own_session:
        mean_size = chain.size_sum[chain.chosen()] / max(chain.n_sized, 1)
        if float(mean_size[chain.clusters()].min()) < chain.plan.min_size:
            raise DisclosureError(f"silo {silo.name!r}: no component of the pooled chain holds the minimum cluster "
                                  f"size ({chain.plan.min_size}) on average over the kept rounds: the {what} would "
                                  "describe fewer people and is refused")
    return chain


def admit_after_stop(gate, request):
    _answer_of(gate.silo, request.ACTION)
    return request


def answer_finish(silo, request: RoundFinishRequest) -> AssignReply:
    chain = _stopped(silo, "round finish")
    return AssignReply(**rounds.finish(silo, chain.chosen(), chain.clusters()))


def release_finish(gate, request, reply: AssignReply) -> AssignReply:
    if gate.silo.own_session:
        # the rounds' labels in the analyst's own session: whole (a silo's few rows of a pooled cluster would
        # otherwise be withheld from result.json while assignments.csv, written in the same session, lists them)
        return reply
    return assign.release(gate, request, reply)


def after_finish(silo, request) -> None:
    """The rounds' labels in the silo's own files (once per run)."""
    silo.write_labels(rounds=True)


def answer_result(silo, request: RoundResultRequest) -> RoundResultReply:
    """The pooled chain's answer, computed alike by every silo."""
    chain = _stopped(silo, "round result")
    session = _session(silo)
    ch, clusters = chain.chosen(), chain.clusters()
    pi, prof = chain.draws()
    first, _ = chain.plan.window(chain.window)
    lj = np.asarray(chain.trace_lj[ch], dtype=np.float64)
    from vcmc.pooled.chain import log_joint_grid

    grid = 0.0 if silo.own_session else log_joint_grid(silo.n_modalities, chain.plan.min_size,
                                                        chain.plan.n_gaussian)
    if grid > 0:
        lj = np.floor(lj / grid + 0.5) * grid
    origin = chain.origin[ch]
    label_of = {int(o): i for i, o in enumerate(origin)}       # start component -> the chain's label at the end
    where = {int(c): i for i, c in enumerate(clusters)}
    born = [where.get(label_of[comp], -1) for comp in session.births["components"]]
    stability = chain.stability
    return RoundResultReply(
        clusters=clusters, pi_draws=pi, profile_draws=prof, trace_k=np.asarray(chain.trace_k[ch], dtype=np.int64),
        trace_log_joint=lj, log_joint_grid=grid, first_kept=int(first), reason=chain.reason,
        settled=bool(stability.get("stable", False)),
        rhat=float(stability["rhat"]) if stability.get("rhat") is not None else float("nan"),
        chains_agree=bool(stability.get("chains_agree", True)), chosen=ch,
        birth_columns=np.asarray(session.births["columns"], dtype=np.int64),
        birth_rows=np.asarray(session.births["rows"], dtype=np.int64),
        birth_components=np.asarray(session.births["components"], dtype=np.int64),
        birth_clusters=np.asarray(born, dtype=np.int64), gaussian_draws=chain.gaussian_draws())


WITHHELD_KEY = 3   # the stream of a withheld Gaussian item's prior draws: (..., ROUNDS_KEY, 0, PARAMETERS_KEY, 3)


def release_result(gate, request, reply: RoundResultReply) -> RoundResultReply:
    """The answer's clusters hold at least the minimum cluster size on average over the kept rounds (the chain's
    rule, with the stricter of the plan's and the silo's minimum); their stored draws are posterior draws on
    streams the server does not know (a deployment's come from the group secret).

    With Gaussian items the same rule holds per item (docs/design.md §17.8, as §17.4's first rule for a silo's
    own clusters): outside the analyst's own session, the draws of a (cluster, item) observed in fewer rows than
    the minimum cluster size on average over the kept rounds are not the chain's but prior draws (the pooled
    model's normal-inverse-gamma prior given no rows) on a stream of the rounds' seeds, the same in every silo,
    and ``gaussian_withheld`` says which."""
    chain = gate.silo.chain
    if reply.gaussian_draws is None or gate.silo.own_session:
        return reply
    from vcmc.family import GAUSSIAN
    from vcmc.pooled.chain import PARAMETERS_KEY

    plan, g = chain.plan, chain.plan.n_gaussian
    withheld = chain.observed_rows() < plan.min_size                                  # (K, G)
    if not withheld.any():
        return dataclasses.replace(reply, gaussian_withheld=withheld.astype(np.int64))
    draws = np.array(reply.gaussian_draws, dtype=np.float64, copy=True)
    rng = np.random.default_rng(_session(gate.silo).seeds().sequence(0, PARAMETERS_KEY, WITHHELD_KEY))
    prior = GAUSSIAN.posterior_draws(np.zeros((draws.shape[1], 3 * g)), np.asarray(plan.gaussian_prior), g,
                                     draws.shape[0], rng)
    mask = np.concatenate([withheld, withheld], axis=1)[None]
    draws = np.where(mask, prior, draws)
    return dataclasses.replace(reply, gaussian_draws=draws, gaussian_withheld=withheld.astype(np.int64))


def admit_assess(gate, request: RoundAssessRequest) -> RoundAssessRequest:
    assess.refuse_under_dp(gate)
    _answer_of(gate.silo, "round_assess")
    if not 1 <= int(request.n_replicates) <= gate.policy.max_draws or not 0 <= int(request.max_pairs) \
            <= gate.policy.max_pairs:
        raise ConfigError(f"round assess: n_replicates in [1, {gate.policy.max_draws}] and max_pairs in [0, "
                          f"{gate.policy.max_pairs}]")
    return request


def _own_weights(silo, session, pi: np.ndarray) -> np.ndarray | None:
    """The silo's own weights of the answer's clusters at each stored draw (renormalised), when its rows were
    labelled under them (``round_labels = "silo"``), in the analyst's own session and rounds without secure sum
    (where its round counts, which these weights are made of, reach the server anyway); else None: the pooled
    weights (docs/design.md §16, "The assessment after the rounds")."""
    st = rounds.require(silo)
    if not silo.own_session or session.secure:
        return None
    own = st.own_weights(silo.chain.chosen())
    if own is None or own.shape[0] != pi.shape[0]:
        return None
    own = own[:, np.asarray(silo.chain.clusters(), dtype=np.int64)]
    return own / own.sum(axis=1, keepdims=True)


def assessed_draws(silo, request: RoundAssessRequest) -> AssessRequest:
    """The assessment's draws and pairs: evenly spaced stored draws of the answer, the pairs from their means
    with the pooled weights (the same in every silo), the silo's stream from the rounds' seeds. The weights
    of the replicates are the silo's own where its rows were labelled under them (``_own_weights``): each
    silo's rows are checked against the model that labels them."""
    from vcmc.rows.ppc import choose_pairs
    from vcmc.spacing import evenly_spaced

    chain, session = silo.chain, _session(silo)
    pi, prof = chain.draws()
    idx = evenly_spaced(pi.shape[0], int(request.n_replicates))
    pairs = choose_pairs(pi[idx].mean(axis=0), prof[idx].mean(axis=0), silo.n_modalities, int(request.max_pairs))
    own = _own_weights(silo, session, pi)
    seq = session.seeds().sequence(0, session.index, ASSESS_KEY)
    gd = chain.gaussian_draws()
    return AssessRequest(pi=pi[idx] if own is None else own[idx], profiles=prof[idx], pairs=pairs,
                         seed_entropy=int(seq.entropy), spawn_key=tuple(int(k) for k in seq.spawn_key),
                         gaussian=None if gd is None else gd[idx])


def answer_assess(silo, request: RoundAssessRequest):
    asked = assessed_draws(silo, request)
    reply = assess.answer(silo, asked)
    if _own_weights(silo, _session(silo), silo.chain.draws()[0]) is not None:
        reply = dataclasses.replace(reply, weights=np.asarray(asked.pi, dtype=np.float64))
    return reply


def release_assess(gate, request: RoundAssessRequest, reply):
    asked = assessed_draws(gate.silo, request)
    if np.asarray(reply.weights).size and (not gate.silo.own_session or _session(gate.silo).secure):
        raise DisclosureError(f"silo {gate.silo.name!r}: its own weights leave only in the analyst's own session "
                              "and rounds without secure sum")
    return assess.release_at(gate, reply, asked.pi, lambda: asked.profiles, gaussian=getattr(asked, "gaussian", None))


endpoint(RoundStartRequest, admit=admit_start, answer=answer_start, release=release_vector)
endpoint(RoundSweepRequest, admit=admit_sweep, answer=answer_sweep, release=release_vector)
endpoint(RoundFinishRequest, admit=admit_after_stop, answer=answer_finish, release=release_finish, after=after_finish)
endpoint(RoundResultRequest, admit=admit_after_stop, answer=answer_result, release=release_result)
endpoint(RoundAssessRequest, admit=admit_assess, answer=answer_assess, release=release_assess)
