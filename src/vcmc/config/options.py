"""Every option of the pipeline, in frozen dataclasses documented once here.

Each option is defined once, as a field of one of these dataclasses: its name, type (the type hint; a
``Literal`` holds the allowed values), default and help (the class docstring's ``Attributes`` entry), and,
in the field's metadata (``option``), the command-line flag of ``vcmc fit`` if it has one.
``vcmc.config.schema`` reads them into the one table of options from which the CLI's flags and help,
the ``--set``/``--config``/Flower run-config keys, the estimator's parameters and the Flower app's
``pyproject.toml`` are derived. The Python API, the CLI and the Flower run config build these same
objects. Validation happens in ``__post_init__`` with one message template: the argument, its owner, the
valid range, the value got.
"""

from __future__ import annotations

import dataclasses
import types
import typing
import warnings
from dataclasses import asdict, dataclass, field
from typing import Literal

from vcmc.closeness import DEFAULT_LEVEL
from vcmc.exceptions import ConfigError

# The allowed values of every option with a fixed set of choices, defined once: the dataclasses below use
# them as type hints and validate against them, the CLI takes its ``choices`` from them and the mapping
# parser (``vcmc.config.mapping``) coerces to them.
PartitionEstimator = Literal["modal", "psm"]
MatchingMethod = Literal["calibrated", "ball", "hungarian", "min-divergence"]
BallRadius = Literal["overfitted", "finite"]
NewClusterRule = Literal["penalised", "augmented"]
AbsentCluster = Literal["structural_zero", "placeholder"]
Strategy = Literal["contingency", "federated-gradient", "design"]
Objective = Literal["auto", "complete", "observed"]
Tie = Literal["per_block", "per_cluster"]
Optimizer = Literal["projected-adaptive", "projected-sgd", "softmax-lbfgs", "exponentiated"]
StopRule = Literal["absolute", "plateau"]
ChainStop = Literal["fixed", "converged"]
# Burn-in of `vcmc fit --iterations auto` when none is given: the log posterior of the paper's designs, the
# generalisation suite and the EHR cohort is stationary well before it (docs/design.md §4.1.1).
AUTO_BURN_IN = 5_000
# `aggregation.rounds` of the default, `vcmc fit --rounds auto`: the run's rounds are chosen for it
# (vcmc.rounds.plan: the global-informed rounds in the analyst's own session, the one-shot pass in a deployment).
AUTO_ROUNDS = 0
# Largest `aggregation.round_births`: the share of a silo's rows a birth request may ask for (vcmc.rows.births;
# the silo's gate holds the same limit).
MAX_BIRTH_SHARE = 0.1
AssignMode = Literal["posterior", "local"]
RoundLabels = Literal["pooled", "silo"]


def option(default, *, flag: str | None = None, negate: bool = False):
    """A field with the command-line flag that sets it (``negate``: the flag is a switch that sets the
    option to False, e.g. ``--no-assessment``)."""
    return field(default=default, metadata={"flag": flag, "negate": negate})


