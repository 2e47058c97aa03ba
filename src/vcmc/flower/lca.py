"""The latent class analysis of docs/design.md §15 over Flower: ``vcmc fit --k K --covariates --distal`` and
``vcmc compare --k RANGE`` run by the ServerApp against SuperNodes.

Run-config keys (``LCA_KEYS``): ``lca-k`` (a number of classes: the fixed-K analysis, 0 for none),
``lca-compare`` (a range such as ``"1-8"``: the K comparison, ``""`` for none), ``lca-covariates`` and
``lca-distal`` (the auxiliary columns and their coding, ``vcmc.lca.analysis.parse_coding``), ``lca-starts``,
``lca-max-em-iterations`` and ``lca-waic-draws`` (the commands' ``--starts``, ``--max-em-iterations`` and
``--waic-draws``). WAIC takes 0 draws (none) by default: in a deployment the silos' gate answers an
assessment round only with announced draws, which a maximum-likelihood fit does not have, so
``comparison.csv``'s ``waic`` is empty. The run's ``seed`` is the commands' ``--seed``: the same files, seed
and settings give the same numbers as the commands in process (the silos' sums are the same sums; only the
transport differs).

Why the coding of the auxiliary columns is in the run config: in process ``vcmc fit --k`` reads the files
and infers each column's kind and levels; the ServerApp sees no file, and asking the silos for their
levels would tell it which categories occur at which silo (the argument of ``load_run_schema``). The
analyst states the coding agreed with the silos (``vcmc fit --k`` records the coding it inferred in
``lca.json``, ``settings.covariate_coding``, in this form); each SuperNode's operator lists in its node
config the columns it allows (``vcmc.flower.client.NODE_AUXILIARY_KEYS``), and the silo refuses a column
not listed for that use, a cell outside the stated levels, a numeric column holding text and a column that
would identify people.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from vcmc.exceptions import ConfigError

log = logging.getLogger("vcmc.flower")

__all__ = ["LCA_KEYS", "check_lca_settings", "lca_requested", "run_lca"]

LCA_KEYS = ("lca-k", "lca-compare", "lca-covariates", "lca-distal", "lca-starts", "lca-max-em-iterations",
            "lca-waic-draws", "lca-min-best", "lca-standard-errors")
"""Run-config keys of the latent class analysis (read by ``run_lca``; the ServerApp's own keys)."""


def _value(rc: Mapping, key: str, default=None):
    value = rc.get(key, default)
    if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
        return default
    return value


def _int(rc: Mapping, key: str, default: int, minimum: int) -> int:
    value = _value(rc, key, default)
    try:
        out = int(value)
    except (TypeError, ValueError):
        out = minimum - 1
    if out < minimum or str(out) != str(value).strip():
        raise ConfigError(f"run config {key!r} must be an integer >= {minimum}; got {value!r}")
    return out


def lca_requested(rc: Mapping) -> bool:
    """Whether the run config asks for the latent class analysis rather than the Bayesian fit."""
    return _int(rc, "lca-k", 0, 0) > 0 or _value(rc, "lca-compare") is not None


def _settings(rc: Mapping):
    import argparse

    from vcmc.lca.analysis import parse_coding  # scipy.stats: not at import (vcmc fit reads LCA_KEYS)
    from vcmc.lca.cli import parse_k_range

    k = _int(rc, "lca-k", 0, 0)
    compare = _value(rc, "lca-compare")
    try:
        ks = parse_k_range(str(compare)) if compare is not None else []
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"run config 'lca-compare': {exc}") from None
    covariates = parse_coding(_value(rc, "lca-covariates"), "lca-covariates")
    distal = parse_coding(_value(rc, "lca-distal"), "lca-distal")
    if (covariates is not None or distal is not None) and k == 0:
        raise ConfigError("run config 'lca-covariates' / 'lca-distal' need 'lca-k' (the three-step models are built "
                          "on the K-class model), as vcmc fit's --covariates and --distal need --k")
    if covariates is not None and distal is not None and set(covariates.names) & set(distal.names):
        raise ConfigError(f"columns {sorted(set(covariates.names) & set(distal.names))} are given both in "
                          "'lca-covariates' and 'lca-distal'")
    return {"k": k, "ks": ks, "covariates": covariates, "distal": distal,
            "starts": _int(rc, "lca-starts", 10, 1), "max_em_iterations": _int(rc, "lca-max-em-iterations", 1000, 1),
            "waic_draws": _int(rc, "lca-waic-draws", 0, 0),
            # a deployment's EM rounds are announced as starts x iterations: by default exactly lca-starts starts
            "min_best": _int(rc, "lca-min-best", 1, 1), "standard_errors": _standard_errors(rc)}


