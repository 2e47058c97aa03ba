"""Variational aggregation of matched silo draws: the VCMC core (docs/design.md §6-8).

The public API: ``aggregate`` (the three strategies), ``aggregate_with_weights`` (push-forward alone),
``consensus`` (CMC baselines), the weight constructors and ``relaxed_elbo``.
"""

from vcmc.aggregation.consensus import consensus
from vcmc.aggregation.designs import inverse_rosenblatt_simplex, latin_hypercube_blocks
from vcmc.aggregation.elbo import CountsFn, evaluation_tuples, relaxed_elbo
from vcmc.aggregation.strategies import (
    AggregationResult,
    aggregate,
    aggregate_with_weights,
    pair_draws,
    push_forward,
)
from vcmc.aggregation.weights import (
    AggregationWeights,
    BlockLayout,
    count_weights,
    inverse_variance_weights,
    project_simplex,
    random_weights,
    uniform_weights,
)

__all__ = [
    "AggregationResult", "AggregationWeights", "BlockLayout", "CountsFn", "aggregate",
    "aggregate_with_weights", "consensus", "count_weights", "evaluation_tuples", "inverse_rosenblatt_simplex",
    "inverse_variance_weights", "latin_hypercube_blocks", "pair_draws", "project_simplex", "push_forward",
    "random_weights", "relaxed_elbo", "uniform_weights",
]
