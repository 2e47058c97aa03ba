"""Server side of model assessment: the requests, and the silos' whole-silo sums combined (design.md §14).

The silos compute (``vcmc.rows.ppc``); the server chooses what is checked (the draws, the pairs of
modalities), sends the same choice to every silo, and turns the replies into

* posterior predictive checks of the prevalence of every modality and of the co-occurrence of pairs of
  modalities, per silo and pooled (the pooled replicated dataset r is the union of the silos' replicates
  r, all made at the same global draw), each with a posterior predictive p-value and one summary
  statistic per check (§14.1);
* WAIC of the fit (§14.2), from the sums over rows, with the standard error;
* the posterior of the number of occupied global clusters (§14.3), and the silos' local posteriors of
  the number of clusters from their summaries.
"""

from __future__ import annotations

import numpy as np

from vcmc.protocol import AssessReply, AssessRequest
from vcmc.rows.ppc import choose_pairs
from vcmc.spacing import evenly_spaced

__all__ = ["WAIC_DEFINITION", "assess_requests", "choose_pairs", "combine_assessment", "even_draws",
           "local_k_posterior"]

WAIC_DEFINITION = (
    "elpd_waic = sum_i [log mean_t p(x_i | theta_t) - var_t log p(x_i | theta_t)], over every row i of every "
    "silo and the T assessment draws theta_t (the global profiles with the row's silo's own weights of the "
    "global clusters); var_t has divisor T (as ArviZ's waic); p_waic = sum_i var_t log p(x_i | theta_t); "
    "se = sqrt(n var_i(elpd_i)) (divisor n); computed from sums over rows sent by the silos "
    "(docs/design.md §14.2). Higher elpd_waic is better; deviance scale = -2 elpd_waic.")

PPC_DEFINITION = (
    "R replicated datasets, replicate r simulated inside each silo from global draw r (profiles) and the "
    "silo's own weights, with the data's missing cells; observed and replicated counts of each modality "
    "(prevalence) and of rows having both modalities of a pair (co-occurrence), over the rows observed on "
    "the variable(s). ppp = P(rep > obs) + P(rep = obs)/2 per entry (near 0 or 1: the model misses it). "
    "Per check D(y, theta_r) = sum_e (y_e - E_e)^2 / V_e with E_e and V_e the mean and variance of the count "
    "under theta_r (binomial per silo, summed over silos); statistic = mean_r D(obs, theta_r) / number of "
    "entries (1 expected under the model), p_value = mean_r [D(rep_r, theta_r) >= D(obs, theta_r)] "
    "(docs/design.md §14.1).")

CONTINUOUS_PPC_DEFINITION = (
    "Per continuous item (standardised scale), its mean and variance over the rows observing it, pooled over the "
    "silos, observed and in each replicated dataset (drawn from sufficient statistics, docs/design.md §17.7); "
    "ppp = P(rep > obs) + P(rep = obs)/2.")


def even_draws(n_total: int, n_take: int) -> np.ndarray:
    """``n_take`` indices evenly spaced over ``0..n_total-1`` (all of them when there are fewer)."""
    return evenly_spaced(n_total, n_take)      # the one rule (vcmc.spacing)


def assess_requests(names, silo_index, matched, agg, config, root: np.random.SeedSequence, key: int
                    ) -> tuple[dict[str, AssessRequest], np.ndarray]:
    """One ``AssessRequest`` per silo, and the global draws used (indices into the aggregated draws).

    Each silo gets the same ``n_replicates`` global profile draws (evenly spaced over the chain-major
    draws, so every chain contributes) with its own matched weight draw that went into each of them
    (``agg.pairing``), the same pairs, and its stream ``SeedSequence(root, spawn_key=(..., key, s))``
    where ``s`` is its index among the transport's silos (a silo's checks do not depend on the others).
    """
    idx = even_draws(agg.profile_draws.shape[0], config.assessment.n_replicates)
    profiles = np.asarray(agg.profile_draws[idx], dtype=np.float64)
    pairs = choose_pairs(agg.pi_draws.mean(axis=0), agg.profile_draws.mean(axis=0), matched.n_modalities,
                         config.assessment.max_pairs)
    reqs = {}
    for s, name in enumerate(names):
        if agg.pairing is not None:
            rows = agg.pairing[s, idx]
        else:                                  # no record of the pairing: evenly spaced, repeated if short
            rows = even_draws(matched.pi[s].shape[0], idx.size)
            rows = rows[np.arange(idx.size) % rows.size]
        gaussian = None if getattr(agg, "gaussian_draws", None) is None else \
            np.asarray(agg.gaussian_draws[idx], dtype=np.float64)
        reqs[name] = AssessRequest(pi=np.asarray(matched.pi[s][rows], dtype=np.float64), profiles=profiles,
                                   pairs=pairs, seed_entropy=int(root.entropy),
                                   spawn_key=(*root.spawn_key, int(key), int(silo_index[name])), gaussian=gaussian)
    return reqs, idx


