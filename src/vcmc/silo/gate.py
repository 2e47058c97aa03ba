"""The one gate at the silo boundary: every request is admitted by it and every reply released by it.

``LocalSilo.handle`` is the silo's only entry point and calls ``Gate.admit`` on the request before any
handler runs and ``Gate.release`` on the reply before it is returned (docs/federation.md, "Threat model"
and "Disclosure table"). The silo's operator sets the limits: the disclosure limits of ``PrivacyConfig``
(which the server can only tighten) and the operator-only ``SiloPolicy`` (which the server cannot touch).

``admit`` (request validation, ``vcmc.silo.requests_check`` holds the shape and probability rules):
    allow-list of request types; per-run budget of each type (counted in the silo's log); the run order
    (nothing but hello and summarize before the silo's own summary exists); strategies that cannot be made
    safe refused unless allowed; caps on iterations and CPU time; the global posterior draws announced once
    per summary and checked against what the silo sent; assign and assess restricted to announced draws.
``release`` (one rule per reply type, ``RELEASE_RULES``; a reply type without a rule is never sent):
    the minimum cluster size on every per-cluster quantity (soft expected counts included), suppression
    and rounding of every count, DP noise with the stricter epsilon of operator and server, the schema
    fingerprint keyed per run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping

import numpy as np

from vcmc.config import PrivacyConfig
from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.model import profile_offsets
from vcmc.protocol import (
    AnnounceReply,
    AnnounceRequest,
    AssessReply,
    AssessRequest,
    AssignReply,
    AssignRequest,
    CountsReply,
    CountsRequest,
    DivergenceReply,
    DivergenceRequest,
    ErrorReply,
    HelloReply,
    HelloRequest,
    Message,
    SiloSummary,
    SummarizeRequest,
)
from vcmc.protocol.lca import (
    LcaClassifyReply,
    LcaClassifyRequest,
    LcaEStepReply,
    LcaEStepRequest,
    LcaStructuralReply,
    LcaStructuralRequest,
)
from vcmc.protocol.rounds import (
    RoundAssessRequest,
    RoundBirthReply,
    RoundBirthRequest,
    RoundCountsReply,
    RoundFinishRequest,
    RoundKeyReply,
    RoundKeyRequest,
    RoundMaskedCountsReply,
    RoundMoveReply,
    RoundMoveRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.silo import requests_check as rc
from vcmc.silo.disclosure import protect_counts, round_counts, suppress_small_cells

silo_log = logging.getLogger("vcmc.silo")

REQUEST_NAME: dict[type[Message], str] = {
    HelloRequest: "hello", SummarizeRequest: "summarize", DivergenceRequest: "divergence",
    CountsRequest: "counts", AnnounceRequest: "announce", AssignRequest: "assign", AssessRequest: "assess",
    LcaEStepRequest: "lca_estep", LcaClassifyRequest: "lca_classify", LcaStructuralRequest: "lca_structural",
    RoundStartRequest: "round_start", RoundSweepRequest: "round_sweep", RoundFinishRequest: "round_finish",
    RoundMoveRequest: "round_move", RoundKeyRequest: "round_key", RoundAssessRequest: "round_assess",
    RoundBirthRequest: "round_birth",
}
"""The operator's name of each request type (allow-list, budgets, node config keys)."""

SAFE_STRATEGIES = ("contingency",)
UNSAFE_STRATEGIES = ("federated-gradient", "design", "lca", "rounds", "secure-rounds")
"""Strategies (and "lca", the maximum-likelihood latent class analysis, docs/design.md §15) whose round trips
let the server choose the parameters at which a silo sums its rows
(docs/federation.md, "Strategies that cannot be made safe"): refused unless the operator allows them.
"secure-rounds" allows the global-informed rounds only under secure aggregation (the server sees the sum of
the silos' tables, not this silo's); "rounds" allows them with or without it."""

DEFAULT_BUDGET = {"hello": None, "summarize": 4, "divergence": 5000, "announce": 4, "assign": 2, "assess": 1,
                  "counts": 5000, "lca_estep": 20000, "lca_classify": 200, "lca_structural": 20000,
                  "round_start": 1, "round_sweep": 20000, "round_finish": 1, "round_move": 20000, "round_key": 1,
                  "round_assess": 1, "round_birth": 1}
"""Requests of each type a run may make (None: no limit). A summarize request is retried after a failure;
the honest server sends one assign and one assess per run."""


@dataclasses.dataclass(frozen=True)
class SiloPolicy:
    """Operator-only limits of the silo boundary (the server's configuration cannot change them).

    Attributes
    ----------
    allowed_requests : tuple of str
        Request types the silo answers (``REQUEST_NAME`` values); any other is refused.
    allowed_strategies : tuple of str
        Aggregation strategies the silo takes part in. The default is ``("contingency",)``: the
        "federated-gradient" and "design" strategies need count round trips at parameters the server chooses
        and are refused unless listed here.
    budget : mapping of str to int or None
        Most requests of each type per run (missing types: ``DEFAULT_BUDGET``).
    max_iterations : int or None
        Most Gibbs iterations (all chains together) a summarize request may ask for.
    max_cpu_seconds : float or None
        Most CPU seconds of the sampler (checked as it runs, between blocks of iterations).
    profile_floor : float
        Server-chosen probabilities (profiles, weights of divergence references) are raised to at least this
        before use, so no row's likelihood can be made exactly 0 by the server.
    draw_tolerance : float
        Largest total-variation distance, per variable, between an announced global profile draw and the
        silo's own profile of a local cluster mapped to it (the consistency check of ``AnnounceRequest``).
    max_draws, max_clusters, max_pairs : int
        Shape caps of every server-chosen array.
    max_runs_per_day : int or None
        Most runs a server may start in 24 hours (budgets are per run, and a server can start new runs):
        counted in a ledger in ``budget_dir`` (``vcmc.silo.run_ledger``) at each run's first summarize.
    budget_dir : str or None
        A folder on the silo's host that outlives runs, for that ledger (needed with ``max_runs_per_day``).
    structural_floor : bool
        The structural (covariate/distal) sums of the latent class analysis are refused when a class holds
        fewer than the minimum cluster size of the silo's rows in expectation (default; off in the analyst's
        own session).
    require_announcement : bool
        Assign and assess requests are answered only after the global draws were announced, and the draws
        are announced once per summary (default). False (the analyst's own session): assign and assess may
        come without an announcement and a new announcement replaces the last (the server steps re-run on
        the same summaries); once draws are announced, later requests must use them whatever this says.
    whole_round_counts : bool
        The counts of the global-informed rounds are released whole, without the minimum cluster size per
        component (default False). Only the analyst's own session sets it (``own_data``): there every row is
        the analyst's already, and the minimum would stop the pooled sampler from growing a cluster in a silo
        from its first few rows (docs/design.md §16). In a deployment the minimum applies to every round.
    fingerprint_key : str
        A secret the silos' operators share out of band; the schema fingerprint sent is keyed with it and the
        run id, so it cannot be inverted offline (empty: keyed with the run id only).
    """

    allowed_requests: tuple[str, ...] = tuple(REQUEST_NAME.values())
    allowed_strategies: tuple[str, ...] = SAFE_STRATEGIES
    budget: Mapping[str, int | None] = dataclasses.field(default_factory=dict)
    max_iterations: int | None = None
    max_cpu_seconds: float | None = None
    profile_floor: float = 1e-12
    draw_tolerance: float = 0.6
    max_draws: int = 20000
    max_clusters: int = 500
    max_pairs: int = 20000
    fingerprint_key: str = ""
    require_announcement: bool = True
    structural_floor: bool = True
    max_runs_per_day: int | None = None
    budget_dir: str | None = None
    whole_round_counts: bool = False

    def __post_init__(self):
        names = set(REQUEST_NAME.values())
        bad = [r for r in self.allowed_requests if r not in names]
        if bad:
            raise ConfigError(f"allowed requests must be among {sorted(names)}; got {bad}")
        known = set(SAFE_STRATEGIES + UNSAFE_STRATEGIES)
        bad = [s for s in self.allowed_strategies if s not in known]
        if bad:
            raise ConfigError(f"allowed strategies must be among {sorted(known)}; got {bad}")
        bad = [k for k, v in self.budget.items() if k not in names or (v is not None and int(v) < 0)]
        if bad:
            raise ConfigError(f"request budgets must name request types {sorted(names)} with counts >= 0; "
                              f"got {bad}")
        if not (0 < float(self.profile_floor) < 1e-3):
            raise ConfigError(f"profile_floor must be in (0, 1e-3); got {self.profile_floor!r}")
        if self.max_iterations is not None and int(self.max_iterations) < 1:
            raise ConfigError(f"max_iterations must be >= 1; got {self.max_iterations!r}")
        if self.max_cpu_seconds is not None and not float(self.max_cpu_seconds) > 0:
            raise ConfigError(f"max_cpu_seconds must be > 0; got {self.max_cpu_seconds!r}")
        if self.max_runs_per_day is not None and (int(self.max_runs_per_day) < 1 or not self.budget_dir):
            raise ConfigError("max-runs-per-day must be >= 1 and needs budget-dir (a folder on the silo's host "
                              f"that outlives runs); got {self.max_runs_per_day!r} and {self.budget_dir!r}")

    @classmethod
    def own_data(cls) -> SiloPolicy:
        """The policy of a silo built in the analyst's own Python session (``LocalSilo`` without a policy):
        the analyst is the data's operator and chose the strategy, so every strategy is allowed, budgets are
        unlimited, assign/assess may come without an announcement (then with any valid draws), a new
        announcement replaces the last, and an announced profile may be far from the silo's own (the paper's
        Ball and Hungarian matchings can merge dissimilar clusters: the analyst's own choice); the release
        rules, the run order, the shape and probability checks, and the announced draws once announced, hold."""
        return cls(allowed_strategies=SAFE_STRATEGIES + UNSAFE_STRATEGIES,
                   budget={k: None for k in REQUEST_NAME.values()}, require_announcement=False,
                   draw_tolerance=float("inf"), structural_floor=False, whole_round_counts=True)

    def budget_of(self, name: str) -> int | None:
        value = self.budget.get(name, DEFAULT_BUDGET[name])
        return None if value is None else int(value)