def default_burn_in(n_iter: int, stop: str) -> int:
    """The burn-in when none is given: half of the iterations; with ``stop = "converged"`` (``--iterations
    auto``) ``AUTO_BURN_IN`` iterations, at most half of the maximum (docs/design.md §4.1.1)."""
    return min(AUTO_BURN_IN, n_iter // 2) if stop == "converged" else n_iter // 2


def choices(literal) -> tuple[str, ...]:
    """The allowed values of one of the ``Literal`` types above (e.g. for argparse ``choices``)."""
    return tuple(typing.get_args(literal))


def _check(cond: bool, owner: str, name: str, expected: str, got) -> None:
    if not cond:
        # the parts of the message are kept on the error, so that the CLI can say it in its own words
        # (the flag the user typed instead of the API parameter)
        raise ConfigError(f"The {name!r} parameter of {owner} must be {expected}. Got {got!r} instead.",
                          option=f"{owner}.{name}", expected=expected, got=got)


def _finite(x) -> bool:
    """A real number that is neither infinite nor NaN (``inf`` as a prior concentration ends in a division
    by zero inside the samplers; NaN compares false with everything and slips past range checks)."""
    import math

    try:
        return not isinstance(x, bool) and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _check_choices(obj) -> None:
    """Validate every field whose type hint holds a ``Literal`` against its allowed values."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        hint = hints[f.name]
        alts = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        literals = [a for a in alts if typing.get_origin(a) is Literal]
        if not literals:
            continue
        allowed = tuple(v for lit in literals for v in typing.get_args(lit))
        value = getattr(obj, f.name)
        if isinstance(value, str) or len(literals) == len(alts):
            others = [a.__name__ for a in alts if typing.get_origin(a) is not Literal and a is not type(None)]
            _check(value in allowed, type(obj).__name__, f.name, "one of " + ", ".join(repr(v) for v in allowed)
                   + (f" or a positive {' or '.join(others)}" if others else ""), value)


def check_new_cluster_rule(rule: str, penalty_multiplier: float, owner: str) -> None:
    """Validate the new-cluster rule of minimum-divergence matching (server and silo check the same)."""
    _check(rule in choices(NewClusterRule), owner, "rule", "one of " + ", ".join(map(repr, choices(
        NewClusterRule))), rule)
    import math

    _check(isinstance(penalty_multiplier, int | float) and math.isfinite(penalty_multiplier)
           and penalty_multiplier >= 0, owner, "penalty_multiplier", "a finite float >= 0", penalty_multiplier)


@dataclass(frozen=True)
class PriorConfig:
    """Priors of the over-fitted latent class model (docs/design.md §2).

    Attributes
    ----------
    n_components : int
        C+, the number of components of the over-fitted mixture (default 15, the paper's).
    alpha : float
        Symmetric Dirichlet concentration of the weights (default 0.01, sparse: empties extra components).
    beta : float or tuple of float
        Symmetric Dirichlet concentration of each profile, one value or one per variable (default 0.5).
    fractionate : bool
        Raise each silo's prior to the power 1/S: local parameters ``(a - 1)/S + 1`` (default True).
    mean_precision : float
        kappa0 of a Gaussian item's normal-inverse-gamma prior: the mean's prior variance is the cluster's variance
        over kappa0, on the standardised scale (default 0.01: a prior sd of 10 within-cluster sds).
    variance_shape : float
        a0 of the inverse-gamma prior of a Gaussian item's variance (default 2.5, which keeps a component's
        variance away from 0 with few members).
    variance_rate : float
        b0 of that prior, standardised scale (default 0.75: prior mean b0/(a0 - 1) = 0.5, half the pooled variance).
    """

    n_components: int = option(15, flag="--components")
    alpha: float = option(0.01, flag="--alpha")
    beta: float | tuple[float, ...] = option(0.5, flag="--beta")
    fractionate: bool = option(True, flag="--no-fractionation", negate=True)
    mean_precision: float = 0.01
    variance_shape: float = 2.5
    variance_rate: float = 0.75

    def __post_init__(self):
        _check_choices(self)
        _check(isinstance(self.n_components, int) and self.n_components >= 1, "PriorConfig",
               "n_components", "an int >= 1", self.n_components)
        _check(_finite(self.alpha) and self.alpha > 0, "PriorConfig", "alpha", "a finite float > 0", self.alpha)
        betas = self.beta if isinstance(self.beta, tuple) else (self.beta,)
        _check(len(betas) > 0 and all(_finite(b) and b > 0 for b in betas), "PriorConfig", "beta",
               "finite and > 0 (a float or one per variable)", self.beta)
        for name in ("mean_precision", "variance_shape", "variance_rate"):
            value = getattr(self, name)
            _check(_finite(value) and value > 0, "PriorConfig", name, "a finite float > 0", value)


@dataclass(frozen=True)
class SamplerConfig:
    """Gibbs sampler run settings (the paper: 50,000 iterations of which 25,000 burn-in, thinning 5).

    Attributes
    ----------
    n_iter : int
        Gibbs iterations per chain, burn-in included (default 50000; with ``stop = "converged"`` the most a
        chain may run).
    burn_in : int or None
        Iterations discarded at the start of each chain (default None: half of ``n_iter``; with ``stop =
        "converged"``, ``AUTO_BURN_IN`` = 5000 at most half of ``n_iter``). Resolved when the config is
        built, so ``SamplerConfig(n_iter=2000).burn_in == 1000``; a burn-in derived this way is derived again
        when ``n_iter`` or ``stop`` is changed through ``config_from_mapping`` (``--set``, ``--config``,
        the Flower run config), while an explicit one is kept.
    thin : int
        Keep one draw every N iterations after burn-in (default 5).
    n_chains : int
        Independent chains per silo (default 1; run in parallel processes when ``jobs > 1``).
    block_size : int
        Iterations per call of the compiled kernel (progress is reported between blocks).
    stop : {"fixed", "converged"}
        "fixed" (default): run ``n_iter`` iterations. "converged" (``--iterations auto``): after the burn-in,
        run until the split R-hat of the chain's log posterior and of its relabelled weights is at most
        ``target_rhat`` and their bulk and tail ESS at least ``target_ess`` (split over the chains), checked
        every ``check_every`` iterations; ``n_iter`` is then the maximum (docs/design.md §4.1.1).
    target_rhat : float
        Largest split R-hat at which a chain stops under ``stop = "converged"`` (default 1.01, Vehtari et
        al. 2021's recommendation).
    target_ess : float
        Smallest bulk and tail ESS at which it stops (default 400 in all; Vehtari et al. 2021: 100 per
        chain for 4 chains).
    check_every : int
        Iterations between two convergence checks (default 1000).
    """

    n_iter: int = option(50_000, flag="--iterations")
    burn_in: int | None = option(None, flag="--burn-in")
    thin: int = option(5, flag="--thin")
    n_chains: int = option(1, flag="--chains")
    block_size: int = 1000
    stop: ChainStop = "fixed"
    target_rhat: float = 1.01
    target_ess: float = 400.0
    check_every: int = 1000

    def __post_init__(self):
        _check_choices(self)
        _check(isinstance(self.n_iter, int) and not isinstance(self.n_iter, bool) and self.n_iter >= 1,
               "SamplerConfig", "n_iter", "an int >= 1", self.n_iter)
        # the resolved burn-in is stored in the field (the samplers and result.json read a number); whether
        # it was derived is remembered outside the fields, so that it is derived again for a new n_iter
        derived = self.burn_in is None
        object.__setattr__(self, "_derived_burn_in", derived)
        if derived:
            object.__setattr__(self, "burn_in", default_burn_in(self.n_iter, self.stop))
        _check(0 <= self.burn_in < self.n_iter, "SamplerConfig", "burn_in", "an int in [0, n_iter)",
               self.burn_in)
        _check(self.thin >= 1, "SamplerConfig", "thin", "an int >= 1", self.thin)
        _check(self.n_kept >= 1, "SamplerConfig", "thin", f"at most n_iter - burn_in = {self.n_iter - self.burn_in} "
               "so that a draw is kept after the burn-in", self.thin)
        _check(self.n_chains >= 1, "SamplerConfig", "n_chains", "an int >= 1", self.n_chains)
        _check(self.block_size >= 1, "SamplerConfig", "block_size", "an int >= 1", self.block_size)
        _check(_finite(self.target_rhat) and self.target_rhat > 1.0, "SamplerConfig", "target_rhat",
               "a finite float > 1", self.target_rhat)
        _check(_finite(self.target_ess) and self.target_ess >= 4, "SamplerConfig", "target_ess",
               "a finite float >= 4", self.target_ess)
        _check(self.check_every >= 1, "SamplerConfig", "check_every", "an int >= 1", self.check_every)

    @property
    def derived_burn_in(self) -> bool:
        """Whether ``burn_in`` was derived from ``n_iter`` (given as None) rather than given."""
        return bool(getattr(self, "_derived_burn_in", False))

    @property
    def n_kept(self) -> int:
        """Draws kept per chain."""
        return len(range(self.burn_in + self.thin - 1, self.n_iter, self.thin))


@dataclass(frozen=True)
class PostprocessConfig:
    """Post-processing of a local chain inside the silo (docs/design.md §4.2).

    Attributes
    ----------
    merge_unresolved : bool
        Merge, inside the silo, local clusters that the silo's own posterior cannot tell apart (their
        closeness statistic within the chi-square quantile ``resolution_level``, ``vcmc.closeness``) into
        one (default False). Off by default because the server's calibrated matching makes the same
        decision with every silo's evidence: it merges two clusters of one silo only when they are close
        AND no other silo keeps their counterparts apart; deciding inside the silo alone merged poorly
        separated real clusters (paper's homogeneous-poor design: ARI 0.53-0.57 instead of 0.58-0.59,
        docs/results/generalisation/README.md). Useful with minimum-divergence or Hungarian matching,
        which never merge two clusters of one silo.
    resolution_level : float
        Quantile of that test (default 0.999999, the default of calibrated matching).
    min_cluster_fraction : float
        Local clusters smaller than ``max(min_local_size, min_cluster_fraction * n_s)`` have their
        members reallocated inside the silo to their most probable remaining cluster (default 0: off;
        the first release used 0.02, which removes real small clusters when silos are many or small, and
        removes every cluster under 2% of the pooled rows from full-data MCMC).
    min_local_size : int
        Absolute floor of the same rule (default 0). Not the disclosure minimum
        ``PrivacyConfig.min_cluster_size``, which merges small clusters before anything leaves the silo.
    reallocate_small : bool
        Switch the fixed-size rule off entirely (default True: applied with the values above).
    partition : {"modal", "psm"}
        Modal allocation after relabelling (O(n_s C+) memory, default) or a posterior-similarity
        partition (O(n_s^2) memory, small silos only).
    summary_draws : int
        Most label-consistent draws a silo sends to the server (default 1000; 0 sends every kept draw):
        when the chains keep more, each chain is thinned evenly over its kept window (the same draws for
        the same seed). The server's memory and aggregation time grow linearly with the draws, and at the
        paper's protocol (5,000 kept draws) 30 silos of the application's shape sent 3.3 GB of draws; the
        silo's own R-hat, ESS, medians and posterior of K still use every kept draw. 1,000 is what the
        generalisation suite was run with (docs/results/generalisation, 10,000 iterations, burn-in 5,000,
        thinning 5) and what the paper's study is run with (docs/results/README.md).
    """

    merge_unresolved: bool = False
    resolution_level: float = DEFAULT_LEVEL
    min_cluster_fraction: float = option(0.0, flag="--min-local-fraction")
    min_local_size: int = 0
    reallocate_small: bool = True
    partition: PartitionEstimator = "modal"
    summary_draws: int = option(1000, flag="--summary-draws")

    def __post_init__(self):
        _check_choices(self)
        _check(self.summary_draws == 0 or self.summary_draws >= 2, "PostprocessConfig", "summary_draws",
               "0 (every kept draw) or an int >= 2", self.summary_draws)
        _check(0.5 <= self.resolution_level < 1, "PostprocessConfig", "resolution_level", "a float in [0.5, 1)",
               self.resolution_level)
        _check(0 <= self.min_cluster_fraction < 1, "PostprocessConfig", "min_cluster_fraction",
               "a float in [0, 1)", self.min_cluster_fraction)
        _check(self.min_local_size >= 0, "PostprocessConfig", "min_local_size", "an int >= 0",
               self.min_local_size)

    def threshold(self, n_rows: int) -> int:
        """Smallest local cluster kept by the fixed-size rule for a silo of ``n_rows`` rows (0 when off)."""
        if not self.reallocate_small:
            return 0
        import math

        return max(self.min_local_size, math.ceil(self.min_cluster_fraction * n_rows))


@dataclass(frozen=True)
class PrivacyConfig:
    """Disclosure control applied inside the silo before anything is sent (docs/design.md §13).

    Attributes
    ----------
    min_cluster_size : int
        The disclosure minimum: no local cluster of fewer people leaves a silo (default 10); smaller ones
        are merged into their nearest cluster before the summary is built, and the silo reports only how
        many it merged. Schema inference (``vcmc fit`` without a schema file) refuses, for the same
        reason, a modality seen in fewer rows: it would be published in the results.
    suppress_cells_below : int
        Contingency cells with a count in ``[1, suppress_cells_below)`` are suppressed (sent as 0 and
        flagged) (default 0: off; 8 reproduces the NHS/OpenSAFELY "1-7" rule).
    round_to : int
        Contingency counts rounded to the nearest multiple (default 1: no rounding; 5 is common).
    dp_epsilon : float or None
        Discrete-Laplace noise (OpenDP) on count tables with this epsilon per release (default None).
    share_counts : bool
        Whether the contingency table may leave the silo at all (strategy "contingency" needs it).
    share_assessment : bool
        Whether the silo answers the model-assessment round (docs/design.md §14): whole-silo counts of
        every modality and of the checked pairs of modalities, the same counts in datasets replicated from
        the fitted model, and sums over rows of log predictive densities (default True). Suppression and
        rounding apply to those counts; differential-privacy noise does not, so an operator who relies on
        ``dp_epsilon`` sets this to False.
    sum_precision : float
        Gaussian items' sums and sums of squares per cluster leave a silo rounded to a multiple of this, in
        standardised units (default 0: not rounded; docs/design.md §17.4).
    sum_noise : float or None
        Laplace noise of this scale (standardised units) on those sums (default None: none).
    """

    min_cluster_size: int = option(10, flag="--min-cluster-size")
    suppress_cells_below: int = 0
    round_to: int = 1
    dp_epsilon: float | None = None
    share_counts: bool = True
    share_assessment: bool = True
    sum_precision: float = 0.0
    sum_noise: float | None = None

    def __post_init__(self):
        _check_choices(self)
        _check(self.min_cluster_size >= 0, "PrivacyConfig", "min_cluster_size", "an int >= 0",
               self.min_cluster_size)
        _check(self.suppress_cells_below >= 0, "PrivacyConfig", "suppress_cells_below", "an int >= 0",
               self.suppress_cells_below)
        _check(self.round_to >= 1, "PrivacyConfig", "round_to", "an int >= 1", self.round_to)
        _check(self.dp_epsilon is None or (_finite(self.dp_epsilon) and self.dp_epsilon > 0), "PrivacyConfig",
               "dp_epsilon", "None or a finite float > 0", self.dp_epsilon)
        _check(_finite(self.sum_precision) and self.sum_precision >= 0, "PrivacyConfig", "sum_precision",
               "a finite float >= 0", self.sum_precision)
        _check(self.sum_noise is None or (_finite(self.sum_noise) and self.sum_noise > 0), "PrivacyConfig",
               "sum_noise", "None or a finite float > 0", self.sum_noise)


@dataclass(frozen=True)
class MatchingConfig:
    """Cluster matching across silos (docs/design.md §5).

    Attributes
    ----------
    method : {"calibrated", "ball", "hungarian", "min-divergence"}
        "calibrated" (default): Ball's graph of close clusters with a chi-square closeness test on the
        local posteriors, never joining two clusters of one silo that its posterior keeps apart
        (``vcmc.matching.calibrated``); "ball": the paper's Ball matching with its radius.
    level : float
        Quantile of the chi-square closeness test of calibrated matching (default 0.999999).
    radius : {"overfitted", "finite"} or float
        Ball radius per silo cluster: ``(log n_s / n_s)^(1/4)`` ("overfitted", default),
        ``(log n_s / n_s)^(1/2)`` ("finite") or a user value.
    reference : str or None
        Hungarian / min-divergence reference silo (default: most local clusters, ties by size).
    new_cluster_rule : {"penalised", "augmented"}
        Min-divergence rule to open a new global cluster (default penalised log-likelihood).
    penalty_multiplier : float
        Multiplier of the BIC price ``(D/2) log n_l`` of the penalised rule (default 1).
    n_starts : int
        Min-divergence multi-start over references and orders, keeping the smallest total (default 4).
    absent : {"structural_zero", "placeholder"}
        How a global cluster absent from a silo enters aggregation (default structural zero).
    """

    method: MatchingMethod = option("calibrated", flag="--matching")
    level: float = option(DEFAULT_LEVEL, flag="--level")
    radius: BallRadius | float = "overfitted"
    reference: str | None = None
    new_cluster_rule: NewClusterRule = "penalised"
    penalty_multiplier: float = 1.0
    n_starts: int = 4
    absent: AbsentCluster = "structural_zero"

    def __post_init__(self):
        _check_choices(self)
        _check(0.5 <= self.level < 1, "MatchingConfig", "level", "a float in [0.5, 1)", self.level)
        _check(self.radius in choices(BallRadius) or (isinstance(self.radius, float | int)
               and _finite(self.radius) and self.radius > 0), "MatchingConfig", "radius",
               "'overfitted', 'finite' or a finite float > 0", self.radius)
        _check(_finite(self.penalty_multiplier) and self.penalty_multiplier >= 0, "MatchingConfig",
               "penalty_multiplier", "a finite float >= 0", self.penalty_multiplier)
        _check(self.n_starts >= 1, "MatchingConfig", "n_starts", "an int >= 1", self.n_starts)


@dataclass(frozen=True)
class AggregationConfig:
    """Variational aggregation (docs/design.md §6-7).

    Attributes
    ----------
    strategy : {"contingency", "federated-gradient", "design"}
        Aggregation strategy (default "contingency": the silos' contingency counts enter a closed-form
        objective; "federated-gradient": the silos return counts at the server's parameters each round;
        "design": a space-filling design of starts, docs/design.md §7).
    objective : {"auto", "complete", "observed"}
        (a) complete-data Dirichlet objective from counts, (b) observed-data likelihood through silo
        soft counts; "auto" = (a) for contingency/design, (b) for federated-gradient.
    tie : {"per_block", "per_cluster"}
        One weight per silo for each (variable, cluster) block, or one per (silo, cluster).
    optimizer : {"projected-adaptive", "projected-sgd", "softmax-lbfgs", "exponentiated"}
        Optimiser of the aggregation weights (default "projected-adaptive").
    max_iter : int
        Iterations per start (default 1000); stop earlier by the ``stop`` rule.
    tol : float
        ELBO tolerance of the stopping rule (default 0.1, the paper's).
    stop : {"absolute", "plateau"}
        "absolute" (default, the paper's): stop when the ELBO on the evaluation tuples changes by less
        than ``tol`` between two iterations. "plateau" (scale-aware): stop when its gain over the last 10
        iterations is below ``tol`` or below 2 standard errors of the per-tuple gains, so the rule scales
        with the number of rows (see ``vcmc.aggregation.optimize``).
    n_draws_batch : int
        Draw tuples per gradient step (M, default 50).
    n_eval : int
        Fixed draw tuples on which the ELBO of the stopping rule is evaluated (default 200).
    n_starts : int
        Starts of the space-filling design (strategy "design", default 300; paper: 300 x 10 iterations).
    design_iter : int
        Iterations per design start (default 10).
    floor : float
        Lower bound of every weight after projection (default 1e-6).
    step_size : float
        Base step in weight units of "projected-sgd" (scaled by 1/(n sqrt(t))) and "exponentiated";
        the default "projected-adaptive" (a Newton step in each block's tangent space) needs none.
    assign : {"posterior", "local"}
        How each silo labels its rows once the global posterior is known. "posterior" (default): a row's
        membership of each global cluster is its allocation probability under the global profile draws
        and the silo's own weights of the global clusters, averaged over ``assign_draws`` draws, and its
        label the most probable cluster (profiles estimated from all silos classify borderline rows
        better than a silo's own; the silo's own weights keep a cluster that is common in this silo and
        rare elsewhere from losing its members). "local": the silo's local posterior propagated through
        the matching (the paper's).
    assign_draws : int
        Posterior draws sent to each silo for its memberships (default 100, evenly spaced).
    rounds : int
        Rounds of the run (default 0, ``--rounds auto``). 1: the paper's one-shot pass. R > 1: after the one-shot
        pass's matching, R - 1 global-informed rounds of the pooled model's blocked Gibbs sampler across the
        silos, started from the silos' clusters through the matching (docs/design.md §16); the second half
        gives the global posterior and memberships. 0 (auto, ``vcmc.rounds.plan``): at most 1,000 rounds of two
        chains side by side (the second's first burn-in annealed) from a start of ``prior.n_components``
        components (unless ``round_components`` says otherwise), stopping at the first of rounds 250, 500 and
        1,000 where the kept rounds settled and the chains agree; the same in the analyst's own session
        and in a deployment whose silos are set up for the rounds (their keys, docs/federation.md), whose
        server only relays; the one-shot pass in a deployment that is not.
    round_components : int
        Most components of the rounds' over-complete start (one per silo and one-shot cluster with rows):
        beyond it the silos holding a cluster share components (default 0: four times
        ``prior.n_components``; the auto rounds, ``rounds = 0``, start from ``prior.n_components``). The
        start changes how many rounds the chain needs, not what it converges
        to; a round costs time in proportion to its components.
    round_anneal : float
        Inverse temperature of the rows' draws in the first half of the rounds' burn-in (default 1: plain
        Gibbs throughout; the auto rounds anneal their second chain at 2 or this, whichever is larger). Above 1
        the larger of two copies of a cluster wins its rows faster (the start's copies otherwise trade rows at
        random for thousands of rounds); the second half of the burn-in and the kept rounds are plain Gibbs
        (docs/design.md §16).
    round_labels : {"pooled", "silo"}
        Which weights the rounds' memberships use (the chain is the same either way). "silo" (default): each
        silo's own weights of the components (the posterior mean given its drawn allocation, prior
        ``prior.alpha``) with the pooled profiles, as the one-shot pass labels with the silo's own weights; a
        cluster common in one silo and rare elsewhere keeps its borderline rows there (the paper's
        heterogeneous designs, docs/results/real/rounds/). "pooled": the pooled model's weights, i.e. each
        row's allocation probabilities averaged over the kept rounds (full-data MCMC's labels).
    round_split_merge : bool
        No longer used (ignored, with a warning): the rounds' chain runs in the silos, which the proposals of a
        split-merge move would have to come from the server; the auto rounds stop once settled instead.
    round_births : float
        Births of the rounds' start (default 0.01; 0: none): each silo takes this share of its rows, those its
        own local cluster explains worst, and groups them by their least probable value; the most common such
        values, each held by at least ``privacy.min_cluster_size`` of these rows over the silos, start new
        components beyond the start's (at most half as many as the one-shot clusters leave free in
        ``prior.n_components``). A cluster too small
        or too thin for any silo to resolve (66 people spread over 13 regions) is then a component from the
        first round instead of rows no sweep moves out of a larger cluster. Any start leaves the chain's law
        unchanged (docs/design.md §16, "Births"). At most ``MAX_BIRTH_SHARE``.
    round_secure_sum : bool
        No longer needed (ignored, with a warning): a deployment's rounds are always masked, padded and
        authenticated, the server learning nothing of them, and the analyst's own session's are plain
        (docs/federation.md, "The rounds").
    """

    strategy: Strategy = option("contingency", flag="--strategy")
    objective: Objective = "auto"
    tie: Tie = "per_block"
    optimizer: Optimizer = "projected-adaptive"
    max_iter: int = 1000
    tol: float = 0.1
    stop: StopRule = "absolute"
    n_draws_batch: int = 50
    n_eval: int = 200
    n_starts: int = 300
    design_iter: int = 10
    floor: float = 1e-6
    step_size: float = 0.02
    assign: AssignMode = "posterior"
    assign_draws: int = 100
    rounds: int = option(AUTO_ROUNDS, flag="--rounds")
    round_components: int = 0
    round_anneal: float = 1.0
    round_labels: RoundLabels = "silo"
    round_split_merge: bool = False
    round_births: float = 0.01
    round_secure_sum: bool = False

    def __post_init__(self):
        _check_choices(self)
        _check(self.max_iter >= 1, "AggregationConfig", "max_iter", "an int >= 1", self.max_iter)
        _check(_finite(self.tol) and self.tol > 0, "AggregationConfig", "tol", "a finite float > 0", self.tol)
        _check(self.n_draws_batch >= 1, "AggregationConfig", "n_draws_batch", "an int >= 1",
               self.n_draws_batch)
        _check(self.n_eval >= 1, "AggregationConfig", "n_eval", "an int >= 1", self.n_eval)
        _check(self.n_starts >= 1, "AggregationConfig", "n_starts", "an int >= 1", self.n_starts)
        _check(0 < self.floor < 0.01, "AggregationConfig", "floor", "a float in (0, 0.01)", self.floor)
        _check(_finite(self.step_size) and self.step_size > 0, "AggregationConfig", "step_size",
               "a finite float > 0", self.step_size)
        _check(self.assign_draws >= 1, "AggregationConfig", "assign_draws", "an int >= 1", self.assign_draws)
        _check(isinstance(self.rounds, int) and not isinstance(self.rounds, bool) and self.rounds >= 0,
               "AggregationConfig", "rounds", "an int >= 0 (0: auto)", self.rounds)
        _check(isinstance(self.round_components, int) and not isinstance(self.round_components, bool)
               and self.round_components >= 0, "AggregationConfig", "round_components", "an int >= 0 (0: four "
               "times prior.n_components)", self.round_components)
        _check(_finite(self.round_anneal) and self.round_anneal >= 1, "AggregationConfig", "round_anneal",
               "a finite float >= 1", self.round_anneal)
        _check(_finite(self.round_births) and 0 <= self.round_births <= MAX_BIRTH_SHARE, "AggregationConfig",
               "round_births", f"a float in [0, {MAX_BIRTH_SHARE:g}]", self.round_births)
        for name, why in (("round_split_merge", "the rounds' chain runs in the silos and stops once settled"),
                          ("round_secure_sum", "a deployment's rounds are always secure, the analyst's own "
                                               "session's plain")):
            if getattr(self, name):
                warnings.warn(f"aggregation.{name.replace('_', '-')} is no longer used ({why}; docs/design.md "
                              "§16): it is ignored and will be removed", FutureWarning, stacklevel=3)

    @property
    def resolved_objective(self) -> str:
        if self.objective != "auto":
            return self.objective
        return "observed" if self.strategy == "federated-gradient" else "complete"


@dataclass(frozen=True)
class AssessmentConfig:
    """Model assessment computed inside the silos once the global posterior is known (docs/design.md §14).

    Attributes
    ----------
    enabled : bool
        Run the assessment round (posterior predictive checks, WAIC, the posterior of the global number of
        clusters) after the global partition (default True: it costs a few seconds per silo next to
        minutes of sampling, docs/design.md §14.5).
    n_replicates : int
        Global posterior draws used, evenly spaced over the chains: one replicated dataset per draw for the
        predictive checks, the same draws for WAIC and for the number of clusters (default 100).
    max_pairs : int
        Most pairs of modalities in the co-occurrence check (default 500): every pair of binary variables
        (their second modality) and every pair of modalities of two variables with more modalities, the
        ``max_pairs`` most frequent under the fitted model when there are more.
    """

    enabled: bool = option(True, flag="--no-assessment", negate=True)
    n_replicates: int = option(100, flag="--replicates")
    max_pairs: int = 500

    def __post_init__(self):
        _check(self.n_replicates >= 2, "AssessmentConfig", "n_replicates", "an int >= 2", self.n_replicates)
        _check(self.max_pairs >= 0, "AssessmentConfig", "max_pairs", "an int >= 0", self.max_pairs)


@dataclass(frozen=True)
class FitConfig:
    """Everything one run needs; stored in every result with the root seed."""

    prior: PriorConfig = field(default_factory=PriorConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    postprocess: PostprocessConfig = field(default_factory=PostprocessConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    matching: MatchingConfig = field(default_factory=MatchingConfig)
    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    assessment: AssessmentConfig = field(default_factory=AssessmentConfig)

    def to_dict(self) -> dict:
        return asdict(self)
