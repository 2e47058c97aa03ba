"""``SiloPolicy``: the operator-only limits of the silo boundary (the server's configuration cannot change
them). Its request names, default budgets and strategies come from the requests' own declarations
(``vcmc.protocol.registry``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vcmc.exceptions import ConfigError
from vcmc.protocol import registry

SAFE_STRATEGIES = ("contingency",)
"""Strategies with no round trip at parameters the server chooses (every other strategy is some request's
``STRATEGIES`` and is refused unless the operator allows it: ``registry.unsafe_strategies``)."""

DEFAULT_STRATEGIES = ("contingency", "rounds")
"""What a deployment's silo takes part in unless its operator says otherwise: the contingency summaries and the
global-informed rounds, whose server only relays vectors it can neither read nor alter and chooses no
parameter (docs/federation.md, "The rounds"); they need the rounds' keys (node config ``rounds-key``)."""

_QUERY = ("a sequence of them is a query interface on the silo's rows (one well-chosen request can read a person's "
          "record)")
EXPOSES = {
    "federated-gradient": f"count tables at weights and profiles the server chooses, step after step: {_QUERY}",
    "design": f"count tables at parameters the server chooses: {_QUERY}",
    "lca": f"the latent class analysis' EM sums (with continuous items their sums and sums of squares) at "
           f"parameters the server chooses, round after round: {_QUERY}",
    "lca-structural": "score, Hessian and log-likelihood sums at covariate coefficients and a classification-error "
                      "matrix the server chooses, which can weight one person alone (their covariate values)",
    "min-divergence": "each local cluster's membership-weighted modality counts, read through reference profiles "
                      "the server chooses (the cells suppression or rounding withheld too)",
    "rounds": "the rounds' vectors, relayed masked to the other participants, which compute the pooled sums "
              "(the server learns none of them; docs/federation.md, 'The rounds')",
}
"""What an operator's allowance of each strategy exposes (the silo's refusal says it; docs/federation.md)."""


def exposure(strategy: str) -> str:
    """What allowing ``strategy`` exposes, in the words of the silo's refusal."""
    return EXPOSES.get(strategy, "sums at parameters the server chooses")


@dataclasses.dataclass(frozen=True)
class SiloPolicy:
    """Operator-only limits of the silo boundary (the server's configuration cannot change them).

    Attributes
    ----------
    allowed_requests : tuple of str
        Request types the silo answers (the requests' ``ACTION``); any other is refused.
    allowed_strategies : tuple of str
        Strategies the silo takes part in. The default is ``("contingency", "rounds")``: the contingency
        summaries and the global-informed rounds (docs/design.md §16), whose server relays what it can neither
        read nor alter. The "federated-gradient" and "design" strategies need count round trips at parameters
        the server chooses and are refused unless listed here, as are "min-divergence" (minimum-divergence
        matching's references), "lca" (the latent class analysis' EM rounds, docs/design.md §15) and
        "lca-structural" (its three-step covariate and distal models). A refusal names the strategy and what
        allowing it exposes (``EXPOSES``). "secure-rounds" is the former name of the rounds under secure
        aggregation, which every deployment's rounds now are: it allows them as "rounds" does.
    budget : mapping of str to int or None
        Most requests of each type per run (missing types: the request's ``BUDGET``).
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
    fingerprint_key : str
        A secret the silos' operators share out of band; the schema fingerprint sent is keyed with it and the
        run id, so it cannot be inverted offline (empty: keyed with the run id only).
    min_peers : int
        Fewest participants (this silo included, each pinned by its operator) the silo takes part in rounds with
        (default 3: with two, each would read the other's table from the pooled sum and its own).
    reproducible_rounds : bool
        The rounds' streams from the run's seed, which the server chooses, instead of from the silos' group
        secret (default False). Same seed, same answer as ``vcmc fit`` on the same files; but the server then
        knows every draw's randomness, so the stored draws it receives tell it more of the pooled tables behind
        them (docs/federation.md, "The rounds"). For tests and reviews of a deployment, not for production.
    exact_scalars : bool
        Scalar sums over the silo's rows (log-likelihoods, entropies, WAIC sums, the structural score and
        Hessian, the Monte Carlo error of the labelling) leave as computed where no suppression, rounding or
        noise is set (default False: on a grid of several rows' worth, ``vcmc.silo.release.scalar_grid``; the
        labelling's Monte Carlo error as its bound). The analyst's own session sets it (``own_data``); an
        operator who sets it (node config ``exact-scalars``) lets a difference of two replies see single rows'
        contributions.
    """

    allowed_requests: tuple[str, ...] = dataclasses.field(default_factory=registry.actions)
    allowed_strategies: tuple[str, ...] = DEFAULT_STRATEGIES
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
    min_peers: int = 3
    reproducible_rounds: bool = False
    exact_scalars: bool = False

    def __post_init__(self):
        registry.check_known_actions(self.allowed_requests, "allowed requests")
        known = set(SAFE_STRATEGIES + registry.unsafe_strategies())
        bad = [s for s in self.allowed_strategies if s not in known]
        if bad:
            raise ConfigError(f"allowed strategies must be among {sorted(known)}; got {bad}")
        names = set(registry.actions())
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
        if int(self.min_peers) < 1:
            raise ConfigError(f"min-peers must be >= 1; got {self.min_peers!r}")
        if self.max_runs_per_day is not None and (int(self.max_runs_per_day) < 1 or not self.budget_dir):
            raise ConfigError("max-runs-per-day must be >= 1 and needs budget-dir (a folder on the silo's host "
                              f"that outlives runs); got {self.max_runs_per_day!r} and {self.budget_dir!r}")

    @classmethod
    def own_data(cls) -> SiloPolicy:
        """The policy of a silo built in the analyst's own Python session (``LocalSilo`` without a policy):
        the analyst is the data's operator and chose the strategy, so every strategy is allowed, budgets are
        unlimited, assign/assess may come without an announcement (then with any valid draws), a new
        announcement replaces the last, and an announced profile may be far from the silo's own (the paper's
        Ball and Hungarian matchings can merge dissimilar clusters: the analyst's own choice), and scalar sums
        over rows leave as computed where nothing is protected; the release rules, the run order, the shape
        and probability checks, and the announced draws once announced, hold."""
        return cls(allowed_strategies=SAFE_STRATEGIES + registry.unsafe_strategies(),
                   budget=dict.fromkeys(registry.actions()), require_announcement=False,
                   draw_tolerance=float("inf"), structural_floor=False, exact_scalars=True)

    def budget_of(self, name: str) -> int | None:
        value = self.budget[name] if name in self.budget else registry.default_budgets()[name]
        return None if value is None else int(value)
