"""The rounds a run makes when the analyst leaves them to the library (``aggregation.rounds = 0``, ``vcmc fit
--rounds auto``: the default).

The one-shot pass (the paper's) disagrees with full-data MCMC wherever a silo's own posterior under-resolves
its clusters, and that is most real data split by a natural variable (docs/results/real/rounds/README.md). The
rounds are the pooled model's blocked Gibbs sampler across the silos (docs/design.md §16), the same in the
analyst's own session and in a deployment (the silos compute every draw from the pooled sums; the server only
relays), so auto makes them wherever every silo can take part:

- at most ``AUTO_MAX_ROUNDS``, stopping at the first checkpoint (250, 500, 1,000 rounds) where the kept rounds
  settled (``vcmc.pooled.chain``);
- from a start of ``prior.n_components`` components, the model full-data MCMC samples (unless
  ``round_components`` is set).

A deployment's silos take part when their operators allow the rounds (the default ``allow-strategies``) and set
their keys (node config ``rounds-key`` and ``rounds-peers``: every silo says so in its hello,
``Transport.rounds_ready``); otherwise auto is the one-shot pass, and the plan's ``reason`` says why.
``resolve_rounds`` is the one place this is decided; every result records it (``diagnostics.rounds_plan``),
with what the other mode makes of the same options (``other_mode``: a deployment for the analyst's own session,
the analyst's own session for a deployment or a deployment preview), decided here too, and how to get the same
answer in both (``vcmc fit --rounds 1`` for a deployment's one-shot pass, ``vcmc fit --silo-policy FILE`` with
the operators' node-config keys and ``reproducible-rounds = true`` for its rounds; docs/federation.md §3.6).
"""

from __future__ import annotations

import dataclasses

from vcmc.config import FitConfig
from vcmc.config.options import AUTO_ROUNDS
from vcmc.rounds.stage import AUTO_MAX_ROUNDS

AUTO_ONE_SHOT_ITERATIONS: int | None = None
"""With auto rounds to follow, the most Gibbs iterations of the silos' one-shot pass (None: as asked): the rounds
need of it only a start (docs/design.md §16)."""