def _digest_rows(a: np.ndarray) -> list[str]:
    """sha256 of each row's float64 bytes: a later request's draw must be byte-identical to an announced one."""
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    return [hashlib.sha256(a[i].tobytes()).hexdigest()[:32] for i in range(a.shape[0])]


@dataclasses.dataclass
class _RunState:
    """What the gate remembers within a run (exported with the silo's state; discarded with the run)."""

    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    summarized: bool = False
    strategy: str = ""
    beta: float = 0.5
    announced: bool = False
    assignment: list[int] | None = None
    n_global: int = 0
    pi_rows: list[str] = dataclasses.field(default_factory=list)
    profile_rows: list[str] = dataclasses.field(default_factory=list)
    out_dir_written: bool = False
    rounds_out_dir_written: bool = False
    noise_entropy: int = 0
    noise_key: list[int] = dataclasses.field(default_factory=list)
    n_releases: int = 0
    sent_profile_mean: list[list[float]] = dataclasses.field(default_factory=list)
    """Mean of the profile draws of each local cluster as the summary sent them (K, P): the announcement is
    checked against what the silo sent, which under suppression or rounding are draws of the protected table."""
    sent_profile_radius: list[list[float]] = dataclasses.field(default_factory=list)
    """Per local cluster and variable (K, Q), how far (total variation) the sent draws lie from their mean."""
    secure_key: str = ""
    """Secure aggregation of the rounds (``vcmc.silo.secure_sum``): this run's X25519 private key (hex), the
    number of silos announced with it, the secret shared with every other silo (hex, the run's order; empty
    until a secure start, and the mark of a secure stream), this silo's index, the last round masked (each is
    answered once, in increasing order) and the digest its mask is bound to."""
    secure_n_silos: int = 0
    secure_secrets: list[str] = dataclasses.field(default_factory=list)
    secure_index: int = -1
    secure_round: int = 0
    secure_digest: str = ""
    kept_round_profiles: list[str] = dataclasses.field(default_factory=list)
    """Digests of the profile draws of the kept rounds this silo answered (the analyst's own session only:
    a round assess request must use some of them, ``_admit_round_assess``)."""


