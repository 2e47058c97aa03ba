"""The rounds a run makes when the analyst leaves them to the library (``aggregation.rounds = 0``, ``vcmc fit
--rounds auto``: the default).

The one-shot pass (the paper's) disagrees with full-data MCMC wherever a silo's own posterior under-resolves
its clusters, and that is most real data split by a natural variable (docs/results/real/rounds/README.md: no
dataset of six passes). The rounds are the pooled model's blocked Gibbs sampler across the silos
(docs/design.md §16), and the configuration below is the one measured to reach the pooled analysis's own
seed-to-seed agreement on those six datasets, on the generalisation suite and on the paper's six designs, and
to stay within twice the one-shot run at the application's scale (docs/results/ehr/README.md):

- as many rounds as the silos' samplers run iterations, at most ``AUTO_MAX_ROUNDS`` (the length measured;
  the kept half of a round's chain is then as long as full-data MCMC's at 10,000 iterations);
- a start of ``prior.n_components`` components, the model full-data MCMC samples (unless
  ``round_components`` is set);
- the split-merge moves (unless ``round_secure_sum``, whose masked sums cannot carry them).

That holds where every silo is in the analyst's own session (``vcmc fit`` and the API: every row is the
analyst's already, ``SiloPolicy.own_data``). A deployment's silos answer the rounds only when their operators
allow them (``allow-strategies``) and never the moves, so there the default is the one-shot pass and the
rounds are asked for explicitly (``--rounds R``): a plan that every default silo refuses would fail the run.
``resolve_rounds`` is the one place this is decided; every result records it (``diagnostics.rounds_plan``),
with what the other mode makes of the same options (``other_mode``: the analyst's own session against a
deployment), so that a result whose options would give another answer in the other mode says so and how to
get the same answer there (``vcmc fit --rounds 1``, ``--node-config``; docs/federation.md §3.6).
"""

from __future__ import annotations

import dataclasses

from vcmc.config import FitConfig
from vcmc.config.options import AUTO_ROUNDS

AUTO_MAX_ROUNDS = 10_000
"""Most rounds of the auto plan: the length that passes the real-data suite (docs/results/real/rounds/)."""


def resolve_rounds(config: FitConfig, *, own_session: bool, method: str = "vcmc",
                   compare: bool = True) -> tuple[FitConfig, dict]:
    """``config`` with its rounds decided, and the record of the decision for ``diagnostics.rounds_plan``.

    Parameters
    ----------
    config : FitConfig
        ``aggregation.rounds = 0`` (auto) is decided here; any other value is kept as given.
    own_session : bool
        Whether every silo is in the analyst's own session (``Transport.own_session``).
    method : str
        The rounds refine VCMC's answer only; every other method runs its one pass.

    Returns
    -------
    config : FitConfig
        With ``aggregation.rounds >= 1`` (and, for auto rounds, the start and the moves set).
    plan : dict
        ``requested`` ("auto" or the number given), ``rounds``, ``round_components``, ``split_merge``,
        ``secure_sum``, for auto ``reason``, and ``other_mode`` (with ``compare``): the other mode
        (``"deployment"`` or ``"own session"``), the rounds it makes of the same options, whether its answer
        differs (``differs``) and, when it does, a ``note`` saying how to get the same answer in both.
    """
    given = config
    agg = config.aggregation
    requested = "auto" if agg.rounds == AUTO_ROUNDS else int(agg.rounds)
    reason = None
    if requested == "auto":
        n_iter = int(config.sampler.n_iter)
        if method != "vcmc":
            rounds, reason = 1, f"the method {method!r} makes one pass (the rounds refine VCMC's answer)"
        elif not own_session:
            rounds, reason = 1, ("a deployment: the rounds need every silo operator's consent "
                                 "(allow-strategies = rounds), so the default is the one-shot pass; set --rounds R "
                                 "where they allow them (docs/federation.md)")
        elif n_iter < 2:
            rounds, reason = 1, "one Gibbs iteration per silo: no rounds"
        else:
            rounds = min(n_iter, AUTO_MAX_ROUNDS)
            reason = (f"the analyst's own session: {rounds} rounds (the silos' iterations, at most "
                      f"{AUTO_MAX_ROUNDS}), which agree with the pooled analysis (docs/results/real/rounds/)")
        if rounds > 1:
            agg = dataclasses.replace(agg, rounds=rounds,
                                      round_components=agg.round_components or int(config.prior.n_components),
                                      round_split_merge=not agg.round_secure_sum)
        else:
            agg = dataclasses.replace(agg, rounds=1)
        config = dataclasses.replace(config, aggregation=agg)
    plan = {"requested": requested, "rounds": int(agg.rounds),
            "round_components": int(agg.round_components) if agg.rounds > 1 else None,
            "split_merge": bool(agg.round_split_merge) if agg.rounds > 1 else False,
            "secure_sum": bool(agg.round_secure_sum) if agg.rounds > 1 else False}
    if reason is not None:
        plan["reason"] = reason
    if compare:
        plan["other_mode"] = _other_mode(given, plan, own_session=own_session, method=method)
    return config, plan


def _other_mode(given: FitConfig, plan: dict, *, own_session: bool, method: str) -> dict:
    """What the other mode (a deployment for the analyst's own session, and the other way round) makes of the
    options ``given``, and how to get this answer there when it differs."""
    _, other = resolve_rounds(given, own_session=not own_session, method=method, compare=False)
    here, there = int(plan["rounds"]), int(other["rounds"])
    mode = "deployment" if own_session else "own session"
    out = {"mode": mode, "rounds": there, "differs": False}
    if here != there and own_session:
        out["differs"] = True
        out["note"] = (f"a Flower deployment's default (rounds auto) is the one-shot pass, not these {here} rounds, "
                       "so a deployment of these files with these options gives another answer; --rounds 1 "
                       "(aggregation.rounds = 1) gives the deployment's")
    elif here != there:
        out["differs"] = True
        out["note"] = (f"the analyst's own session's default (vcmc fit, rounds auto) on these files runs {there} "
                       "global-informed rounds, so it gives another answer; vcmc fit --rounds 1 with the operators' "
                       "limits (--node-config) gives this one")
    elif here > 1:
        out["differs"] = True
        why = ("a deployment's rounds release each round's counts under every operator's limits "
               "(min-cluster-size, ...) and make no split-merge moves and no assessment after the rounds, where the "
               "analyst's own session releases them whole, so the two may give other answers")
        out["note"] = (f"{why}; vcmc fit --rounds {here} --node-config '<the operators' limits>' runs them as a "
                       "deployment does" if own_session else
                       f"{why}; vcmc fit --rounds {here} --node-config '<the operators' limits>' gives this one")
    return out