def _standard_errors(rc: Mapping) -> str:
    value = str(_value(rc, "lca-standard-errors", "complete-data")).strip()
    if value not in ("observed", "complete-data"):
        raise ConfigError(f"run config 'lca-standard-errors' must be 'observed' or 'complete-data'; got {value!r}")
    return value


def check_lca_settings(rc: Mapping) -> None:
    """Refuse a malformed latent class run config before any silo is asked."""
    _settings(rc)


def run_lca(transport, rc: Mapping, out_dir: Path, *, n_modalities, schema=None, seed=None,
            n_gaussian: int = 0) -> dict[str, Path]:
    """Run the analyses the run config asks for through ``transport`` and write their files to ``out_dir``:
    ``lca-compare``: what ``vcmc compare`` writes (``comparison.csv``, ``comparison.png``); ``lca-k``: what
    ``vcmc fit --k`` writes (``lca.json``, ``fit_statistics.csv``, ``item_probabilities.*``, and with
    covariates or outcomes ``covariates.csv``, ``distal.csv``, ``distal_tests.csv``, ``forest.png``)."""
    from vcmc.lca.analysis import analyse, coding_text, compare
    from vcmc.lca.outputs import write_analysis, write_comparison

    s = _settings(rc)
    paths: dict[str, Path] = {}
    if s["ks"]:
        if s["waic_draws"]:
            log.warning("lca: lca-waic-draws = %d: a deployment's silos refuse the WAIC round without announced "
                        "draws, and each refusal spends one assess request of their budget; comparison.csv's "
                        "waic is then empty", s["waic_draws"])
        log.info("lca: comparing K = %s over %d silos (best of %d starts each)", ",".join(map(str, s["ks"])),
                 len(transport.silos), s["starts"])
        table, _ = compare(None, s["ks"], n_starts=s["starts"], max_iter=s["max_em_iterations"], rng=seed,
                           waic_draws=s["waic_draws"], transport=transport, n_modalities=n_modalities,
                           min_best=s["min_best"], n_gaussian=n_gaussian)
        paths.update(write_comparison(table, out_dir))
        best = int(table["k"].iloc[int(table["bic"].idxmin())])
        log.info("lca: BIC chooses K = %d", best)
    if s["k"]:
        log.info("lca: fitting K = %d over %d silos (best of %d starts)%s", s["k"], len(transport.silos),
                 s["starts"], "".join(f", {w} {coding_text(c)}" for w, c in (("covariates", s["covariates"]),
                                                                             ("distal", s["distal"])) if c))
        analysis = analyse(None, s["k"], covariates=s["covariates"], distal=s["distal"], n_starts=s["starts"],
                           max_iter=s["max_em_iterations"], rng=seed, transport=transport,
                           n_modalities=n_modalities, schema=schema, min_best=s["min_best"],
                           standard_errors=s["standard_errors"], profile_intervals=False, n_gaussian=n_gaussian)
        settings = {"k": s["k"], "starts": s["starts"], "max_em_iterations": s["max_em_iterations"], "seed": seed,
                    "silos": list(transport.silos), "covariates": coding_text(s["covariates"]) or None,
                    "distal": coding_text(s["distal"]) or None,
                    "covariate_coding": coding_text(s["covariates"]) or None,
                    "distal_coding": coding_text(s["distal"]) or None,
                    "three_step": "ML correction (Vermunt 2010), modal assignment", "transport": "flower"}
        paths.update(write_analysis(analysis, out_dir, settings=settings))
        f = analysis.fit
        log.info("lca: K = %d on %d rows: log-likelihood %.3f, BIC %.2f%s", f.k, f.n_rows, f.loglik,
                 f.statistics["bic"], "" if f.converged else " (EM reached lca-max-em-iterations unconverged)")
    return paths