class Gate:
    """The silo boundary of one ``LocalSilo``: ``admit`` every request, ``release`` every reply.

    Parameters
    ----------
    silo : LocalSilo
        The silo it guards (read for its data shape, operator limits and local posterior).
    policy : SiloPolicy
    run_key : str or None
        The run's identity (Flower: the run id); keys the schema fingerprint. None in the analyst's own
        session (the fingerprint is sent as it is: nobody else receives it).
    """

    def __init__(self, silo, policy: SiloPolicy, *, run_key: str | None = None):
        self.silo = silo
        self.policy = policy
        self.run_key = run_key
        self.state = _RunState()

    # -- the two doors ------------------------------------------------------------------------------------

    def admit(self, request: Message) -> Message:
        """Validate ``request`` against the protocol and the operator's limits; returns the request to answer
        (server-chosen probabilities floored). Raises ``DisclosureError`` or ``ConfigError`` (their text holds
        names, shapes and limits only)."""
        name = REQUEST_NAME.get(type(request))
        if name is None:
            raise ConfigError(f"silo {self.silo.name!r} cannot answer a "
                              f"{getattr(request, 'KIND', type(request).__name__)!r} message")
        if name not in self.policy.allowed_requests:
            raise DisclosureError(f"silo {self.silo.name!r}: its operator does not allow {name} requests")
        # the latent class analysis has no summary: its requests, and its WAIC round (an assess request), come
        # without one where the operator allows "lca" (its assess then still needs announced draws where the
        # policy requires an announcement, so a deployment's LCA gives no WAIC)
        lca = "lca" in self.policy.allowed_strategies and (name.startswith("lca_") or name == "assess")
        if name not in ("hello", "summarize") and not lca and not self.state.summarized:
            raise NotFittedError(f"silo {self.silo.name!r} received a {name} request before a summarize request "
                                 "of this run (or lost its state); only hello and summarize requests come first")
        used = self.state.counts.get(name, 0) + 1
        limit = self.policy.budget_of(name)
        if limit is not None and used > limit:
            silo_log.warning("silo %r refused %s request number %d of this run (budget %d)", self.silo.name,
                             name, used, limit)
            raise DisclosureError(f"silo {self.silo.name!r}: the run's budget of {name} requests ({limit}) is "
                                  "spent")
        self.state.counts[name] = used
        silo_log.info("silo %r: %s request %d of this run (budget %s)", self.silo.name, name, used,
                      "unlimited" if limit is None else limit)
        return ADMIT_RULES[type(request)](self, request)

    def release(self, request: Message, reply: Message) -> Message:
        """The reply as it may leave the silo: every rule of the operator's limits applied."""
        rule = RELEASE_RULES.get(type(reply))
        if rule is None:
            raise DisclosureError(f"silo {self.silo.name!r}: a {getattr(reply, 'KIND', type(reply).__name__)!r} "
                                  "reply has no disclosure rule and is not sent")
        expected = _REPLY_OF.get(type(request))
        if expected is not None and type(reply) is not expected:
            raise DisclosureError(f"silo {self.silo.name!r}: a {request.KIND!r} is answered by a "
                                  f"{expected.KIND!r}, not a {reply.KIND!r}")
        self.state.n_releases += 1
        return rule(self, request, reply)

    # -- limits in force --------------------------------------------------------------------------------

    @property
    def privacy(self) -> PrivacyConfig:
        return self.silo.privacy_in_force

    @property
    def min_size(self) -> int:
        return max(int(self.privacy.min_cluster_size), 1)

    def noise_rng(self) -> np.random.Generator:
        """Stream of the noise of one release (used only with ``secure_noise=False``): a child of the
        summarize request's noise seed, one per release, so repeated releases get fresh noise."""
        seq = np.random.SeedSequence(int(self.state.noise_entropy),
                                     spawn_key=(*self.state.noise_key, 7, int(self.state.n_releases)))
        return np.random.default_rng(seq)

    def protect_table(self, counts: np.ndarray, privacy: PrivacyConfig, rng) -> tuple[np.ndarray, int]:
        """DP noise, suppression and rounding of a cluster-by-modality table (``protect_counts``)."""
        return protect_counts(counts, privacy, rng, n_modalities=self.silo.n_modalities,
                              secure=self.silo.secure_noise)

    def cpu_guard(self, progress: Callable | None) -> Callable | None:
        """The sampler's progress callback, raising once the operator's CPU-time cap is passed."""
        cap = self.policy.max_cpu_seconds
        if cap is None:
            return progress
        start = time.process_time()

        def guarded(n):
            if time.process_time() - start > float(cap):
                raise DisclosureError(f"silo {self.silo.name!r}: the sampler passed its operator's CPU-time cap "
                                      f"({float(cap):g} s)")
            if progress is not None:
                progress(n)

        return guarded

    def fingerprint(self, plain: str) -> str:
        """The schema fingerprint as sent: plain in the analyst's session; in a deployment an HMAC keyed
        with the operators' shared secret and the run id (equal across the silos of one run, different
        from run to run, and not invertible offline without the secret)."""
        if self.run_key is None:
            return plain
        key = f"{self.policy.fingerprint_key}|{self.run_key}".encode()
        return "hmac-" + hmac.new(key, plain.encode(), hashlib.sha256).hexdigest()[:40]

    def may_write_out_dir(self, *, rounds: bool = False) -> bool:
        """True once per run: only the first assign of a run writes the silo's out-dir; with ``rounds``, the
        first finish of the global-informed rounds may write it once more (their labels replace the one-shot
        pass's; the round_finish budget is 1 per run)."""
        written = self.state.rounds_out_dir_written if rounds else self.state.out_dir_written
        if written:
            silo_log.warning("silo %r: a second %s request in this run; out-dir not written again",
                             self.silo.name, "round finish" if rounds else "assign")
            return False
        if rounds:
            self.state.rounds_out_dir_written = True
        else:
            self.state.out_dir_written = True
        return True

    # -- state ----------------------------------------------------------------------------------------------

    def export_state(self) -> dict[str, np.ndarray]:
        return {"gate.state": np.asarray([json.dumps(dataclasses.asdict(self.state))])}

    def restore_state(self, state: Mapping) -> None:
        if "gate.state" in state:
            self.state = _RunState(**json.loads(str(np.asarray(state["gate.state"]).ravel()[0])))


# -- admission rules, one per request type ------------------------------------------------------------------

def _admit_hello(gate: Gate, request: HelloRequest) -> HelloRequest:
    return request


def _admit_summarize(gate: Gate, request: SummarizeRequest) -> SummarizeRequest:
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
    if gate.policy.max_runs_per_day is not None:
        from vcmc.silo.run_ledger import admit_run

        if gate.run_key is None:
            raise ConfigError(f"silo {gate.silo.name!r}: max-runs-per-day needs the run's identity (a deployment)")
        n_runs = admit_run(gate.policy.budget_dir, gate.run_key, gate.policy.max_runs_per_day, silo=gate.silo.name)
        silo_log.info("silo %r: run %d of the last 24 hours (at most %d)", gate.silo.name, n_runs,
                      gate.policy.max_runs_per_day)
    st = gate.state
    st.summarized, st.announced, st.strategy = False, False, strategy
    st.beta = float(config.prior.beta)
    st.assignment, st.pi_rows, st.profile_rows = None, [], []
    st.sent_profile_mean, st.sent_profile_radius = [], []
    noise = np.random.SeedSequence(int(request.seed_entropy), spawn_key=tuple(int(k) for k in request.spawn_key))
    st.noise_entropy, st.noise_key = int(noise.entropy), [int(k) for k in noise.spawn_key]
    return request


def _refuse_unallowed_rounds(gate: Gate, config) -> None:
    """The rounds a summarize request announces, refused here (before sampling) when the operator would
    refuse them at the round start: the same rules as :func:`_admit_round`, which still applies
    them round by round."""
    if int(config.rounds) <= 1:
        return
    allowed = set(gate.policy.allowed_strategies)
    if not allowed & {"rounds", "secure-rounds"}:
        raise DisclosureError(f"silo {gate.silo.name!r}: the run announces {int(config.rounds) - 1} global-informed "
                              "rounds and its operator does not allow the 'rounds' (their counts are taken at "
                              "parameters the server chooses, round after round; docs/federation.md)")
    if "rounds" not in allowed and not config.round_secure_sum:
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator allows the rounds only under secure "
                              "aggregation ('secure-rounds'), and the run announces plain rounds (set "
                              "aggregation.round-secure-sum=true)")


def _admit_divergence(gate: Gate, request: DivergenceRequest) -> DivergenceRequest:
    p = gate.silo.n_columns
    pi = rc.probabilities("divergence reference_pi", request.reference_pi, ndim=1, floor=0.0, sums_to_one=True)
    c = pi.shape[0]
    rc.cap("divergence", clusters=c, max_clusters=gate.policy.max_clusters)
    prof = rc.profiles("divergence reference_profiles", request.reference_profiles, (c, p),
                       gate.silo.n_modalities, floor=gate.policy.profile_floor)
    if request.rule not in ("penalised", "augmented"):
        raise ConfigError(f"divergence: rule must be 'penalised' or 'augmented'; got {request.rule!r}")
    if not (np.isfinite(request.penalty_multiplier) and 0 < float(request.penalty_multiplier) <= 1e6):
        raise ConfigError("divergence: penalty_multiplier must be finite and in (0, 1e6]")
    return dataclasses.replace(request, reference_pi=pi, reference_profiles=prof)


