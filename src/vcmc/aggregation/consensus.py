"""Consensus Monte Carlo baselines on the same matched draws (docs/design.md §11.3).

Three fixed weightings pushed through the same block-wise convex family as VCMC, so every baseline draw
stays on the simplex: ``"uniform"`` (1/S per block), ``"count"`` (omega proportional to the silo's rows
for pi and to its cluster size for the profiles) and ``"inverse-variance"`` (Scott et al.'s weights
``1 / tr Cov_s`` per block, the scalar member of their family). None needs a round of communication.
"""

from __future__ import annotations

from vcmc.aggregation.strategies import AggregationResult, aggregate_with_weights
from vcmc.aggregation.weights import count_weights, inverse_variance_weights, uniform_weights
from vcmc.config import PriorConfig
from vcmc.exceptions import ConfigError
from vcmc.matching.types import MatchedDraws

_DEFAULT_PRIOR = PriorConfig()
_KINDS = {"inverse-variance": inverse_variance_weights, "count": count_weights, "uniform": uniform_weights}


def consensus(matched: MatchedDraws, *, kind: str = "inverse-variance", rng=None, n_out: int | None = None,
              prior: PriorConfig = _DEFAULT_PRIOR, n_chains: int = 1) -> AggregationResult:
    """Consensus Monte Carlo with fixed scalar weights per block.

    Parameters
    ----------
    matched : MatchedDraws
    kind : {"inverse-variance", "count", "uniform"}
    rng : int, Generator, SeedSequence or None
        Pairing of the draws across silos (and the evaluation tuples of the reported ELBO).
    n_out : int, optional
        Number of output draws (default: the shortest chain).
    prior : PriorConfig
        Only used for the reported relaxed ELBO.
    n_chains : int
        Chains in every silo's draws, kept in the output (``vcmc.aggregation.strategies.pair_draws``).

    Returns
    -------
    AggregationResult
        ``strategy`` is ``"consensus-<kind>"``; ``n_rounds`` is 0.
    """
    if kind not in _KINDS:
        raise ConfigError(f"The 'kind' parameter of consensus must be one of {sorted(_KINDS)}. "
                          f"Got {kind!r} instead.")
    weights = _KINDS[kind](matched)
    return aggregate_with_weights(matched, weights, rng=rng, n_out=n_out, prior=prior, n_chains=n_chains,
                                  strategy=f"consensus-{kind}",
                                  shares="label-free posterior draws only (weights fixed, no optimisation)")
