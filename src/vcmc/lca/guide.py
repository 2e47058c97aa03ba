"""A guide to the number of classes: the criteria side by side, where they disagree and why, what to report
(docs/design.md §15.5).

``k_guide(table)`` reads ``vcmc compare``'s table (``comparison.csv``: the information criteria, relative
entropy, the smallest class's share, the EM starts that reached the best log-likelihood and, with
``--bayesian DIR``, the over-fitted Bayesian fit's posterior probability of each K, ``p_bayes``) and returns
the findings in plain words and a recommendation. The rules are stated here and in the design document, so
that a reviewer can check them:

* the main model is the K the BIC chooses (the criterion of most latent class papers, and the best of the
  information criteria in the simulations of Nylund, Asparouhov and Muthen 2007), unless its best
  log-likelihood was reached by a single EM start (then: more starts first);
* criteria that penalise parameters less (AIC, SABIC, WAIC) and the Bayesian posterior of K, which keeps any
  group its sparse prior cannot empty, may choose more classes: those are reported as a sensitivity analysis,
  with the sizes of the classes they add;
* a class under ``SMALL_CLASS`` of the rows, a relative entropy under ``LOW_ENTROPY``, and a K whose best value
  one start alone reached are named.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

#: A class holding less than this share of the rows is named as small (a possible artefact, little power).
SMALL_CLASS = 0.05
#: Relative entropy under this: classification is uncertain (modal assignments misclassify many rows).
LOW_ENTROPY = 0.8
CRITERIA = (("bic", "BIC"), ("sabic", "SABIC"), ("aic", "AIC"), ("caic", "CAIC"), ("waic", "WAIC"))


def bayesian_k(folder) -> dict:
    """The posterior of K of a Bayesian ``vcmc fit`` folder: ``{"values", "probabilities", "source"}``.

    After the global-informed rounds (or for full-data MCMC) it is the pooled chain's posterior of the occupied
    components; for the one-shot pass, whose global K is fixed by the matching (docs/design.md §14.3), a point
    mass at the result's number of clusters, said so in ``source``.
    """
    from vcmc.exceptions import DataError

    path = Path(folder) / "result.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: cannot read the Bayesian fit's result ({type(err).__name__}); --bayesian names "
                        "the folder of a vcmc fit without --k") from None
    ncp = ((doc.get("diagnostics") or {}).get("n_clusters_posterior") or {})
    g = ncp.get("global") if isinstance(ncp, dict) else None
    definition = ncp.get("definition") if isinstance(ncp, dict) else None
    if isinstance(g, dict) and g.get("values") and definition:
        return {"values": [int(v) for v in g["values"]], "probabilities": [float(p) for p in g["probabilities"]],
                "source": f"{path}: {definition}"}
    k = int(doc.get("n_clusters", 0))
    return {"values": [k], "probabilities": [1.0],
            "source": f"{path}: the number of clusters of the one-shot pass (fixed by the matching; the silos' "
                      "local posteriors of K are in its report)"}


def with_bayesian(table: pd.DataFrame, posterior: dict) -> pd.DataFrame:
    """``table`` with the column ``p_bayes``: the Bayesian posterior probability of each K (0 where it has none)."""
    probs = dict(zip(posterior["values"], posterior["probabilities"], strict=True))
    return table.assign(p_bayes=[float(probs.get(int(k), 0.0)) for k in table["k"]])


def _chosen(table: pd.DataFrame, column: str) -> int | None:
    y = table[column].to_numpy(dtype=float) if column in table else np.array([np.nan])
    if not np.any(np.isfinite(y)):
        return None
    return int(table["k"].iloc[int(np.nanargmin(y))])


def choices(table: pd.DataFrame) -> dict[str, int]:
    """The K each criterion chooses (its minimum), and the Bayesian posterior's mode (``bayes``)."""
    out = {name: k for col, name in CRITERIA if (k := _chosen(table, col)) is not None}
    if "p_bayes" in table and float(table["p_bayes"].sum()) > 0:
        out["Bayesian posterior mode"] = int(table["k"].iloc[int(np.argmax(table["p_bayes"].to_numpy(float)))])
    return out


def _row(table, k):
    return table[table["k"] == k].iloc[0]


