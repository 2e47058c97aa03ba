"""Global-informed rounds after the one-shot pass (docs/design.md §16): the pooled model's blocked Gibbs
sampler, run across the silo boundary from the one-shot answer.

``refine`` is the server's half (``vcmc.rows.rounds`` the silo's): it draws the weights and profiles from
the counts the silos sum, sends the draw, and sums the silos' counts of their new allocations, round after
round; the kept rounds' draws are the global posterior and each silo's memberships average its rows'
allocation probabilities over them.
"""

from vcmc.rounds.blocked_gibbs import align_to, draw_parameters, log_joint
from vcmc.rounds.stage import refine

__all__ = ["align_to", "draw_parameters", "log_joint", "refine"]
