"""The latent class analysis as epidemiologists report it, federated (docs/design.md §15).

``lca_silos`` builds the silos from one data frame per silo (the clustering columns encoded with the
shared schema; covariate and distal columns kept inside each silo, out of the clustering);
``analyse`` fits one K (measurement model, then the three-step covariate and distal models);
``compare`` fits every K of a range and tabulates the fit statistics. Every number comes from rounds of
whole-silo sums through a transport; nothing row-level leaves a silo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from vcmc._rng import RngLike, as_generator, as_seed_sequence
from vcmc.exceptions import ConfigError, DataError
from vcmc.lca.em import LcaFit, fit_lca
from vcmc.lca.information import ItemInformation, item_information
from vcmc.lca.structural import CovariateFit, DistalFit, classification_error, fit_covariates, fit_distal
from vcmc.rows.lca import AuxiliaryColumn, AuxiliarySpec, check_not_identifying

COMPARISON_COLUMNS = ("k", "log_likelihood", "n_parameters", "aic", "bic", "sabic", "caic", "entropy",
                      "relative_entropy", "waic")
#: Columns after ``COMPARISON_COLUMNS``: the smallest class's share, the EM starts made and how many reached the
#: best log-likelihood (the guide to K of the report, docs/design.md §15.5).
GUIDE_COLUMNS = ("smallest_class", "starts", "starts_at_best")
KINDS = ("numeric", "categorical")


def parse_columns(text: str | Sequence[str] | None, flag: str) -> list[tuple[str, str | None]]:
    """``age,sex:categorical`` -> [("age", None), ("sex", "categorical")] (None: inferred)."""
    if text is None:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for item in items:
        name, _, kind = str(item).strip().partition(":")
        if not name:
            raise ConfigError(f"{flag} expects COL[,COL...] (optionally COL:numeric or COL:categorical); got {text!r}")
        if kind and kind not in KINDS:
            raise ConfigError(f"{flag}: {name}:{kind}: the kind must be 'numeric' or 'categorical'")
        out.append((name, kind or None))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{flag} names a column twice: {names}")
    return out


def _is_number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _sort_levels(labels) -> tuple[str, ...]:
    labels = sorted(set(labels))
    if all(_is_number(v) for v in labels):
        return tuple(sorted(labels, key=float))
    return tuple(labels)


def infer_spec(frames: Mapping[str, pd.DataFrame], columns: list[tuple[str, str | None]], flag: str) -> AuxiliarySpec:
    """Kinds and levels of auxiliary columns from every silo's column (its operator's agreed coding).

    Inferred kind: text -> categorical; numbers with exactly two distinct values -> categorical (binary);
    other numbers -> numeric. Levels are the union over silos, sorted (numerically when all are numbers);
    the first is the reference. A column with about one value per row is refused (``check_not_identifying``).
    ``frames`` is keyed by how messages name each silo (its file, or ``silo 'name'``).
    """
    from vcmc.rows.lca import cell_label

    out = []
    for name, kind in columns:
        values = []
        for silo, df in frames.items():
            label = str(silo)      # the caller's description of the silo: its file, or "silo 'name'"
            if name not in df.columns:
                raise DataError(f"{label}: {flag} column {name!r} is not in its file; found "
                                f"{list(df.columns)}")
            check_not_identifying(df[name], name, label)
            if flag == "--covariates" and df[name].isna().any():
                raise DataError(f"{label}: covariate {name!r} has {int(df[name].isna().sum())} missing "
                                "value(s); StepMix's covariate model refuses missing covariates and so does vcmc "
                                "(nothing is dropped silently): remove or impute those rows first")
            values.extend(df[name].dropna().tolist())
        if not values:
            raise DataError(f"{flag} column {name!r} has no observed value in any silo")
        numeric = all(_is_number(v) for v in values)
        labels = {cell_label(float(v)) if numeric else str(v) for v in values}
        if kind is None:
            kind = "numeric" if numeric and len(labels) > 2 else "categorical"
        if kind == "numeric" and not numeric:
            raise DataError(f"{flag} column {name!r} is said to be numeric but holds text")
        if kind == "categorical" and len(labels) < 2:
            raise DataError(f"{flag} column {name!r} has a single observed level; it cannot be modelled")
        out.append(AuxiliaryColumn(name, kind, _sort_levels(labels) if kind == "categorical" else ()))
    return AuxiliarySpec(tuple(out))


def parse_coding(text, key: str) -> AuxiliarySpec | None:
    """``"age:numeric,sex:categorical=f|m"`` -> the ``AuxiliarySpec`` (None for an empty text).

    Each column is ``NAME:numeric`` or ``NAME:categorical=LEVEL|LEVEL|...`` (the first level the reference,
    as ``vcmc fit --k`` orders them: sorted, numerically when all are numbers). ``coding_text`` writes this
    form, and ``vcmc fit --k`` stores it in ``lca.json`` (``settings.covariate_coding``, ``distal_coding``).
    """
    text = "" if text is None else str(text).strip()
    if not text:
        return None
    columns = []
    for item in text.split(","):
        name, _, rest = item.strip().partition(":")
        kind, _, levels = rest.partition("=")
        name, kind = name.strip(), kind.strip()
        if not name or kind not in ("numeric", "categorical") or (kind == "numeric" and levels):
            raise ConfigError(f"run config {key!r}: expected NAME:numeric or NAME:categorical=LEVEL|LEVEL,... "
                              f"for each column (the ServerApp sees no file to infer kinds and levels from); "
                              f"got {item.strip()!r}")
        labels = tuple(v.strip() for v in levels.split("|")) if kind == "categorical" else ()
        if kind == "categorical" and (len(labels) < 2 or "" in labels or len(set(labels)) != len(labels)):
            raise ConfigError(f"run config {key!r}: column {name!r} needs at least 2 distinct, non-empty levels "
                              f"separated by '|'; got {levels!r}")
        columns.append(AuxiliaryColumn(name, kind, labels))
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ConfigError(f"run config {key!r} names a column twice: {names}")
    return AuxiliarySpec(tuple(columns))


def coding_text(spec: AuxiliarySpec | None) -> str:
    """The run-config form of ``spec`` (``parse_coding``'s input)."""
    if spec is None:
        return ""
    return ",".join(f"{c.name}:numeric" if c.kind == "numeric" else f"{c.name}:categorical={'|'.join(c.levels)}"
                    for c in spec.columns)


def lca_silos(frames: Mapping[str, pd.DataFrame], *, covariates=None, distal=None, schema=None, id_column=None,
              na_values=("",), privacy=None, min_modality_rows: int = 1, exclude=(), sources=None):
    """LocalSilos from one data frame per silo (name -> frame); auxiliary columns kept out of the clustering.

    ``exclude`` names further columns left out of the clustering (and not used at all); so are the columns
    a ``schema`` gives a role (covariate, outcome, id, ignored). ``sources`` (name -> file) names the files in
    messages.

    Returns ``(silos, covariate_spec or None, distal_spec or None)``.
    """
    from vcmc.data import infer_schema
    from vcmc.data.readers import from_dataframe
    from vcmc.silo.local import LocalSilo

    sources = dict(sources or {})
    where = {name: sources.get(name, f"silo {name!r}") for name in frames}
    cov_cols = parse_columns(covariates, "--covariates")
    dis_cols = parse_columns(distal, "--distal")
    both = {n for n, _ in cov_cols} & {n for n, _ in dis_cols}
    if both:
        raise ConfigError(f"columns {sorted(both)} are given both as covariates and as distal outcomes")
    aux_names = [n for n, _ in cov_cols + dis_cols]
    clash = sorted(set(aux_names) & {str(c) for c in exclude})
    if clash:
        raise ConfigError(f"columns {clash} are both excluded (--exclude) and used as covariates or outcomes")
    na = set(na_values) | {""}
    clustering, auxiliary = {}, {}
    for name, df in frames.items():
        missing = [c for c in aux_names if c not in df.columns]
        if missing:
            raise DataError(f"{where[name]}: columns {missing} (covariates / distal outcomes) are not in its "
                            f"file; found {list(df.columns)}")
        absent = [c for c in exclude if c not in df.columns]
        if absent:
            raise DataError(f"{where[name]}: excluded columns {absent} (--exclude) are not in the file; found "
                            f"{list(df.columns)}")
        df = df.drop(columns=list(exclude))
        aux = df[aux_names].copy()
        for c in aux_names:   # the same missing-value texts as the clustering columns, nothing else
            aux[c] = aux[c].map(lambda v: np.nan if (v is None or (isinstance(v, str) and v in na)
                                                     or (isinstance(v, float) and np.isnan(v))) else v)
        auxiliary[name] = aux.reset_index(drop=True)
        # the schema's other declared columns stay in the frame: its encoder leaves them out (and keeps the ids)
        clustering[name] = df.drop(columns=aux_names)
    # the auxiliary columns' coding first: their errors are the ones about the flags just typed
    named = {where[n]: f for n, f in auxiliary.items()}
    cov_spec = infer_spec(named, cov_cols, "--covariates") if cov_cols else None
    dis_spec = infer_spec(named, dis_cols, "--distal") if dis_cols else None
    if schema is None:
        schema = infer_schema(list(clustering.values()), id_column=id_column, na_values=tuple(na),
                              min_modality_rows=min_modality_rows, sources=[where[n] for n in clustering])
    silos = []
    for name, df in clustering.items():
        data = from_dataframe(df, schema=schema, name=name, source=where[name], id_column=id_column,
                              na_values=tuple(na))
        silos.append(LocalSilo(data, privacy=privacy, auxiliary=auxiliary[name]))
    return silos, cov_spec, dis_spec


@dataclass(frozen=True)
class LcaAnalysis:
    """One K: the measurement model, its classification error and the three-step models."""

    fit: LcaFit
    error: np.ndarray | None = None
    covariates: CovariateFit | None = None
    distal: DistalFit | None = None
    variable_names: tuple[str, ...] = ()
    modality_labels: tuple[tuple[str, ...], ...] = ()
    items: ItemInformation | None = None
    warnings: tuple[str, ...] = ()
    continuous: tuple = ()
    """The schema's continuous variables (``ContinuousVariable``: name, location, scale, unit), when the fit has
    Gaussian items (docs/design.md §17.5)."""

    def continuous_table(self) -> pd.DataFrame | None:
        """Each class's mean and standard deviation of every continuous variable in the data's units, with the
        mean's standard error: with ``items``, from the observed information (``items.mean_se``, the Gaussian
        parameters among the free ones); without, ``sd / sqrt(N_kg)`` (``N_kg`` the class's expected rows
        observing the variable at the estimate approximated by ``pi_k N``). None without continuous variables."""
        f = self.fit
        if f.gaussian is None or not self.continuous:
            return None
        g = f.gaussian.shape[1] // 2
        loc = np.array([v.location for v in self.continuous])
        scale = np.array([v.scale for v in self.continuous])
        mean_se = None if self.items is None else getattr(self.items, "mean_se", None)
        rows = []
        for c in range(f.k):
            for j, var in enumerate(self.continuous):
                mean = float(loc[j] + scale[j] * f.gaussian[c, j])
                sd = float(scale[j] * np.sqrt(f.gaussian[c, g + j]))
                if mean_se is not None and np.isfinite(mean_se[c, j]):
                    se = float(scale[j] * mean_se[c, j])
                else:
                    se = sd / np.sqrt(max(float(f.pi[c]) * f.n_rows, 1e-12))
                rows.append({"cluster": c + 1, "variable": var.name, "unit": var.unit, "mean": mean, "sd": sd,
                             "se": se, "ci95_low": mean - 1.96 * se, "ci95_high": mean + 1.96 * se})
        return pd.DataFrame(rows)

    def profiles_table(self) -> pd.DataFrame:
        """Item-response probabilities (poLCA's ``probs``): cluster, variable, modality, probability, se,
        ci95_low, ci95_high, interval.

        With ``items`` (``vcmc.lca.information``): the observed information of the model (missing values and
        classification uncertainty included), Wald intervals on the logit scale, profile-likelihood intervals
        at the boundary (``se`` empty there). Without: the complete-data approximation ``sqrt(p (1 - p) /
        N_k)`` of the whole class, poLCA-style (``interval`` "complete-data").
        """
        from vcmc.model import profile_offsets

        f = self.fit
        offsets = profile_offsets(f.n_modalities)
        n_k = f.pi * f.n_rows
        rows = []
        for c in range(f.k):
            for q in range(len(f.n_modalities)):
                for m in range(f.n_modalities[q]):
                    col = offsets[q] + m
                    p = float(f.profiles[c, col])
                    if self.items is not None:
                        se, (lo, hi), how = (float(self.items.se[c, col]), self.items.ci[c, col],
                                             str(self.items.interval[c, col]))
                    else:
                        se = float(np.sqrt(max(p * (1 - p), 0.0) / max(n_k[c], 1e-12)))
                        lo, hi, how = max(p - 1.96 * se, 0.0), min(p + 1.96 * se, 1.0), "complete-data"
                    rows.append({"cluster": c + 1, "variable": self.variable_names[q] if self.variable_names else q,
                                 "modality": self.modality_labels[q][m] if self.modality_labels else m,
                                 "probability": p, "se": se, "ci95_low": float(lo), "ci95_high": float(hi),
                                 "interval": how})
        return pd.DataFrame(rows)


def _schema_names(silos, schema=None):
    schema = schema if schema is not None else (silos[0].data.schema if silos else None)
    if schema is None:
        return (), ()
    return tuple(schema.names), tuple(tuple(str(m) for m in v.modalities) for v in schema.variables)


def _measurement_coding(silos, n_modalities) -> tuple[int, ...]:
    """The modality counts of the clustering variables: the silos' (in process) or the caller's (a
    deployment, where the server holds no silo object: the silos' hello replies or the shared schema)."""
    if n_modalities is not None:
        return tuple(int(m) for m in n_modalities)
    if not silos:
        raise ConfigError("a latent class analysis needs the silos or, through a transport alone, the clustering "
                          "variables' modality counts (n_modalities)")
    return tuple(silos[0].n_modalities)


def _gaussian_items(silos, transport=None, n_gaussian=None) -> int:
    """G, the Gaussian items: the caller's ``n_gaussian``, else the silos' (in process), else what the silos said
    in their hello replies to the ``transport`` (a process pool's, a deployment's: the server holds no silo
    object, and without this the fit would leave the continuous items out)."""
    if n_gaussian is not None:
        return int(n_gaussian)
    if silos:
        values = getattr(silos[0], "values", None)
        return 0 if values is None else int(values.shape[1])
    hellos = getattr(transport, "hello", None) or {}
    counts = {int(getattr(h, "n_gaussian", 0)) for h in hellos.values()}
    if len(counts) > 1:
        raise ConfigError(f"the silos do not agree on the number of continuous items ({sorted(counts)}); give every "
                          "silo the same schema")
    return counts.pop() if counts else 0


def analyse(silos, k: int, *, covariates: AuxiliarySpec | None = None, distal: AuxiliarySpec | None = None,
            n_starts: int = 10, max_iter: int = 1000, rng: RngLike = None, transport=None, n_modalities=None,
            schema=None, min_best: int | None = None, max_starts: int | None = None,
            standard_errors: bool | str = True, profile_intervals: bool = True,
            n_gaussian: int | None = None) -> LcaAnalysis:
    """Fit the K-class model, then (optionally) the three-step covariate and distal models.

    ``silos``: the ``LocalSilo`` objects (in process); in a deployment ``None``, with the ``transport``
    reaching the silos, their ``n_modalities`` and (optionally) the shared ``schema`` naming the variables.
    A three-step model that fails (a singular information matrix, no convergence) does not lose the
    measurement model: the analysis keeps it and says why the other model is missing (``warnings``).
    ``profile_intervals`` False gives a probability at the boundary the complete-data bound instead of its
    profile-likelihood interval (the ServerApp's choice: a profile costs hundreds of E-step rounds).
    ``standard_errors``: True or "observed" (the observed information, docs/design.md §15.1), "complete-data"
    (each class's rows that observed the item: one E-step round), False (none computed). ``n_gaussian``: the
    continuous items, when neither the silos nor the transport's hello replies say (``_gaussian_items``).
    """
    from vcmc.federation.transport import InProcessTransport

    tr = transport or InProcessTransport(silos)
    names = list(tr.silos)
    n_mod = _measurement_coding(silos, n_modalities)
    n_gauss = _gaussian_items(silos, tr, n_gaussian)
    if n_gauss and (covariates is not None or distal is not None):
        raise ConfigError("the three-step covariate and distal models are not built for continuous clustering "
                          "variables yet (docs/design.md §17.5); fit the measurement model alone, or band them")
    fit = fit_lca(tr.call, names, n_mod, int(k), n_starts=n_starts, max_iter=max_iter, rng=rng, min_best=min_best,
                  max_starts=max_starts, n_gaussian=n_gauss)
    items = (item_information(tr.call, names, fit, profiles=profile_intervals,
                              observed=standard_errors in (True, "observed"))
             if standard_errors else None)
    error, cov_fit, dis_fit, warnings = three_step(tr.call, names, fit, covariates, distal)
    if fit.k > 1 and fit.n_best < 2:
        warnings.append(f"only {fit.n_best} of {len(fit.start_logliks)} EM starts reached the best log-likelihood: "
                        "it may be a local maximum (add --starts)")
    var_names, labels = _schema_names(silos, schema)
    schema = schema if schema is not None else (silos[0].data.schema if silos else None)
    return LcaAnalysis(fit=fit, error=error, covariates=cov_fit, distal=dis_fit, variable_names=var_names,
                       continuous=tuple(getattr(schema, "continuous", ())) if n_gauss else (),
                       modality_labels=labels, items=items, warnings=tuple(warnings))


def three_step(call, names, fit: LcaFit, covariates: AuxiliarySpec | None, distal: AuxiliarySpec | None):
    """The classification error and the covariate and distal models; a model that fails is None and its reason
    is in the returned warnings (the measurement model is kept whatever happens here)."""
    from vcmc.exceptions import ConvergenceError

    error = cov_fit = dis_fit = None
    warnings: list[str] = []
    if covariates is None and distal is None:
        return error, cov_fit, dis_fit, warnings
    error = classification_error(call, names, fit)
    for what, spec in (("covariate", covariates), ("distal", distal)):
        if spec is None:
            continue
        try:
            model = (fit_covariates if what == "covariate" else fit_distal)(call, names, fit, spec, error=error)
        except (ConvergenceError, ConfigError) as err:
            warnings.append(f"the {what} model was not fitted ({err}); the fit is kept")
            continue
        if what == "covariate":
            cov_fit = model
        else:
            dis_fit = model
    return error, cov_fit, dis_fit, warnings


def waic(transport, fit: LcaFit, *, n_draws: int = 200, rng: RngLike = None) -> float:
    """WAIC (deviance scale, ``-2 elpd_waic``) of the ML fit, from the silos' WAIC sums (docs/design.md §15.2).

    The draws are those of the mean-field posterior at the estimate (weights ``Dirichlet(1 + N_k)``,
    profiles ``Dirichlet(1 + N_kqm)`` from the expected counts): the variational posterior of a K-class
    model, so that the ML fits of every K get a WAIC on the same footing. The silos compute the sums of
    ``log mean p(x_i | theta_t)`` and ``var log p(x_i | theta_t)`` over their rows (the assessment request).
    """
    from vcmc.lca.em import estep
    from vcmc.model import profile_offsets
    from vcmc.protocol import AssessRequest

    gen = as_generator(rng)
    names = list(transport.silos)
    totals = estep(transport.call, names, fit.pi, fit.profiles)
    offsets = profile_offsets(fit.n_modalities)
    pi = gen.dirichlet(1.0 + totals.cluster, size=n_draws)
    prof = np.empty((n_draws, fit.k, int(offsets[-1])))
    for c in range(fit.k):
        for q in range(len(fit.n_modalities)):
            sl = slice(offsets[q], offsets[q + 1])
            prof[:, c, sl] = gen.dirichlet(1.0 + totals.modality[c, sl], size=n_draws)
    seed = int(gen.integers(2**63))
    requests = {n: AssessRequest(pi=pi, profiles=prof, pairs=np.zeros((0, 2), dtype=np.int64), seed_entropy=seed,
                                 spawn_key=(15, i)) for i, n in enumerate(names)}
    from vcmc.federation.faults import gather

    # WAIC needs every silo: a silo that fails or refuses leaves it undefined, not the comparison
    replies, failed = gather(transport, requests, stage="lca waic", optional=True)
    if failed:
        return float("nan")
    return float(-2.0 * sum(float(replies[n].elpd) for n in names))


def _compare_one(silos, k: int, seed, n_starts: int, max_iter: int, waic_draws: int, min_best, max_starts,
                 transport=None, n_modalities=None, n_gaussian=None) -> tuple[dict, LcaFit]:
    """One K of ``compare``: the fit and its row of the table (a worker process runs it with ``jobs > 1``)."""
    from vcmc.federation.transport import InProcessTransport

    tr = transport or InProcessTransport(silos)
    n_mod = _measurement_coding(silos, n_modalities)
    fit_rng, waic_rng = seed.spawn(2)
    n_gauss = _gaussian_items(silos, tr, n_gaussian)
    fit = fit_lca(tr.call, list(tr.silos), n_mod, k, n_starts=n_starts, max_iter=max_iter, rng=fit_rng,
                  min_best=min_best, max_starts=max_starts, n_gaussian=n_gauss)
    # the assessment round's WAIC sums know the categorical items only (docs/design.md §17.5)
    w = waic(tr, fit, n_draws=waic_draws, rng=waic_rng) if waic_draws > 0 and not n_gauss else float("nan")
    return {"k": k, **fit.statistics, "waic": w, "smallest_class": float(np.min(fit.pi)),
            "starts": len(fit.start_logliks), "starts_at_best": fit.n_best}, fit


def compare(silos, ks: Sequence[int], *, n_starts: int = 10, max_iter: int = 1000, rng: RngLike = None,
            waic_draws: int = 200, transport=None, n_modalities=None, jobs: int = 1, min_best: int | None = None,
            max_starts: int | None = None, n_gaussian: int | None = None) -> tuple[pd.DataFrame, dict[int, LcaFit]]:
    """Fit every K of ``ks`` and tabulate ``COMPARISON_COLUMNS`` (one row per K), then ``GUIDE_COLUMNS``: the
    smallest class's share, how many EM starts were made and how many reached the best log-likelihood.

    ``silos`` and ``n_modalities`` as in ``analyse``; ``jobs > 1`` fits the K in that many worker processes
    (in process only: each worker holds a copy of the silos; the result does not depend on it)."""
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        raise ConfigError(f"compare needs numbers of classes >= 1; got {ks}")
    if int(jobs) < 1:
        raise ConfigError(f"jobs must be >= 1; got {jobs}")
    seeds = as_seed_sequence(rng).spawn(len(ks))
    args = [(k, seed, n_starts, max_iter, waic_draws, min_best, max_starts) for k, seed in zip(ks, seeds, strict=True)]
    if int(jobs) > 1 and transport is None and silos and len(ks) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(int(jobs), len(ks)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            # the largest K first: they take longest, so the workers finish together
            order = sorted(range(len(ks)), key=lambda i: -ks[i])
            futures = {i: pool.submit(_compare_one, silos, *args[i]) for i in order}
            results = [futures[i].result() for i in range(len(ks))]
    else:
        results = [_compare_one(silos, *a, transport=transport, n_modalities=n_modalities, n_gaussian=n_gaussian)
                   for a in args]
    rows = [r for r, _ in results]
    fits = {k: f for (_, f), k in zip(results, ks, strict=True)}
    return pd.DataFrame(rows, columns=[*COMPARISON_COLUMNS, *GUIDE_COLUMNS]), fits


def three_step_at(silo_data, auxiliary, pi, profiles, *, covariates=None, distal=None) -> LcaAnalysis:
    """The three-step models on a given measurement model (the estimator's fitted point), federated.

    ``silo_data``: the fit's ``SiloData``; ``auxiliary``: one row-aligned frame per silo holding the
    covariate and outcome columns; ``covariates``, ``distal``: column names (``COL[:kind]``).
    """
    from vcmc.federation.transport import InProcessTransport
    from vcmc.lca.em import point_fit
    from vcmc.silo.local import LocalSilo

    if len(auxiliary) != len(silo_data):
        raise DataError(f"give one frame of covariates / outcomes per silo: {len(silo_data)} silos, "
                        f"{len(auxiliary)} frames")
    for d, frame in zip(silo_data, auxiliary, strict=True):
        if len(frame) != d.n_rows:
            raise DataError(f"silo {d.name!r}: its covariate / outcome frame has {len(frame)} rows, the silo "
                            f"{d.n_rows}")
    frames = {d.name: f.reset_index(drop=True) for d, f in zip(silo_data, auxiliary, strict=True)}
    named = {f"silo {name!r}": f for name, f in frames.items()}
    cov_spec = infer_spec(named, parse_columns(covariates, "covariates"), "--covariates") if covariates else None
    dis_spec = infer_spec(named, parse_columns(distal, "distal"), "--distal") if distal else None
    silos = [LocalSilo(d, auxiliary=frames[d.name]) for d in silo_data]
    tr = InProcessTransport(silos)
    names = list(tr.silos)
    fit = point_fit(tr.call, names, silos[0].n_modalities, pi, profiles)
    error, cov_fit, dis_fit, warnings = three_step(tr.call, names, fit, cov_spec, dis_spec)
    var_names, labels = _schema_names(silos)
    return LcaAnalysis(fit=fit, error=error, covariates=cov_fit, distal=dis_fit, variable_names=var_names,
                       modality_labels=labels, warnings=tuple(warnings))
