"""The privacy loss of a run under differential privacy, over every noised release of every silo
(docs/federation.md, "What the DP option guarantees").

A silo with ``dp-epsilon`` set (the stricter of its operator's and the server's) adds discrete Laplace noise to
each count table it releases, calibrated so that each release is epsilon-DP on its own (the summary's table;
each table of a counts reply, one per parameter draw; an assign reply's counts; each round's table, the births'
vector, the rounds' finish). Releases compose: the loss of a run is not one epsilon. The server counts the
noised releases it received from each silo (``ReleaseLedger``, fed by ``vcmc.federation.faults.gather``, the
one reply collector) and ``privacy_account`` composes them with OpenDP's accountant: each release a
``MaxDivergence`` (pure DP) measurement of the silo's epsilon, composed by basic composition (the sum, pure DP)
and, after OpenDP's pure-DP to zero-concentrated DP conversion (rho = epsilon^2 / 2, Bun & Steinke 2016),
by zCDP composition converted to (epsilon, delta)-DP. Each person is in one silo, so the run's loss is the
largest silo's (parallel composition). The epsilon in force reaches the server in the summary's diagnostics
(``dp_epsilon``). A reply of a type that is noised counts as a release even where a silo did not noise it (the
analyst's own session sends the rounds' finish whole): the account is an upper bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

DELTA = 1e-6
"""The delta at which the zCDP total is stated as (epsilon, delta)-DP (rho is reported too)."""

_ONE_PER_REPLY = ("assign_reply", "round_counts_reply", "round_masked_counts_reply", "round_birth_reply")


def noised_releases(reply) -> int:
    """How many epsilon-DP releases a reply is under DP (0 for a reply that is never noised; a summary is
    counted from the summaries themselves, ``privacy_account``)."""
    kind = getattr(reply, "KIND", "")
    if kind == "counts_reply":
        cluster = np.asarray(reply.cluster)
        return int(cluster.shape[0]) if cluster.ndim == 2 else 1
    return 1 if kind in _ONE_PER_REPLY else 0


class ReleaseLedger:
    """Noised releases received from each silo (other than summaries), counted as replies arrive."""

    def __init__(self):
        self.counts: Counter[str] = Counter()

    def record(self, replies: Mapping[str, object]) -> None:
        for name, reply in replies.items():
            n = noised_releases(reply)
            if n:
                self.counts[name] += n

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)

    def since(self, snapshot: Mapping[str, int]) -> dict[str, int]:
        """Releases recorded after ``snapshot`` (one run's, on a transport that served several)."""
        return {n: c - int(snapshot.get(n, 0)) for n, c in self.counts.items() if c > int(snapshot.get(n, 0))}


def _compose(epsilon: float, n_releases: int, delta: float) -> dict[str, float]:
    """OpenDP's accounts of ``n_releases`` releases of ``epsilon`` each: basic composition (pure DP), zCDP rho,
    the zCDP total as (epsilon, delta)-DP, and the smaller of the two at delta."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    # one release: a Laplace measurement whose privacy map at one person's distance (1) is epsilon
    space = (dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"))
    one = space >> dp.m.then_laplace(scale=1.0 / float(epsilon))
    pure = dp.c.make_composition([one] * int(n_releases))
    concentrated = dp.c.make_composition([dp.c.make_pureDP_to_zCDP(one)] * int(n_releases))
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(concentrated), float(delta))
    eps_delta, _ = approx.map(1)
    basic = float(pure.map(1))
    # a pure epsilon-DP guarantee is also (epsilon, delta)-DP: the smaller of the two bounds holds at delta
    return {"epsilon_basic": basic, "rho_zcdp": float(concentrated.map(1)),
            "epsilon_zcdp_at_delta": float(eps_delta), "epsilon_at_delta": min(basic, float(eps_delta))}


def privacy_account(summaries, releases: Mapping[str, int], *, delta: float = DELTA) -> dict | None:
    """The run's privacy loss under DP, per silo and overall; None where no silo noised anything.

    Parameters
    ----------
    summaries : sequence of SiloSummary
        The summaries the run used (each one release of its silo's epsilon, ``diagnostics["dp_epsilon"]``).
    releases : mapping of silo name to int
        The other noised releases received from each silo (``ReleaseLedger``).
    """
    per_silo = {}
    for s in summaries:
        eps = s.diagnostics.get("dp_epsilon")
        if eps is None or not np.isfinite(eps) or eps <= 0:
            continue
        n = 1 + int(releases.get(s.silo, 0))
        per_silo[s.silo] = {"epsilon_per_release": float(eps), "releases": n, **_compose(float(eps), n, delta)}
    if not per_silo:
        return None
    worst = max(per_silo.values(), key=lambda v: v["rho_zcdp"])
    return {"accountant": "OpenDP (basic composition of pure DP; zCDP composition after the pure-DP to zCDP "
                          "conversion, stated as (epsilon, delta)-DP)",
            "delta": float(delta),
            "epsilon_basic": max(v["epsilon_basic"] for v in per_silo.values()),
            "rho_zcdp": worst["rho_zcdp"],
            "epsilon_zcdp_at_delta": max(v["epsilon_zcdp_at_delta"] for v in per_silo.values()),
            "epsilon_at_delta": max(v["epsilon_at_delta"] for v in per_silo.values()),
            "per_silo": per_silo,
            "covers": "the noised releases only: each silo's summary table (or the table its summary's profile "
                      "draws are drawn from), the tables of counts replies, assign counts, the rounds' tables, "
                      "births and finish; not the cluster sizes, weight draws, expected counts, scalars or the "
                      "latent class analysis, which are not noised (docs/federation.md)",
            "definition": "each person is in one silo: the run's loss is the largest silo's (parallel "
                          "composition); a silo's is the composition of its releases, each epsilon-DP given the "
                          "allocation of rows to clusters"}