def _admit_counts(gate: Gate, request: CountsRequest) -> CountsRequest:
    if gate.state.strategy not in UNSAFE_STRATEGIES and not set(UNSAFE_STRATEGIES) & set(
            gate.policy.allowed_strategies):
        raise DisclosureError(f"silo {gate.silo.name!r}: counts requests belong to the federated-gradient and "
                              f"design strategies; this run's summary was for {gate.state.strategy!r}")
    n_global = int(request.n_global)
    rc.cap("counts", clusters=n_global, max_clusters=gate.policy.max_clusters)
    if request.mode == "soft":
        if request.pi is None or request.profiles is None:
            raise ConfigError("a soft counts request needs pi (M, C) and profiles (M, C, P)")
        pi = rc.probabilities("counts pi", request.pi, ndim=2, floor=0.0, sums_to_one=True)
        rc.cap("counts", draws=pi.shape[0], max_draws=gate.policy.max_draws)
        prof = rc.profiles("counts profiles", request.profiles, (*pi.shape, gate.silo.n_columns),
                           gate.silo.n_modalities, floor=gate.policy.profile_floor)
        return dataclasses.replace(request, pi=pi, profiles=prof)
    if request.mode != "hard":
        raise ConfigError(f"counts request mode must be 'soft' or 'hard'; got {request.mode!r}")
    if not gate.privacy.share_counts:
        raise DisclosureError(f"silo {gate.silo.name!r} does not send count tables: its operator set "
                              "share-counts = false")
    return request


def _admit_announce(gate: Gate, request: AnnounceRequest) -> AnnounceRequest:
    st = gate.state
    if st.announced and gate.policy.require_announcement:
        raise DisclosureError(f"silo {gate.silo.name!r}: the global draws of this run were announced already "
                              "(once per summary)")
    local = gate.silo.local
    n_global = int(request.n_global)
    rc.cap("announce", clusters=n_global, max_clusters=gate.policy.max_clusters)
    assignment = rc.assignment("announce", request.assignment, local.n_clusters, n_global)
    pi = rc.probabilities("announce pi", request.pi, ndim=2, floor=0.0, sums_to_one=True)
    profiles = rc.profiles("announce profiles", request.profiles, (None, n_global, gate.silo.n_columns),
                           gate.silo.n_modalities, floor=0.0)
    rc.cap("announce", draws=max(pi.shape[0], profiles.shape[0]), max_draws=gate.policy.max_draws)
    if pi.shape[1] != n_global:
        raise ConfigError(f"announce: pi must have {n_global} columns; got shape {pi.shape}")
    rc.check_weights_are_the_silos(pi, local.pi_draws, assignment, n_global, silo=gate.silo.name)
    sent = np.asarray(st.sent_profile_mean, dtype=np.float64)
    radius = np.asarray(st.sent_profile_radius, dtype=np.float64)
    if sent.shape != (local.n_clusters, gate.silo.n_columns):        # a state saved before they were recorded
        sent, radius = rc.sent_profile_spread(np.asarray(local.profile_draws, dtype=np.float64),
                                              gate.silo.n_modalities)
    rc.check_profiles_near_the_silos(profiles, sent, radius, local.cluster_sizes, assignment, gate.silo.n_modalities,
                                     tolerance=gate.policy.draw_tolerance, silo=gate.silo.name)
    st.announced, st.assignment, st.n_global = True, assignment.tolist(), n_global
    st.pi_rows, st.profile_rows = _digest_rows(pi), _digest_rows(profiles.reshape(profiles.shape[0], -1))
    return request


def _require_announced(gate: Gate, what: str) -> bool:
    """True when draws were announced (later requests must use them); raises if they must have been."""
    if gate.state.announced:
        return True
    if gate.policy.require_announcement:
        raise DisclosureError(f"silo {gate.silo.name!r}: a {what} request needs the run's global draws "
                              "announced first (AnnounceRequest)")
    return False


def _check_announced_draws(gate: Gate, what: str, pi: np.ndarray, profiles: np.ndarray) -> None:
    known_pi, known_prof = set(gate.state.pi_rows), set(gate.state.profile_rows)
    if not set(_digest_rows(pi)) <= known_pi or not set(
            _digest_rows(profiles.reshape(profiles.shape[0], -1))) <= known_prof:
        raise DisclosureError(f"silo {gate.silo.name!r}: the {what} request uses draws that were not announced "
                              "in this run")


def _admit_assign(gate: Gate, request: AssignRequest) -> AssignRequest:
    announced = _require_announced(gate, "assign")
    st = gate.state
    n_global = int(request.n_global)
    rc.cap("assign", clusters=n_global, max_clusters=gate.policy.max_clusters)
    if announced and (n_global != st.n_global or np.asarray(request.assignment).ravel().tolist() != st.assignment):
        raise DisclosureError(f"silo {gate.silo.name!r}: the assign request's matching differs from the one "
                              "announced in this run")
    if (request.pi is None) != (request.profiles is None):
        raise ConfigError("assign: pi and profiles come together or not at all")
    if request.pi is None:
        return request
    pi = np.atleast_2d(np.asarray(request.pi, dtype=np.float64))
    profiles = np.asarray(request.profiles, dtype=np.float64)
    if profiles.ndim == 2:
        profiles = profiles[None]
    if pi.ndim != 2 or profiles.ndim != 3 or pi.shape[0] != profiles.shape[0]:
        raise ConfigError(f"assign: pi and profiles must be draws of the same clusters; got shapes {pi.shape} and "
                          f"{profiles.shape}")
    rc.cap("assign", draws=pi.shape[0], max_draws=gate.policy.max_draws)
    if announced:
        _check_announced_draws(gate, "assign", pi, profiles)
    pi = rc.probabilities("assign pi", pi, ndim=2, floor=0.0, sums_to_one=True)
    prof = rc.profiles("assign profiles", profiles, (pi.shape[0], n_global, gate.silo.n_columns),
                       gate.silo.n_modalities, floor=gate.policy.profile_floor)
    return dataclasses.replace(request, pi=pi, profiles=prof)


def _refuse_assessment_under_dp(gate: Gate) -> None:
    if gate.privacy.dp_epsilon is not None:
        raise DisclosureError(f"silo {gate.silo.name!r} does not take part in model assessment under "
                              "differential privacy (its whole-silo sums are not noised)")


def _assessment_terms(gate: Gate, what: str, pi, pairs, spawn_key) -> np.ndarray:
    """The checks an assess and a round assess request share: weights probabilities, at most
    ``max_pairs`` integer pairs, a short spawn key. Returns the weights."""
    pi = rc.probabilities(f"{what} pi", pi, ndim=2, floor=0.0, sums_to_one=True)
    pairs = np.asarray(pairs)
    if pairs.size and (pairs.dtype.kind not in "iu" or pairs.reshape(-1, 2).shape[0] > gate.policy.max_pairs):
        raise ConfigError(f"{what}: pairs must be at most {gate.policy.max_pairs} pairs of integer columns")
    if len(spawn_key) > 16:
        raise ConfigError(f"{what}: the spawn key must be at most 16 numbers")
    return pi


def _admit_assess(gate: Gate, request: AssessRequest) -> AssessRequest:
    _refuse_assessment_under_dp(gate)
    announced = _require_announced(gate, "assess")
    pi = np.asarray(request.pi, dtype=np.float64)
    profiles = np.asarray(request.profiles, dtype=np.float64)
    if pi.ndim != 2 or profiles.ndim != 3 or pi.shape[0] != profiles.shape[0]:
        raise ConfigError(f"assess: pi must be (R, C) draws and profiles (R, C, P) draws of the same clusters; "
                          f"got shapes {pi.shape} and {profiles.shape}")
    rc.cap("assess", draws=pi.shape[0], max_draws=gate.policy.max_draws)
    if announced:
        _check_announced_draws(gate, "assess", pi, profiles)
    pi = _assessment_terms(gate, "assess", pi, request.pairs, request.spawn_key)
    prof = rc.profiles("assess profiles", profiles, (pi.shape[0], pi.shape[1], gate.silo.n_columns),
                       gate.silo.n_modalities, floor=gate.policy.profile_floor)
    return dataclasses.replace(request, profiles=prof)


