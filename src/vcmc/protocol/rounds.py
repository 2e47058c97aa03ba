"""Messages of the global-informed rounds: the pooled model's blocked Gibbs sampler across the silos, with the
server as a relay (docs/design.md §16; docs/federation.md, "The rounds").

Every silo runs the same pooled chain (``vcmc.pooled.chain``) on the pooled sums it computes itself from every
silo's vector, which the server relays: the server chooses no parameter a silo uses, and in a deployment every
vector is masked, padded and tagged (``vcmc.silo.secure_sum``), so it learns nothing of any round.

- ``RoundStartRequest`` -> ``RoundVectorReply``: the participants, the start map (each silo's local clusters
  to components), the plan of the chain; the silo replies with its share of the group secret, encrypted to
  every other participant (empty in the analyst's own session). Round -1.
- ``RoundSweepRequest`` (round r, every participant's vector of round r) -> ``RoundVectorReply`` of round r + 1:
  round -1 carries the shares (the silo derives the group secret and replies with its births vector, round 0);
  round 0 the births vectors (the silo starts its rows' allocations and replies with their counts, round 1);
  round r >= 1 the counts of round r (the silo draws the pooled chain's next weights and profiles, sweeps its
  rows and replies with the new counts, or with ``stop`` once the chain has stopped).
- ``RoundFinishRequest`` -> ``AssignReply``: the silo's rows labelled with the answer's clusters (labels and
  memberships stay in the silo).
- ``RoundResultRequest`` -> ``RoundResultReply``: the pooled chain's answer, the same in every silo.
- ``RoundAssessRequest`` -> ``AssessReply``: the model assessment at the answer's draws, which the silo has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.assess import AssessReply
from vcmc.protocol.assign import AssignReply
from vcmc.protocol.message import Reply, Request

ROUNDS = ("rounds", "secure-rounds")
"""The strategy of the rounds' requests, which the operator allows (``allow-strategies``; the default policy
does: nothing of a round reaches the server). "secure-rounds", the former name of the rounds under secure
aggregation, allows them too: every deployment's rounds are secure now."""


@dataclass(frozen=True)
class RoundVectorReply(Reply):
    """A silo's contribution to a round's pooled sum: ``vector`` (L,) uint64, its packed counts (``pack``) masked
    and padded in a deployment, plain in the analyst's own session; ``tag`` (32,) uint8 (empty when plain);
    ``stop``: the silo's pooled chain has stopped (no vector then). The reply to the start carries the silo's
    encrypted shares of the group secret in ``vector`` (bytes, viewed as uint64)."""

    KIND = "round_vector_reply"
    VERSION = 1

    round: int
    vector: np.ndarray
    tag: np.ndarray
    stop: bool = False

    def check_reply(self, request, silo: str) -> None:
        if np.asarray(self.vector).dtype != np.uint64 or np.asarray(self.tag).dtype != np.uint8:
            self.refuse(request, silo, "a round's vector is uint64 and its tag uint8")
        expected = -1 if isinstance(request, RoundStartRequest) else int(request.round) + 1
        if int(self.round) != expected:
            self.refuse(request, silo, f"the reply is of round {int(self.round)}, expected {expected}")


def pack(tables) -> np.ndarray:
    """The int64 vector of one or more count tables (each ``(cluster (C,), modality (C, P))``, with Gaussian items
    ``(cluster, modality, gaussian (C, 3G) int64 on the grid)``, or a plain vector), concatenated. Counts of rows
    are whole numbers; anything else is refused. Integer arrays (the grid's sums, beyond float64's exact
    integers) are taken as they are."""
    parts, kinds = [], []
    for x in (x for t in tables for x in (t if isinstance(t, tuple) else (t,))):
        a = np.asarray(x)
        kinds.append(a.dtype.kind in "iu")
        parts.append(a.ravel() if kinds[-1] else np.asarray(a, dtype=np.float64).ravel())
    if not parts:
        return np.zeros(0, dtype=np.int64)
    with np.errstate(invalid="ignore"):         # a NaN or an infinity cast: refused below
        out = np.concatenate([p.astype(np.int64) for p in parts])
    # one check of everything: whole numbers (a NaN, an infinity or a fraction does not survive the cast and
    # back) of magnitude below 2^62, so that the silos' sum of them cannot wrap
    floats = [p for p, is_int in zip(parts, kinds, strict=True) if not is_int]
    if floats:
        flat = np.concatenate(floats)
        if flat.size and (not np.all(np.abs(flat) < 2.0**62) or not np.array_equal(np.rint(flat), flat)):
            raise ValueError("the rounds sum whole counts only; a table held other values")
    if any(kinds) and out.size and np.abs(out).max() >= 2**62:
        raise ValueError("the rounds sum whole counts below 2^62 only; a table held larger ones")
    return out


