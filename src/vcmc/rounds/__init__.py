"""Global-informed rounds after the one-shot pass (docs/design.md §16): the pooled model's blocked Gibbs
sampler, run across the silo boundary from the one-shot answer.

``refine`` is the server's half, a relay (``vcmc.rounds.stage``); the silos run the pooled chain itself
(``vcmc.pooled``) on the pooled sums they compute from each other's vectors, and their rows' allocations
(``vcmc.rows.rounds``). ``resolve_rounds`` (``vcmc.rounds.plan``) decides how many rounds a run makes.
"""

from vcmc.rounds.stage import refine

__all__ = ["refine"]