def _admit_lca(gate: Gate, request):
    """The latent class analysis: EM rounds at parameters the server chooses, so allowed only where the
    operator lists "lca" (like the count round-trip strategies); parameters finite, floored, capped."""
    if "lca" not in gate.policy.allowed_strategies:
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator does not allow the 'lca' analysis (its "
                              "E-step sums are taken at parameters the server chooses; docs/federation.md)")
    pi = rc.probabilities("lca pi", request.pi, ndim=1, floor=0.0, sums_to_one=False)
    rc.cap("lca", clusters=pi.shape[0], max_clusters=gate.policy.max_clusters)
    prof = rc.profiles("lca profiles", request.profiles, (pi.shape[0], gate.silo.n_columns), gate.silo.n_modalities,
                       floor=gate.policy.profile_floor)
    if np.array_equal(prof, np.asarray(request.profiles, dtype=np.float64)):
        return request                       # unchanged (an honest fit's profiles are above the floor)
    return dataclasses.replace(request, profiles=prof)


def _admit_round(gate: Gate, request):
    """The global-informed rounds (docs/design.md §16): counts of the silo's rows at weights and profiles the
    server draws, round after round, so allowed only where the operator lists "rounds" (consecutive count
    tables differ by the rows that moved; docs/federation.md); after the silo's own labels exist; log
    probabilities finite, floored, capped."""
    allowed = set(gate.policy.allowed_strategies)
    if not allowed & {"rounds", "secure-rounds"}:
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator does not allow the global-informed "
                              "'rounds' (their counts are taken at parameters the server chooses, round after "
                              "round; docs/federation.md)")
    secure = bool(gate.state.secure_secrets)
    if "rounds" not in allowed and not (secure or isinstance(request, RoundKeyRequest | RoundStartRequest)):
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator allows the rounds only under secure "
                              "aggregation ('secure-rounds'), and this run's rounds were not started so")
    if isinstance(request, RoundKeyRequest):
        return _admit_round_key(gate, request)
    if isinstance(request, RoundBirthRequest):
        _birth_share("round birth", request.share, required=True)
        return request
    if isinstance(request, RoundStartRequest):
        rc.cap("round start", clusters=int(request.n_components), max_clusters=gate.policy.max_clusters)
        rc.cap("round start", clusters=np.asarray(request.start).size, max_clusters=gate.policy.max_clusters)
        _admit_births(gate, request)
        prior = float(request.silo_weight_prior)
        if not (np.isfinite(prior) and prior >= 0):
            raise ConfigError(f"round start: silo_weight_prior must be a finite float >= 0; got {prior!r}")
        if request.peer_keys is not None:
            _admit_peer_keys(gate, request)
            _bind_mask(gate, request, 1)
        elif "rounds" not in allowed:
            raise DisclosureError(f"silo {gate.silo.name!r}: its operator allows the rounds only under secure "
                                  "aggregation ('secure-rounds'); this round start has no keys")
        else:       # plain rounds from here on (a later secure start needs a new key request)
            gate.state.secure_secrets = []
        gate.state.kept_round_profiles = []
        return request
    if isinstance(request, RoundFinishRequest):
        return request
    if isinstance(request, RoundMoveRequest):
        if secure:
            raise DisclosureError(f"silo {gate.silo.name!r}: a split-merge proposal is not answered under secure "
                                  "aggregation (its reply is not a table the masks can carry)")
        return _admit_round_move(gate, request)
    if secure:
        _bind_mask(gate, request, int(request.round))
    log_pi = np.asarray(request.log_pi, dtype=np.float64)
    log_prof = np.asarray(request.log_profiles, dtype=np.float64)
    if log_pi.ndim != 1 or log_prof.ndim != 2 or log_prof.shape[0] != log_pi.shape[0]:
        raise ConfigError("round sweep: log_pi must be (C,) and log_profiles (C, P) of the same components")
    rc.cap("round sweep", clusters=log_pi.shape[0], max_clusters=gate.policy.max_clusters)
    if not (np.all(np.isfinite(log_pi)) and np.all(np.isfinite(log_prof))):
        raise ConfigError("round sweep: log probabilities must be finite")
    if len(request.spawn_key) > 16:
        raise ConfigError("round sweep: the spawn key must be at most 16 numbers")
    if float(request.inverse_temperature) != 1.0 and not gate.policy.whole_round_counts:
        # a draw at inverse temperature g uses the profiles to the power g: it would undo the profile floor
        # below (floor^g), so outside the analyst's own session the rows are drawn at temperature 1 only
        raise DisclosureError(f"silo {gate.silo.name!r}: an annealed round sweep (inverse temperature other than "
                              "1) is answered only in the analyst's own session: it sharpens the profiles past "
                              "the profile floor (docs/federation.md)")
    rc.profiles("round sweep profiles", np.exp(log_prof), (log_pi.shape[0], gate.silo.n_columns),
                gate.silo.n_modalities, floor=0.0)
    if request.keep and gate.policy.whole_round_counts:
        gate.state.kept_round_profiles.append(_digest_rows(log_prof.reshape(1, -1))[0])
    # the profile floor in log space (an honest draw's entries are far above it and pass unchanged)
    floor = np.log(gate.policy.profile_floor) if gate.policy.profile_floor > 0 else -np.inf
    if np.any(log_prof < floor):
        return dataclasses.replace(request, log_profiles=np.maximum(log_prof, floor))
    return request


def _birth_share(what: str, share, *, required: bool) -> None:
    from vcmc.config.options import MAX_BIRTH_SHARE

    share = float(share)
    if not (np.isfinite(share) and (0.0 < share <= MAX_BIRTH_SHARE or (share == 0.0 and not required))):
        raise ConfigError(f"{what}: the share of worst-explained rows must be a float in (0, {MAX_BIRTH_SHARE:g}]; "
                          f"got {share!r}")


def _admit_births(gate: Gate, request: RoundStartRequest) -> None:
    """The births of a round start: distinct profile columns, each to a component of the start, a share in
    range (the misfits are the silo's own computation from its labels and the profiles it labelled with)."""
    cols = np.asarray(request.birth_columns if request.birth_columns is not None else [], dtype=np.float64).ravel()
    comps = np.asarray(request.birth_components if request.birth_components is not None else [],
                       dtype=np.float64).ravel()
    _birth_share("round start", request.birth_share, required=cols.size > 0)
    n_comp = int(request.n_components)
    if (cols.size != comps.size or np.unique(cols).size != cols.size or np.any(cols != np.round(cols))
            or np.any(comps != np.round(comps)) or (cols.size and (cols.min() < 0 or cols.max() >= gate.silo.n_columns
                                                                   or comps.min() < 0 or comps.max() >= n_comp))):
        raise ConfigError(f"round start: birth_columns must be distinct profile columns in [0, "
                          f"{gate.silo.n_columns}) and birth_components as many components in [0, {n_comp})")


def _admit_round_key(gate: Gate, request: RoundKeyRequest) -> RoundKeyRequest:
    """Secure aggregation's set-up: a fresh key pair for this run (once: the request budget is 1)."""
    n = int(request.n_silos)
    if not 2 <= n <= gate.policy.max_clusters:
        raise ConfigError(f"round keys: a secure sum is over 2 to {gate.policy.max_clusters} silos; got {n}")
    from vcmc.silo.secure_sum import new_private_key

    st = gate.state
    # a new key pair starts a new stream of masks: its rounds are counted afresh (no mask can repeat, its
    # secrets are new)
    st.secure_key, st.secure_n_silos = new_private_key(), n
    st.secure_secrets, st.secure_index, st.secure_round, st.secure_digest = [], -1, 0, ""
    return request