def unpack(vector: np.ndarray, n_chains: int, n_components: int, n_gaussian: int = 0) -> list[tuple]:
    """``pack`` of ``n_chains`` tables reversed: one (cluster (C,), modality (C, P)) per chain, as float64; with
    ``n_gaussian`` G items also their statistics on the grid (C, 3G) as the int64 they were summed in (observed
    rows, ``sum m``, ``sum m^2``: ``vcmc.family.gaussian.from_grid`` reads them)."""
    raw = np.asarray(vector, dtype=np.int64)
    v = raw.astype(np.float64)
    c, g = int(n_components), int(n_gaussian)
    per = v.size // max(int(n_chains), 1)
    rest = per - c - 3 * c * g
    if per * n_chains != v.size or rest < 0 or rest % c:
        raise ValueError(f"a vector of {v.size} entries is not {n_chains} tables of {c} components")
    if not g:
        return [(v[i * per:i * per + c], v[i * per + c:(i + 1) * per].reshape(c, -1)) for i in range(int(n_chains))]
    return [(v[i * per:i * per + c], v[i * per + c:i * per + c + rest].reshape(c, -1),
             raw[i * per + c + rest:(i + 1) * per].reshape(c, 3 * g)) for i in range(int(n_chains))]


@dataclass(frozen=True)
class RoundStartRequest(Request, action="round_start", reply=RoundVectorReply, budget=1, strategies=ROUNDS):
    """Start the rounds. The same request goes to every participant (its digest binds every secret and tag of
    the run): ``names`` the participants in the run's order; ``start`` (S, K) each participant's local clusters
    to components (row s for ``names[s]``; -1 past its clusters); ``n_components``, ``alpha``, ``beta`` (P,)
    the pooled model; ``checkpoints``, ``stop``, ``n_chains``, ``anneal``, ``anneal_until``, ``max_stored``,
    ``min_size`` the pooled chain's plan (``vcmc.pooled.chain.ChainPlan``); ``birth_share`` and ``birth_budget``
    the births; ``silo_weight_prior`` the labels' weights (0: pooled; above 0: each silo's own, docs/design.md
    §16); ``secure``: masked, padded and tagged vectors (refused without in a deployment); ``seed_entropy`` and
    ``spawn_key`` the run's seed (the streams of the analyst's own session; a deployment's come from the group
    secret); ``gaussian_prior`` (4,) the pooled model's normal-inverse-gamma prior ``(m0, kappa0, a0, b0)`` of the
    Gaussian items (unfractionated; absent without them: a silo holding some refuses the start then)."""

    VERSION = 5

    names: tuple[str, ...]
    start: np.ndarray
    n_components: int
    alpha: float
    beta: np.ndarray
    checkpoints: np.ndarray
    stop: bool
    n_chains: int
    anneal: float
    anneal_until: int
    max_stored: int
    min_size: int
    birth_share: float
    birth_budget: int
    silo_weight_prior: float
    secure: bool
    seed_entropy: int
    spawn_key: tuple[int, ...]
    gaussian_prior: np.ndarray | None = None


@dataclass(frozen=True)
class RoundSweepRequest(Request, action="round_sweep", reply=RoundVectorReply, budget=20000, strategies=ROUNDS):
    """Every participant's vector of round ``round`` as it replied (``vectors`` (S, L) uint64, ``tags`` (S, 32)
    uint8; the shares (S, S * 48 / 8) at round -1): the silo answers with its vector of the next round."""

    VERSION = 3

    round: int
    vectors: np.ndarray
    tags: np.ndarray