def k_guide(table: pd.DataFrame) -> dict:
    """Findings and a recommendation from ``vcmc compare``'s table: ``{"choices", "findings", "recommendation",
    "report_k"}`` (texts in plain words)."""
    table = table.sort_values("k").reset_index(drop=True)
    chosen = choices(table)
    findings: list[str] = []
    bic = chosen.get("BIC")
    if bic is None:
        return {"choices": chosen, "findings": ["the table has no BIC"], "recommendation": "", "report_k": None}
    agree = sorted(name for name, k in chosen.items() if k == bic)
    larger = {name: k for name, k in chosen.items() if k > bic}
    smaller = {name: k for name, k in chosen.items() if k < bic}
    if not larger and not smaller:
        findings.append(f"Every criterion shown chooses K = {bic}.")
    else:
        findings.append(f"BIC chooses K = {bic}" + (f" (as {', '.join(n for n in agree if n != 'BIC')})"
                                                    if len(agree) > 1 else "") + "; "
                        + "; ".join(f"{name} chooses K = {k}" for name, k in {**larger, **smaller}.items()) + ".")
    if "n_parameters" in table and bic + 1 in set(table["k"]):
        a, b = _row(table, bic), _row(table, bic + 1)
        extra = int(b["n_parameters"] - a["n_parameters"])
        gain = float(b["log_likelihood"] - a["log_likelihood"])
        # the rows, from the definitions: bic - aic = p (log n - 2)
        n_rows = math.exp((float(b["bic"]) - float(b["aic"])) / float(b["n_parameters"]) + 2.0)
        log_n = math.log(n_rows)
        findings.append(
            f"Why they differ: a class more (K = {bic + 1}) adds {extra} parameters and raises the log-likelihood "
            f"by {gain:.1f}; the BIC charges log(n) = {log_n:.1f} per parameter ({extra * log_n:.0f} in all against "
            f"a gain of {2 * gain:.0f} in -2 log L), the AIC 2 ({2 * extra}) and the SABIC log((n + 2)/24) = "
            f"{math.log((n_rows + 2) / 24):.1f}, so criteria with a lighter charge keep classes the BIC does not.")
    if "Bayesian posterior mode" in chosen and chosen["Bayesian posterior mode"] != bic:
        findings.append("The over-fitted Bayesian model answers another question: how many groups its sparse "
                        "prior cannot empty, small or not; it does not charge a class for its parameters as the BIC "
                        "does, and it finds more classes when some are small or differ on a few items only.")
    low = []
    for k in table["k"]:
        r = _row(table, k)
        notes = []
        if "starts_at_best" in r and int(k) > 1 and pd.notna(r["starts_at_best"]) and int(r["starts_at_best"]) < 2:
            notes.append(f"only {int(r['starts_at_best'])} of {int(r['starts'])} EM starts reached its best "
                         "log-likelihood (it may be a local maximum, and its criteria too high)")
        if "smallest_class" in r and pd.notna(r["smallest_class"]) and float(r["smallest_class"]) < SMALL_CLASS:
            notes.append(f"its smallest class holds {100 * float(r['smallest_class']):.1f}% of the rows")
        if pd.notna(r.get("relative_entropy")) and float(r["relative_entropy"]) < LOW_ENTROPY:
            low.append((int(k), float(r["relative_entropy"])))
        if notes:
            findings.append(f"K = {int(k)}: " + "; ".join(notes) + ".")
    if low:
        ks = ", ".join(str(k) for k, _ in low)
        lo, hi = min(v for _, v in low), max(v for _, v in low)
        span = f"{lo:.2f}" if lo == hi else f"{lo:.2f} to {hi:.2f}"
        findings.append(f"Relative entropy {span} at K = {ks} (under {LOW_ENTROPY}): modal class assignments "
                        "misclassify many rows, so covariates and outcomes must be related to the classes by the "
                        "bias-adjusted three-step estimates (vcmc's), not by the assigned classes.")
    main = _row(table, bic)
    reliable = "starts_at_best" not in main or bic == 1 or int(main["starts_at_best"]) >= 2
    if not reliable:
        recommendation = (f"Before reporting: K = {bic}'s best log-likelihood was reached by one EM start only; run "
                          "vcmc compare again with more --starts, then read this guide again.")
    else:
        others = sorted(set(larger.values()))
        recommendation = (f"Report K = {bic} (BIC) as the main model, with this table (every criterion, relative "
                          "entropy, the smallest class and the starts that reached each maximum)")
        if others:
            recommendation += (f"; give K = {', '.join(map(str, others))} as a sensitivity analysis: say which "
                               f"classes of K = {bic} the extra classes split and how large they are, and whether "
                               "the conclusions change")
        if float(main.get("smallest_class", 1.0)) < SMALL_CLASS:
            recommendation += (f"; K = {bic} has a class under {100 * SMALL_CLASS:.0f}% of the rows: check that it "
                               "is not an artefact of a few items")
        recommendation += "."
    return {"choices": chosen, "findings": findings, "recommendation": recommendation,
            "report_k": bic if reliable else None}