def _admit_peer_keys(gate: Gate, request: RoundStartRequest) -> None:
    """The key set of the secure sum: one distinct 32-byte key per announced silo, this silo's own at its
    index. Logged by fingerprint, so that the operators can compare their key sets out of band."""
    from vcmc.protocol.rounds import PUBLIC_KEY_BYTES as KEY_BYTES
    from vcmc.silo.secure_sum import fingerprint, pair_secrets, public_key

    if not gate.state.secure_key:
        raise NotFittedError(f"silo {gate.silo.name!r}: a secure round start came before its key request")
    keys = np.asarray(request.peer_keys)
    n, index = gate.state.secure_n_silos, int(request.peer_index)
    if keys.dtype != np.uint8 or keys.shape != (n, KEY_BYTES) or len({k.tobytes() for k in keys}) != n:
        raise ConfigError(f"round start: peer_keys must be {n} distinct {KEY_BYTES}-byte keys (uint8, one row per "
                          "silo)")
    if not (0 <= index < n and np.array_equal(keys[index], public_key(gate.state.secure_key))):
        raise DisclosureError(f"silo {gate.silo.name!r}: the round start's key set does not hold this silo's key "
                              "at its index")
    gate.state.secure_secrets = pair_secrets(gate.state.secure_key, keys, index)
    gate.state.secure_index = index
    silo_log.info("silo %r: the rounds' counts are masked (secure aggregation over %d silos, key set %s)",
                  gate.silo.name, n, fingerprint(keys))


def _bind_mask(gate: Gate, request, round_number: int) -> None:
    """The mask of this round's reply is bound to the request as the server sent it (before any floor) and
    to its round, which must be later than every round masked before in this run."""
    from vcmc.silo.secure_sum import request_digest

    if round_number <= gate.state.secure_round:
        raise DisclosureError(f"silo {gate.silo.name!r}: round {round_number} comes after round "
                              f"{gate.state.secure_round}; under secure aggregation each round is answered once, "
                              "in order (two masked tables under one mask would give their difference away)")
    gate.state.secure_round = round_number
    gate.state.secure_digest = request_digest(request).hex()


def _admit_round_move(gate: Gate, request: RoundMoveRequest) -> RoundMoveRequest:
    """A split-merge proposal: answered only in the analyst's own session (its reply is a sum over rows at
    profiles the server chooses, and a split's counts are those of a sub-cluster the server drew; neither
    passes the limits of a deployment's count tables); components in range, profiles finite, rho a
    probability."""
    if not gate.policy.whole_round_counts:
        raise DisclosureError(f"silo {gate.silo.name!r}: the rounds' split-merge moves are answered only in the "
                              "analyst's own session (docs/federation.md)")
    if request.kind not in ("merge", "split"):
        raise ConfigError(f"round move: kind must be 'merge' or 'split'; got {request.kind!r}")
    a, b = int(request.a), int(request.b)
    if a == b or min(a, b) < 0 or max(a, b) >= gate.policy.max_clusters:
        raise ConfigError(f"round move: a and b must be two different components below {gate.policy.max_clusters}")
    for name in ("log_profile_a", "log_profile_b"):
        v = np.asarray(getattr(request, name), dtype=np.float64)
        if v.shape != (gate.silo.n_columns,) or not np.all(np.isfinite(v)) or np.any(v > 0):
            raise ConfigError(f"round move: {name} must be {gate.silo.n_columns} finite log probabilities")
    lr, l1 = float(request.log_rho), float(request.log_1m_rho)
    if not (np.isfinite(lr) and np.isfinite(l1) and lr <= 0 and l1 <= 0
            and abs(np.logaddexp(lr, l1)) < 1e-9):
        raise ConfigError("round move: log_rho and log_1m_rho must be the logs of rho and 1 - rho")
    if len(request.spawn_key) > 16:
        raise ConfigError("round move: the spawn key must be at most 16 numbers")
    return request


def _admit_round_assess(gate: Gate, request: RoundAssessRequest) -> RoundAssessRequest:
    """The model assessment after the rounds: answered only in the analyst's own session (the profile draws
    must be kept rounds' draws this silo answered, but the weights are the server's); then the rules of an
    assess request (refused under DP; caps on draws and pairs; weights probabilities; the profiles floored
    where they are used, ``requests_check.kept_profiles``)."""
    if not gate.policy.whole_round_counts:
        raise DisclosureError(f"silo {gate.silo.name!r}: the assessment after the rounds is answered only in the "
                              "analyst's own session (docs/federation.md)")
    _refuse_assessment_under_dp(gate)
    log_prof = np.asarray(request.log_profiles, dtype=np.float64)
    keep = np.asarray(request.keep)
    pi = np.asarray(request.pi, dtype=np.float64)
    if log_prof.ndim != 3 or log_prof.shape[2] != gate.silo.n_columns or keep.ndim != 1 or keep.size < 1 \
            or keep.dtype.kind not in "iu" or keep.min() < 0 or keep.max() >= log_prof.shape[1] \
            or np.unique(keep).size != keep.size or pi.shape != (log_prof.shape[0], keep.size):
        raise ConfigError(f"round assess: log_profiles must be (R, C, {gate.silo.n_columns}) draws, keep distinct "
                          "components among the C, and pi (R, len(keep)) weights")
    rc.cap("round assess", draws=log_prof.shape[0], max_draws=gate.policy.max_draws)
    if not set(_digest_rows(log_prof.reshape(log_prof.shape[0], -1))) <= set(gate.state.kept_round_profiles):
        raise DisclosureError(f"silo {gate.silo.name!r}: the round assess request uses profile draws that no kept "
                              "round of this run sent")
    _assessment_terms(gate, "round assess", pi, request.pairs, request.spawn_key)
    return request


ADMIT_RULES: dict[type[Message], Callable] = {
    HelloRequest: _admit_hello, SummarizeRequest: _admit_summarize, DivergenceRequest: _admit_divergence,
    CountsRequest: _admit_counts, AnnounceRequest: _admit_announce, AssignRequest: _admit_assign,
    AssessRequest: _admit_assess, LcaEStepRequest: _admit_lca, LcaClassifyRequest: _admit_lca,
    LcaStructuralRequest: _admit_lca, RoundAssessRequest: _admit_round_assess,
    **dict.fromkeys((RoundStartRequest, RoundSweepRequest, RoundFinishRequest, RoundMoveRequest, RoundKeyRequest,
                     RoundBirthRequest), _admit_round),
}


# -- release rules, one per reply type ----------------------------------------------------------------------

def _small(values: np.ndarray, minimum: int) -> np.ndarray:
    """Entries describing fewer than ``minimum`` people but more than none: withheld (sent as 0)."""
    v = np.asarray(values, dtype=np.float64)
    return (v > 0) & (v < minimum)


def _withhold(values: np.ndarray, minimum: int) -> np.ndarray:
    """``values`` with the entries under the minimum size (but above 0) set to 0, dtype kept."""
    v = np.asarray(values)
    return np.where(_small(v, minimum), np.zeros((), dtype=v.dtype), v)


def _round_real(values: np.ndarray, base: int) -> np.ndarray:
    """Real-valued counts (soft sums) to the nearest multiple of ``base``, halves up, as ``round_counts``."""
    v = np.asarray(values, dtype=np.float64)
    return v if base <= 1 else np.floor(v / base + 0.5) * base


