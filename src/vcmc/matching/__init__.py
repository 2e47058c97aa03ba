"""Cluster matching across silos (docs/design.md §5): calibrated Ball (default), the paper's Ball,
Hungarian, minimum divergence.

``match`` dispatches on ``MatchingConfig.method``. Every algorithm returns a ``Matching`` whose global
clusters are numbered canonically (decreasing total size), so the result does not depend on the order in
which silos are listed nor on their local labels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vcmc.config import MatchingConfig, PriorConfig
from vcmc.exceptions import ConfigError
from vcmc.matching.ball import ball_radius, match_ball
from vcmc.matching.calibrated import match_calibrated
from vcmc.matching.coordinates import coordinates
from vcmc.matching.divergence import match_min_divergence
from vcmc.matching.hungarian import match_hungarian
from vcmc.matching.placeholder import build_matched_draws_with_placeholders
from vcmc.matching.types import MatchedDraws, Matching, build_matched_draws
from vcmc.protocol import DivergenceReply, DivergenceRequest, SiloSummary

__all__ = ["match", "match_calibrated", "match_ball", "match_hungarian", "match_min_divergence", "ball_radius",
           "coordinates", "Matching", "MatchedDraws", "build_matched_draws", "build_matched_draws_with_placeholders",
           "matched_draws"]


def match(summaries: Sequence[SiloSummary], config: MatchingConfig | None = None, *,
          divergence: Callable[[int, DivergenceRequest], DivergenceReply] | None = None,
          rng=None) -> Matching:
    """Match the local clusters of all silos with the method of ``config``.

    Parameters
    ----------
    summaries : sequence of SiloSummary
        One per silo, in any order.
    config : MatchingConfig, optional
        Method and its options (default ``MatchingConfig()``: calibrated Ball, level 0.999999).
    divergence : callable (silo_index, DivergenceRequest) -> DivergenceReply, optional
        Needed by ``method="min-divergence"`` only: routes a request to a silo, in process
        (``in_process_divergence``) or remote, and returns its reply.
    rng : int, Generator or None
        Random orders of the minimum-divergence multi-start.

    Returns
    -------
    Matching
    """
    config = MatchingConfig() if config is None else config
    if config.method == "calibrated":
        return match_calibrated(summaries, level=config.level)
    if config.method == "ball":
        return match_ball(summaries, radius=config.radius)
    if config.method == "hungarian":
        return match_hungarian(summaries, reference=config.reference)
    if config.method == "min-divergence":
        if divergence is None:
            raise ConfigError("The 'divergence' argument of match is required when MatchingConfig.method is "
                              "'min-divergence': pass a callable (silo_index, DivergenceRequest) -> "
                              "DivergenceReply that reaches the silos. Got None instead.")
        return match_min_divergence(summaries, divergence, rule=config.new_cluster_rule,
                                    penalty_multiplier=config.penalty_multiplier, n_starts=config.n_starts,
                                    reference=config.reference, rng=rng)
    raise ConfigError(f"The 'method' parameter of MatchingConfig must be one of 'calibrated', 'ball', "
                      f"'hungarian', 'min-divergence'. Got {config.method!r} instead.")


def matched_draws(summaries: Sequence[SiloSummary], matching: Matching, config: MatchingConfig | None = None,
                  *, prior: PriorConfig | None = None, rng=None) -> MatchedDraws:
    """Matched draws with absent clusters handled as ``config.absent`` says (docs/design.md §5.5).

    ``"structural_zero"`` (default): ``build_matched_draws``; ``"placeholder"``: empty over-fitted slots
    drawn from the fractionated ``prior`` (``build_matched_draws_with_placeholders``, uses ``rng``).
    """
    config = MatchingConfig() if config is None else config
    if config.absent == "placeholder":
        return build_matched_draws_with_placeholders(summaries, matching, prior=prior, rng=rng)
    return build_matched_draws(summaries, matching)