def one_shot_sampler(sampler, cap: int | None):
    """``sampler`` with at most ``cap`` iterations (a derived burn-in derived again, a given one at most half)."""
    if cap is None or sampler.stop != "fixed" or sampler.n_iter <= cap:
        return sampler
    burn_in = None if sampler.derived_burn_in else min(int(sampler.burn_in), cap // 2)
    return dataclasses.replace(sampler, n_iter=int(cap), burn_in=burn_in, thin=min(int(sampler.thin), cap // 4))


def resolve_rounds(config: FitConfig, *, own_session: bool, method: str = "vcmc",
                   ready: bool | None = None, compare: bool = True) -> tuple[FitConfig, dict]:
    """``config`` with its rounds decided, and the record of the decision for ``diagnostics.rounds_plan``.

    Parameters
    ----------
    config : FitConfig
        ``aggregation.rounds = 0`` (auto) is decided here; any other value is kept as given.
    own_session : bool
        Whether every silo is in the analyst's own session (``Transport.own_session``).
    ready : bool or None
        Whether every silo can take part in the rounds (``Transport.rounds_ready``: in a deployment, its keys
        are set); None: not known (taken as ready in the analyst's own session, not in a deployment).
    method : str
        The rounds refine VCMC's answer only; every other method runs its one pass.
    compare : bool
        Whether to record what the other mode makes of the same options (``other_mode``).

    Returns
    -------
    config : FitConfig
        With ``aggregation.rounds >= 1`` (and, for auto rounds, the start set).
    plan : dict
        ``requested`` ("auto" or the number given), ``rounds`` (the most), ``round_components``,
        ``stop_when_settled``, ``secure_sum`` (a deployment's rounds are), for auto ``reason``, and (with
        ``compare``) ``other_mode``: the other mode (``"deployment"`` or ``"own session"``), the rounds it makes of
        the same options (a deployment's where every silo is set up for the rounds, and ``rounds_not_set_up``
        where not: None when its silos would refuse them), whether its rounds differ from these (``differs``:
        another number of rounds, or the same rounds from other random streams) and a ``note`` saying how to get
        the same answer in both (the operators' limits and a deployment's release rules apply in either case).
    """
    given = config
    agg = config.aggregation
    requested = "auto" if agg.rounds == AUTO_ROUNDS else int(agg.rounds)
    reason = None
    if requested == "auto":
        n_iter = int(config.sampler.n_iter)
        if method != "vcmc":
            rounds, reason = 1, f"the method {method!r} makes one pass (the rounds refine VCMC's answer)"
        elif n_iter < 2:
            rounds, reason = 1, "one Gibbs iteration per silo: no rounds"
        elif not (ready if ready is not None else own_session):
            rounds, reason = 1, ("a deployment whose silos are not all set up for the rounds (node config "
                                 "rounds-key and rounds-peers, and at least each operator's min-peers participants; "
                                 "docs/federation.md, 'The rounds'), so the one-shot pass")
        else:
            rounds = AUTO_MAX_ROUNDS
            reason = (f"at most {AUTO_MAX_ROUNDS} rounds, stopping once the kept rounds settled, which agree with "
                      "the pooled analysis (docs/results/real/rounds/)")
        sampler = config.sampler
        if rounds > 1:
            agg = dataclasses.replace(agg, rounds=rounds,
                                      round_components=agg.round_components or int(config.prior.n_components))
            sampler = one_shot_sampler(sampler, AUTO_ONE_SHOT_ITERATIONS)
        else:
            agg = dataclasses.replace(agg, rounds=1)
        config = dataclasses.replace(config, aggregation=agg, sampler=sampler)
    plan = {"requested": requested, "rounds": int(agg.rounds),
            "round_components": int(agg.round_components) if agg.rounds > 1 else None,
            "stop_when_settled": requested == "auto" and agg.rounds > 1, "secure_sum": not own_session,
            "one_shot_iterations": int(config.sampler.n_iter)}
    if reason is not None:
        plan["reason"] = reason
    if compare:
        plan["other_mode"] = _other_mode(given, plan, own_session=own_session, method=method)
    return config, plan


_SET_UP = ("every silo's operator set the rounds' keys (vcmc keygen; node config rounds-key and rounds-peers) and "
           "at least each operator's min-peers silos take part")
_DEPLOYED_ROUNDS = ("a deployment's rounds draw from the silos' group secret unless every node config sets "
                    "reproducible-rounds = true, and its silos answer under their operators' limits")
_PREVIEW = "vcmc fit --silo-policy FILE with the operators' node-config keys and reproducible-rounds = true"


def _other_mode(given: FitConfig, plan: dict, *, own_session: bool, method: str) -> dict:
    """What the other mode makes of the options ``given`` (``resolve_rounds`` again, from the other side), and how
    to get this answer there."""
    here = int(plan["rounds"])
    rounds = "automatic rounds" if plan["requested"] == "auto" else f"{here} rounds"
    if own_session:
        _, set_up = resolve_rounds(given, own_session=False, method=method, ready=True, compare=False)
        _, not_set_up = resolve_rounds(given, own_session=False, method=method, ready=False, compare=False)
        out = {"mode": "deployment", "rounds": int(set_up["rounds"]),
               # explicit rounds without the keys: the silos refuse the start (the run fails, naming them)
               "rounds_not_set_up": int(not_set_up["rounds"]) if plan["requested"] == "auto" or here == 1 else None,
               "differs": here > 1}
        if here == 1:
            out["note"] = ("a Flower deployment makes the one-shot pass too, its silos under their operators' limits "
                           "and a deployment's release rules: vcmc fit --rounds 1 --silo-policy FILE with the "
                           "operators' node-config keys gives its answer")
        else:
            where = ("else the one-shot pass, which vcmc fit --rounds 1 gives" if plan["requested"] == "auto" else
                     "else its silos refuse them")
            out["note"] = (f"a Flower deployment makes these {rounds} only where {_SET_UP}, {where}; "
                           f"{_DEPLOYED_ROUNDS}: {_PREVIEW} gives the answer of a deployment that sets it, to the bit")
        return out
    _, own = resolve_rounds(given, own_session=True, method=method, compare=False)
    there = int(own["rounds"])
    out = {"mode": "own session", "rounds": there, "differs": here > 1 or there != here}
    if here == 1 and there > 1:
        out["note"] = (f"{plan.get('reason', 'the one-shot pass')}; the analyst's own session (vcmc fit, rounds auto) "
                       f"makes up to {there} rounds on these files, another answer; vcmc fit --rounds 1 --silo-policy "
                       "FILE with the operators' node-config keys gives this one")
    elif here == 1:
        out["note"] = ("the analyst's own session makes the one-shot pass too; vcmc fit --rounds 1 --silo-policy FILE "
                       "with the operators' node-config keys gives this answer")
    else:
        out["note"] = (f"the analyst's own session (vcmc fit) makes the same {rounds} of the same pooled model, but "
                       f"{_DEPLOYED_ROUNDS}: {_PREVIEW} gives this answer to the bit where every node config set "
                       "reproducible-rounds = true, the same model's answer from other draws otherwise")
    return out