@dataclass(frozen=True)
class RoundFinishRequest(Request, action="round_finish", reply=AssignReply, budget=1, strategies=ROUNDS):
    """End of the rounds: each row's membership of the answer's clusters (``vcmc.pooled.chain.PooledChain
    .clusters``, the silo's own computation) is its allocation probabilities averaged over the window's stored
    rounds, renormalised; its label the most probable cluster. Nothing the server chooses."""

    VERSION = 2


@dataclass(frozen=True)
class RoundResultReply(Reply):
    """The pooled chain's answer, the same in every silo: ``clusters`` (K,) its components that are the answer's
    clusters, ``pi_draws`` (T, K) and ``profile_draws`` (T, K, P) the window's stored draws of them; per round
    ``trace_k`` the occupied components and ``trace_log_joint`` the collapsed log joint (rounded to the grid
    ``log_joint_grid`` in a deployment, 0 in the analyst's own session); ``first_kept`` the window's first
    round; ``reason`` ("settled" or "cap"), ``settled``, ``rhat``, ``chains_agree`` and ``chosen`` (the chain of
    the answer); the births: ``birth_columns``, ``birth_rows`` (their misfits, summed over the silos),
    ``birth_components`` and ``birth_clusters`` (the answer's cluster each became, 0-based; -1 none);
    ``gaussian_draws`` (T, K, 2G) the stored draws of the clusters' Gaussian means and variances (standardised;
    None without Gaussian items); ``gaussian_withheld`` (K, G) 1 where a (cluster, item) was observed in fewer rows
    than the minimum cluster size and its draws are the prior's (a deployment's release rule; None in the
    analyst's own session)."""

    KIND = "round_result_reply"
    VERSION = 1

    clusters: np.ndarray
    pi_draws: np.ndarray
    profile_draws: np.ndarray
    trace_k: np.ndarray
    trace_log_joint: np.ndarray
    log_joint_grid: float
    first_kept: int
    reason: str
    settled: bool
    rhat: float
    chains_agree: bool
    chosen: int
    birth_columns: np.ndarray
    birth_rows: np.ndarray
    birth_components: np.ndarray
    birth_clusters: np.ndarray
    gaussian_draws: np.ndarray | None = None
    gaussian_withheld: np.ndarray | None = None

    def check_reply(self, request, silo: str) -> None:
        pi, prof = np.asarray(self.pi_draws), np.asarray(self.profile_draws)
        k = np.asarray(self.clusters).size
        if pi.ndim != 2 or pi.shape[1] != k or prof.ndim != 3 or prof.shape[:2] != pi.shape:
            self.refuse(request, silo, "the answer's draws must be (T, K) weights and (T, K, P) profiles")
        if not (np.all(np.isfinite(pi)) and np.all(np.isfinite(prof)) and np.all(pi >= 0) and np.all(prof >= 0)):
            self.refuse(request, silo, "the answer's draws must be finite probabilities")
        if self.gaussian_draws is not None:
            gd = np.asarray(self.gaussian_draws, dtype=np.float64)
            g = gd.shape[-1] // 2 if gd.ndim == 3 else 0
            if gd.ndim != 3 or gd.shape[:2] != pi.shape or gd.shape[2] != 2 * g or g < 1 \
                    or not np.all(np.isfinite(gd)) or np.any(gd[:, :, g:] <= 0):
                self.refuse(request, silo, "the answer's Gaussian draws must be (T, K, 2G) finite means and "
                                           "positive variances")


@dataclass(frozen=True)
class RoundResultRequest(Request, action="round_result", reply=RoundResultReply, budget=1, strategies=ROUNDS):
    """The pooled chain's answer (``RoundResultReply``), once the chain has stopped."""

    VERSION = 1


@dataclass(frozen=True)
class RoundAssessRequest(Request, action="round_assess", reply=AssessReply, budget=1, strategies=ROUNDS):
    """The model assessment of the rounds' answer (docs/design.md §14 and §16): at ``n_replicates`` of the
    answer's stored draws (the silo's own), the pairs of columns chosen from their means (the same in every
    silo), with the pooled weights; the silo's stream is the rounds' (``vcmc.pooled.chain.Seeds``)."""

    VERSION = 2

    n_replicates: int
    max_pairs: int