def _binomial_moments(pi: np.ndarray, profiles: np.ndarray, pairs: np.ndarray):
    """Per draw the probability of each modality (R, P) and of each pair (R, E) for one fresh row."""
    m = np.einsum("rc,rcp->rp", pi, profiles)
    mp = np.einsum("rc,rce,rce->re", pi, profiles[:, :, pairs[:, 0]], profiles[:, :, pairs[:, 1]]) \
        if pairs.shape[0] else np.zeros((pi.shape[0], 0))
    return m, mp


def _check(n, obs, rep, mean, var) -> dict:
    """ppp per entry, and the check's discrepancy summary, from counts (entries,), (R, entries)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        share_obs = np.where(n > 0, obs / n, np.nan)
        share_rep = np.where(n > 0, rep / n, np.nan)
    ppp = np.where(n > 0, np.mean(rep > obs, axis=0) + 0.5 * np.mean(rep == obs, axis=0), np.nan)
    use = (n > 0) & np.all(var > 0, axis=0)
    if not np.any(use):
        return {"share_obs": share_obs, "share_rep": share_rep, "ppp": ppp, "statistic": None, "p_value": None,
                "n_entries": 0}
    d_obs = np.sum((obs[use] - mean[:, use]) ** 2 / var[:, use], axis=1)
    d_rep = np.sum((rep[:, use] - mean[:, use]) ** 2 / var[:, use], axis=1)
    return {"share_obs": share_obs, "share_rep": share_rep, "ppp": ppp,
            "statistic": float(np.mean(d_obs) / use.sum()), "p_value": float(np.mean(d_rep >= d_obs)),
            "replicated_statistic": float(np.mean(d_rep) / use.sum()), "n_entries": int(use.sum())}


def _rows(check: dict, keys: list[dict], silo: str) -> list[dict]:
    # a column is NaN in every replicate (a variable never observed in the silo) or in none
    lo, hi = np.quantile(check["share_rep"], [0.025, 0.975], axis=0)
    mean = np.mean(check["share_rep"], axis=0)
    out = []
    for e, key in enumerate(keys):
        out.append({**key, "observed": _num(check["share_obs"][e]), "replicated_mean": _num(mean[e]),
                    "replicated_ci95": [_num(lo[e]), _num(hi[e])], "ppp": _num(check["ppp"][e]), "silo": silo})
    return out


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _default_label(n_modalities):
    return [(f"V{q + 1}", str(k + 1)) for q, kq in enumerate(n_modalities) for k in range(kq)]


def combine_assessment(replies: dict[str, AssessReply], requests: dict[str, AssessRequest], n_modalities,
                       labels=None) -> dict:
    """``ppc``, ``waic`` and the global posterior of the number of clusters from the silos' replies.

    ``labels`` gives the ``(variable, modality)`` of each flat column (default ``V1``, ``1``, ...).
    """
    labels = _default_label(n_modalities) if labels is None else list(labels)
    names = [n for n in requests if n in replies]
    first = requests[names[0]]
    pairs = np.asarray(first.pairs, dtype=np.int64).reshape(-1, 2)
    r_draws = np.asarray(first.pi).shape[0]
    prev_keys = [{"variable": labels[j][0], "modality": labels[j][1], "column": j} for j in range(len(labels))]
    pair_keys = [{"variable_a": labels[a][0], "modality_a": labels[a][1], "variable_b": labels[b][0],
                  "modality_b": labels[b][1], "column_a": int(a), "column_b": int(b)} for a, b in pairs]

    per_silo = {}
    pooled = {k: 0.0 for k in ("n", "obs", "rep", "mean", "var", "pn", "pobs", "prep", "pmean", "pvar")}
    for name in names:
        rep, req = replies[name], requests[name]
        m, mp = _binomial_moments(np.asarray(req.pi), np.asarray(req.profiles), pairs)
        n = np.asarray(rep.n_observed, dtype=np.float64)
        pn = np.asarray(rep.pair_n_observed, dtype=np.float64)
        parts = {"n": n, "obs": np.asarray(rep.observed, dtype=np.float64),
                 "rep": np.asarray(rep.replicated, dtype=np.float64), "mean": n * m, "var": n * m * (1 - m),
                 "pn": pn, "pobs": np.asarray(rep.pair_observed, dtype=np.float64),
                 "prep": np.asarray(rep.pair_replicated, dtype=np.float64), "pmean": pn * mp,
                 "pvar": pn * mp * (1 - mp)}
        per_silo[name] = parts
        for k, v in parts.items():      # sums over silos: independent given theta_r, so means and
            pooled[k] = pooled[k] + v   # variances add
    checks = {"pooled": pooled, **per_silo}

    prevalence = {"table": [], "per_silo": {}}
    co = {"table": [], "per_silo": {}, "n_pairs": int(pairs.shape[0])}
    for silo, parts in checks.items():
        pc = _check(parts["n"], parts["obs"], parts["rep"], parts["mean"], parts["var"])
        cc = _check(parts["pn"], parts["pobs"], parts["prep"], parts["pmean"], parts["pvar"])
        prevalence["table"] += _rows(pc, prev_keys, silo)
        co["table"] += _rows(cc, pair_keys, silo)
        if silo == "pooled":
            prevalence.update(statistic=pc["statistic"], p_value=pc["p_value"],
                              replicated_statistic=pc.get("replicated_statistic"), n_entries=pc["n_entries"])
            co.update(statistic=cc["statistic"], p_value=cc["p_value"],
                      replicated_statistic=cc.get("replicated_statistic"), n_entries=cc["n_entries"])
        else:
            prevalence["per_silo"][silo] = {"statistic": pc["statistic"], "p_value": pc["p_value"]}
            co["per_silo"][silo] = {"statistic": cc["statistic"], "p_value": cc["p_value"]}
    ppc = {"n_replicates": int(r_draws), "prevalence": prevalence, "pairs": co, "silos": names,
           "definition": PPC_DEFINITION,
           "n_suppressed": {n: int(replies[n].n_suppressed) for n in names}}
    if all(replies[n].gaussian_observed is not None for n in names):
        from vcmc.rows.mixed import moments_of_sums

        # each item's pooled mean and variance, observed and in every replicated dataset (docs/design.md §17.7)
        obs = moments_of_sums(sum(np.asarray(replies[n].gaussian_observed) for n in names))      # (2, G)
        rep = np.stack([moments_of_sums(r) for r in sum(np.asarray(replies[n].gaussian_replicated) for n in names)])
        ppp = (rep > obs).mean(axis=0) + 0.5 * (rep == obs).mean(axis=0)                           # (2, G)
        ppc["continuous"] = {"definition": CONTINUOUS_PPC_DEFINITION, "table": [
            {"item": g, "moment": moment, "observed": float(obs[m, g]), "replicated_mean": float(rep[:, m, g].mean()),
             "replicated_ci95": np.quantile(rep[:, m, g], [0.025, 0.975]).tolist(), "ppp": float(ppp[m, g])}
            for g in range(obs.shape[1]) for m, moment in enumerate(("mean", "variance"))]}

    # WAIC: elpd_i summaries merged over silos (Chan et al.'s pairwise update of sums of squares)
    n_rows = sum(int(replies[n].n_rows) for n in names)
    elpd = sum(float(replies[n].elpd) for n in names)
    mean = elpd / n_rows
    m2 = sum(float(replies[n].elpd_m2) + int(replies[n].n_rows) * (float(replies[n].elpd) / int(replies[n].n_rows)
                                                                     - mean) ** 2 for n in names)
    waic = {"elpd_waic": elpd, "se": float(np.sqrt(m2)), "p_waic": sum(float(replies[n].p_waic) for n in names),
            "lppd": sum(float(replies[n].lppd) for n in names), "n_rows": n_rows, "n_draws": int(r_draws),
            "definition": WAIC_DEFINITION,
            "per_silo": {n: {"elpd_waic": float(replies[n].elpd), "se": float(np.sqrt(replies[n].elpd_m2)),
                             "p_waic": float(replies[n].p_waic), "n_rows": int(replies[n].n_rows)}
                         for n in names}}

    occupied = np.stack([np.asarray(replies[n].occupied, dtype=bool) for n in names])   # (S, R, C)
    k_global = occupied.any(axis=0).sum(axis=1)
    return {"ppc": ppc, "waic": waic, "k_global": _distribution(k_global),
            "k_global_per_silo": {n: _distribution(occupied[i].sum(axis=1)) for i, n in enumerate(names)}}


def _distribution(values: np.ndarray) -> dict:
    vals, counts = np.unique(np.asarray(values, dtype=np.int64), return_counts=True)
    return {"values": vals.tolist(), "probabilities": (counts / counts.sum()).tolist()}


def local_k_posterior(summaries) -> dict:
    """Each silo's posterior of its number of occupied components (from its summary), support only."""
    out = {}
    for s in summaries:
        post = np.asarray(s.n_clusters_posterior, dtype=np.float64)
        support = np.flatnonzero(post > 0)
        out[s.silo] = {"values": support.tolist(), "probabilities": post[support].tolist()}
    return out