def _protect_vector(gate: Gate, counts: np.ndarray) -> np.ndarray:
    """Suppression (cells in [1, below) to 0) and rounding of a vector of whole-silo counts."""
    privacy = gate.privacy
    out = np.asarray(counts, dtype=np.int64).copy()
    if privacy.suppress_cells_below > 1:
        out[(out >= 1) & (out < privacy.suppress_cells_below)] = 0
    return round_counts(out, privacy.round_to)


def _release_hello(gate: Gate, request, reply: HelloReply) -> HelloReply:
    return dataclasses.replace(reply, schema_fingerprint=gate.fingerprint(reply.schema_fingerprint))


def _release_summary(gate: Gate, request, reply: SiloSummary) -> SiloSummary:
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
        counts, _ = suppress_small_cells(reply.counts, privacy.suppress_cells_below, reply.n_modalities)
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
    # what was sent is what a later announcement is checked against (``_admit_announce``)
    mean, radius = rc.sent_profile_spread(np.asarray(changes.get("profile_draws", reply.profile_draws)),
                                          reply.n_modalities)
    gate.state.sent_profile_mean, gate.state.sent_profile_radius = mean.tolist(), radius.tolist()
    return reply.with_changes(**changes)


def _release_divergence(gate: Gate, request, reply: DivergenceReply) -> DivergenceReply:
    # one row per local cluster, each of at least the minimum size (checked when the summary was released)
    k = gate.silo.local.n_clusters
    cost = np.asarray(reply.cost, dtype=np.float64)
    if cost.ndim != 2 or cost.shape[0] != k:
        raise DisclosureError(f"silo {gate.silo.name!r}: a divergence reply must have one row per local cluster")
    return reply


def _release_counts(gate: Gate, request: CountsRequest, reply: CountsReply) -> CountsReply:
    privacy = gate.privacy
    cluster = np.asarray(reply.cluster, dtype=np.float64)
    modality = np.asarray(reply.modality, dtype=np.float64)
    small = _small(cluster, gate.min_size)                       # (C,) or (M, C): clusters too small to send
    cluster = np.where(small, 0.0, cluster)
    modality = np.where(small[..., None], 0.0, modality)
    if privacy.dp_epsilon is not None:
        rng = gate.noise_rng()
        shape = modality.shape
        flat = modality.reshape(-1, shape[-1])
        noisy, _ = protect_counts(np.rint(flat), dataclasses.replace(privacy, suppress_cells_below=0, round_to=1),
                                  rng, n_modalities=gate.silo.n_modalities, secure=gate.silo.secure_noise)
        modality = noisy.reshape(shape).astype(np.float64)
    if privacy.suppress_cells_below > 1:
        modality = np.where((modality > 0) & (modality < privacy.suppress_cells_below), 0.0, modality)
    cluster = _withhold(_round_real(cluster, privacy.round_to), gate.min_size)
    # rounding can take a cluster under the minimum: its modality counts go with it
    modality = np.where((cluster == 0)[..., None], 0.0, _round_real(modality, privacy.round_to))
    return dataclasses.replace(reply, cluster=cluster, modality=modality)


def _release_round_counts(gate: Gate, request, reply: RoundCountsReply) -> RoundCountsReply | RoundMaskedCountsReply:
    """A round's counts: the rules of every count table (the minimum cluster size per component, DP noise,
    suppression and rounding; ``_release_counts``). In the analyst's own session (``whole_round_counts``)
    without suppression, rounding or noise set, they are released whole. Under secure aggregation the table
    so protected leaves masked (``vcmc.silo.secure_sum``): the same limits, and the server sees only the sum."""
    privacy = gate.privacy
    if not (gate.policy.whole_round_counts and privacy.suppress_cells_below <= 1 and privacy.round_to <= 1
            and privacy.dp_epsilon is None):
        protected = _release_counts(gate, request, CountsReply(
            cluster=np.asarray(reply.cluster, dtype=np.float64), modality=np.asarray(reply.modality, dtype=np.float64),
            loglik=np.zeros(0)))
        reply = dataclasses.replace(reply, cluster=protected.cluster, modality=protected.modality)
    if not gate.state.secure_secrets:
        return reply
    from vcmc.protocol.rounds import pack_counts
    from vcmc.silo.secure_sum import mask

    st = gate.state
    return RoundMaskedCountsReply(masked=mask(pack_counts(reply.cluster, reply.modality), st.secure_secrets,
                                              st.secure_index, bytes.fromhex(st.secure_digest)))


def _release_round_birth(gate: Gate, request, reply: RoundBirthReply) -> RoundBirthReply:
    """Per profile column, the silo's worst-explained rows whose least probable value it is: a vector of
    counts, released with the limits of every count outside the analyst's own session (DP noise, the minimum
    cluster size, suppression, rounding) and whole in it, as the rounds' tables are."""
    privacy = gate.privacy
    if (gate.policy.whole_round_counts and privacy.suppress_cells_below <= 1 and privacy.round_to <= 1
            and privacy.dp_epsilon is None):
        return reply
    counts = np.asarray(reply.counts, dtype=np.int64)
    if privacy.dp_epsilon is not None:
        counts = np.maximum(protect_counts(counts[None], dataclasses.replace(privacy, suppress_cells_below=0,
                                                                            round_to=1), gate.noise_rng(),
                                           secure=gate.silo.secure_noise)[0][0], 0)
    counts = _withhold(_protect_vector(gate, _withhold(counts, gate.min_size)), gate.min_size)
    return dataclasses.replace(reply, counts=counts.astype(np.float64))


def _release_round_key(gate: Gate, request, reply: RoundKeyReply) -> RoundKeyReply:
    """The public key of this run's key pair, and nothing else."""
    from vcmc.silo.secure_sum import public_key

    if not np.array_equal(np.asarray(reply.public_key), public_key(gate.state.secure_key)):
        raise DisclosureError(f"silo {gate.silo.name!r}: a key reply carries only the run's public key")
    return reply


def _release_masked(gate: Gate, request, reply: RoundMaskedCountsReply) -> RoundMaskedCountsReply:
    """Masked tables are made by the gate itself (``_release_round_counts``), never by a handler."""
    raise DisclosureError(f"silo {gate.silo.name!r}: a masked counts reply is made only by the silo's gate")


def _release_round_move(gate: Gate, request, reply: RoundMoveReply) -> RoundMoveReply:
    """A split-merge reply leaves only in the analyst's own session (its request is refused elsewhere)."""
    if not gate.policy.whole_round_counts:
        raise DisclosureError(f"silo {gate.silo.name!r}: a split-merge reply is sent only in the analyst's own "
                              "session")
    return reply


def _release_announce(gate: Gate, request, reply: AnnounceReply) -> AnnounceReply:
    return reply


def _release_assign(gate: Gate, request, reply: AssignReply) -> AssignReply:
    if isinstance(request, RoundFinishRequest) and gate.policy.whole_round_counts:
        # the rounds' labels in the analyst's own session: whole, as the rounds' counts are there (a silo's
        # few rows of a pooled cluster would otherwise be withheld from result.json while assignments.csv,
        # written in the same session, lists them)
        return reply
    privacy = gate.privacy
    counts = np.asarray(reply.counts, dtype=np.int64)
    if privacy.dp_epsilon is not None:
        counts = np.maximum(protect_counts(counts[None], dataclasses.replace(privacy, suppress_cells_below=0,
                                                                            round_to=1), gate.noise_rng(),
                                           secure=gate.silo.secure_noise)[0][0], 0)
    withheld = _small(counts, gate.min_size)
    expected = None if reply.expected is None else np.asarray(reply.expected, dtype=np.float64)
    probability = None if reply.probability is None else np.asarray(reply.probability, dtype=np.float64)
    if expected is not None:
        withheld_e = withheld | _small(expected, gate.min_size)
        expected = _round_real(np.where(withheld_e, 0.0, expected), privacy.round_to)
    if probability is not None:
        probability = _round_real(np.where(withheld | _small(probability, gate.min_size), 0.0, probability),
                                  privacy.round_to)
    counts = _withhold(_protect_vector(gate, np.where(withheld, 0, counts)), gate.min_size)
    # rounding can take a quantity under the minimum: withheld again after it
    expected = None if expected is None else _withhold(expected, gate.min_size)
    probability = None if probability is None else _withhold(np.where(counts == 0, 0.0, probability), gate.min_size)
    # the other fields (entropy, the labelling's draws and Monte Carlo error) are whole-silo scalars: kept
    return dataclasses.replace(reply, counts=counts, expected=expected, probability=probability)


def waic_grid(n_modalities, pi: np.ndarray, profiles: np.ndarray, round_to: int) -> float:
    """The grid (nats) to which a silo's WAIC sums are rounded when its operator rounds counts to ``round_to``:
    ``round_to`` rows' worth of log density, a row's worth being the entropy of the fitted model's predictive
    of each variable summed over variables (mean over the draws; an upper bound of a typical row's
    ``-log p(x_i)``). It is computed from the announced draws alone, so the grid says nothing of the rows: a
    sum rounded to it hides the contribution of fewer than about ``round_to / 2`` rows, as rounding a count
    does. 0 (no rounding) when ``round_to`` is 1."""
    if int(round_to) <= 1:
        return 0.0
    offsets = profile_offsets(n_modalities)
    pi = np.asarray(pi, dtype=np.float64)
    marginal = np.einsum("rc,rcp->rp", pi / pi.sum(axis=1, keepdims=True), np.asarray(profiles, dtype=np.float64))
    marginal = marginal / np.repeat(np.add.reduceat(marginal, offsets[:-1], axis=1), np.diff(offsets), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(marginal > 0, -marginal * np.log(marginal), 0.0)
    return float(int(round_to) * max(terms.sum(axis=1).mean(), 1e-3))


def _release_assess(gate: Gate, request, reply: AssessReply) -> AssessReply:
    fields = ("n_observed", "observed", "replicated", "pair_n_observed", "pair_observed", "pair_replicated")
    changes = {f: _protect_vector(gate, getattr(reply, f)) for f in fields}
    occupied = np.asarray(reply.occupied)
    if occupied.size and not np.isin(occupied, (0, 1)).all():
        raise DisclosureError(f"silo {gate.silo.name!r}: an assess reply's occupancy must be 0/1 indicators")
    grid = 0.0
    if gate.privacy.round_to > 1:   # the grid needs the profiles (a round assess request holds their logs)
        profiles = rc.kept_profiles(request.log_profiles, request.keep, gate.silo.n_modalities,
                                    floor=gate.policy.profile_floor) if isinstance(request, RoundAssessRequest) \
            else request.profiles
        grid = waic_grid(gate.silo.n_modalities, request.pi, profiles, gate.privacy.round_to)
    if grid > 0:
        # the WAIC sums: the review read an exact cell count from two lppd values; rounded like a count
        # (``waic_grid``), and elpd from the rounded parts so that the message stays consistent
        lppd = float(np.floor(reply.lppd / grid + 0.5) * grid)
        p_waic = float(np.floor(reply.p_waic / grid + 0.5) * grid)
        changes.update(lppd=lppd, p_waic=p_waic, elpd=lppd - p_waic,
                       elpd_m2=float(np.floor(reply.elpd_m2 / grid ** 2 + 0.5) * grid ** 2))
    return dataclasses.replace(reply, **changes)


def _release_lca(gate: Gate, request, reply):
    """Latent class sums: suppression and rounding of the count-like sums where the operator set them. The
    minimum cluster size is not applied to the EM sums (EM needs every class's sums; an operator who allows
    "lca" accepts sums at server-chosen parameters, docs/federation.md); the structural sums (score, Hessian,
    moments of one class's few people) are refused under it (``_floor_structural``)."""
    privacy = gate.privacy
    if isinstance(reply, LcaStructuralReply):
        _floor_structural(gate, request)
        return reply
    if privacy.round_to <= 1 and privacy.suppress_cells_below <= 1:
        return reply

    def protect(v):
        v = np.asarray(v, dtype=np.float64)
        if privacy.suppress_cells_below > 1:
            v = np.where((v > 0) & (v < privacy.suppress_cells_below), 0.0, v)
        return _round_real(v, privacy.round_to)

    if isinstance(reply, LcaEStepReply):
        return dataclasses.replace(reply, cluster=protect(reply.cluster), modality=protect(reply.modality))
    if isinstance(reply, LcaClassifyReply):
        return dataclasses.replace(reply, cross=protect(reply.cross))
    return reply


def _floor_structural(gate: Gate, request: LcaStructuralRequest) -> None:
    """The size floor of the structural (covariate or distal) sums: their score, Hessian and moments are
    per-class sums over the silo's rows weighted by the measurement model's posterior, so a class holding
    fewer than the minimum cluster size in this silo (in expectation, but more than none) would describe
    those few people: the reply is refused (in a deployment; the analyst's own session sends it)."""
    if not gate.policy.structural_floor:
        return
    from vcmc.silo.counts import soft_counts

    pi = np.asarray(request.pi, dtype=np.float64)[None]
    profiles = np.asarray(request.profiles, dtype=np.float64)[None]
    cluster, _, _ = soft_counts(gate.silo.codes, gate.silo.n_modalities, pi, profiles)
    if np.any(_small(np.asarray(cluster)[0], gate.min_size)):
        raise DisclosureError(f"silo {gate.silo.name!r}: a latent class holds fewer than the minimum cluster size "
                              f"({gate.min_size}) of its rows; its structural sums are not sent")


def _release_error(gate: Gate, request, reply: ErrorReply) -> ErrorReply:
    return reply


RELEASE_RULES: dict[type[Message], Callable] = {
    HelloReply: _release_hello, SiloSummary: _release_summary, DivergenceReply: _release_divergence,
    CountsReply: _release_counts, AnnounceReply: _release_announce, AssignReply: _release_assign,
    AssessReply: _release_assess, ErrorReply: _release_error, LcaEStepReply: _release_lca,
    LcaClassifyReply: _release_lca, LcaStructuralReply: _release_lca, RoundCountsReply: _release_round_counts,
    RoundMoveReply: _release_round_move, RoundKeyReply: _release_round_key, RoundMaskedCountsReply: _release_masked,
    RoundBirthReply: _release_round_birth,
}
"""The disclosure rule of every reply type (tests/silo/test_gate.py checks every reply of
``vcmc.protocol.MESSAGE_TYPES`` has one)."""

_REPLY_OF = {HelloRequest: HelloReply, SummarizeRequest: SiloSummary, DivergenceRequest: DivergenceReply,
             CountsRequest: CountsReply, AnnounceRequest: AnnounceReply, AssignRequest: AssignReply,
             AssessRequest: AssessReply, LcaEStepRequest: LcaEStepReply, LcaClassifyRequest: LcaClassifyReply,
             LcaStructuralRequest: LcaStructuralReply, RoundStartRequest: RoundCountsReply,
             RoundSweepRequest: RoundCountsReply, RoundFinishRequest: AssignReply, RoundMoveRequest: RoundMoveReply,
             RoundKeyRequest: RoundKeyReply, RoundAssessRequest: AssessReply, RoundBirthRequest: RoundBirthReply}

