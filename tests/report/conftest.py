"""A small design with named conditions and known characteristic ones, and fits of it.

Three clusters of weights 0.80, 0.12, 0.08 over eight binary conditions (no/yes) and smoking
(never/former/current). Cluster 1 is the baseline; cluster 2 has high asthma, COPD and current smoking,
low hypertension and never-smoking; cluster 3 high stroke and dementia, low diabetes. Depression and
cancer are the same in every cluster. The true odds ratios against the population (the weight-averaged
profile) are >= 4.2 or <= 1/4.7 on every designed cell and within [0.5, 2] elsewhere
(:func:`true_odds_ratios` checks it), so with 6,000 people the rule (odds ratio 3) separates them with a
margin of several standard errors.
"""

import numpy as np
import pytest

from vcmc.data.schema import Schema, SiloData, Variable

CONDITIONS = ("asthma", "copd", "stroke", "dementia", "diabetes", "hypertension", "depression", "cancer")
BASELINE = {"asthma": 0.10, "copd": 0.08, "stroke": 0.12, "dementia": 0.10, "diabetes": 0.20, "hypertension": 0.50,
            "depression": 0.15, "cancer": 0.10}
WEIGHTS = (0.80, 0.12, 0.08)
SMOKING = ("never", "former", "current")
SMOKING_BASE = (0.50, 0.35, 0.15)
#: per cluster (0-based): condition -> prevalence, and smoking probabilities
SHIFTS = ({}, {"asthma": 0.6, "copd": 0.5, "hypertension": 0.1}, {"stroke": 0.7, "dementia": 0.6, "diabetes": 0.01})
SMOKING_BY = (SMOKING_BASE, (0.15, 0.25, 0.60), SMOKING_BASE)
#: the designed characterisation, cluster number (1-based) -> {(name shown by the report, +1 high / -1 low)}
DESIGNED = {1: set(),
            2: {("asthma", 1), ("copd", 1), ("hypertension", -1), ("smoking=current", 1), ("smoking=never", -1)},
            3: {("stroke", 1), ("dementia", 1), ("diabetes", -1)}}


def profiles() -> np.ndarray:
    """(3, 19) flat profiles: (no, yes) per condition, then smoking's three modalities."""
    out = []
    for c in range(3):
        row = []
        for v in CONDITIONS:
            p = SHIFTS[c].get(v, BASELINE[v])
            row += [1 - p, p]
        row += list(SMOKING_BY[c])
        out.append(row)
    return np.array(out)


def schema() -> Schema:
    return Schema(tuple(Variable(v, ("no", "yes")) for v in CONDITIONS) + (Variable("smoking", SMOKING),))


def true_odds_ratios() -> dict:
    """{(cluster 1-based, shown name): odds ratio against the population} from the true parameters."""
    prof = profiles()
    pop = np.asarray(WEIGHTS) @ prof
    names = [v for v in CONDITIONS for _ in (0, 1)] + [f"smoking={m}" for m in SMOKING]
    shown = [j for j in range(prof.shape[1]) if j >= 2 * len(CONDITIONS) or j % 2 == 1]
    odds = prof / (1 - prof)
    pop_odds = pop / (1 - pop)
    return {(c + 1, names[j]): float(odds[c, j] / pop_odds[j]) for c in range(3) for j in shown}


def simulate(n: int, n_silos: int, seed: int):
    """(silos, labels): ``n`` people drawn from the design, split uniformly over ``n_silos`` silos."""
    rng = np.random.default_rng(seed)
    z = rng.choice(3, size=n, p=WEIGHTS)
    prof = profiles()
    codes = np.empty((n, len(CONDITIONS) + 1), dtype=np.int16)
    for q in range(len(CONDITIONS)):
        codes[:, q] = rng.random(n) < prof[z, 2 * q + 1]
    cum = np.cumsum(prof[:, 2 * len(CONDITIONS):], axis=1)
    codes[:, -1] = (rng.random(n)[:, None] > cum[z]).sum(axis=1)
    where = rng.integers(0, n_silos, size=n)
    sch = schema()
    silos = tuple(SiloData(f"silo_{s + 1}", codes[where == s], sch) for s in range(n_silos))
    labels = tuple(z[where == s] for s in range(n_silos))
    return silos, labels


def exact_posterior_fit(silos, labels, *, n_draws: int = 1000, seed: int = 5, beta: float = 0.5,
                        alpha: float = 0.01):
    """A ``GlobalResult`` whose draws are the exact posterior of the latent class model given the true
    labels (conjugate: Dirichlet(beta + counts) per profile block, Dirichlet(alpha + sizes) for the
    weights), as a pooled sampler with those labels would give."""
    from vcmc.results import GlobalResult

    rng = np.random.default_rng(seed)
    sch = silos[0].schema
    codes = np.concatenate([s.codes for s in silos])
    z = np.concatenate(labels)
    n_c = int(z.max()) + 1
    blocks = []
    for q, var in enumerate(sch.variables):
        k = len(var.modalities)
        counts = np.stack([np.bincount(codes[z == c, q], minlength=k) for c in range(n_c)])
        g = rng.gamma(beta + counts[None], size=(n_draws, n_c, k))
        blocks.append(g / g.sum(axis=2, keepdims=True))
    sizes = np.bincount(z, minlength=n_c)
    part = np.stack([np.bincount(lab, minlength=n_c) for lab in labels])
    return GlobalResult.from_draws(
        pi_draws=rng.dirichlet(alpha + sizes, size=n_draws), profile_draws=np.concatenate(blocks, axis=2),
        method="full-mcmc", n_modalities=sch.n_modalities, silos=tuple(s.name for s in silos),
        partition_counts=part, assignments=tuple(labels), timings={"total": 1.0},
        config={"prior": {"alpha": alpha, "beta": beta, "fractionate": False}}, seed=seed,
        diagnostics={"elbo_trace": [-10.0, -9.0, -8.5], "warnings": ["a warning <with> markup & more"],
                     "local": {s.name: {"n_clusters": 3, "rhat_log_posterior": 1.02 if i == 0 else 1.001,
                                        "ess_bulk_log_posterior": 350.0 if i == 0 else 2000.0,
                                        "n_withheld": 0, "counts_suppressed": 0}
                               for i, s in enumerate(silos)},
                     "classification": {"relative_entropy": 0.93, "relative_entropy_per_silo":
                                        {s.name: 0.93 for s in silos},
                                        "average_probability": [0.97, 0.9, 0.95, 0.9][:n_c] + [0.9] * (n_c - 4)},
                     "matching_checks": []})


@pytest.fixture(scope="session")
def named_design():
    return simulate(6000, 2, seed=7)


@pytest.fixture
def exact_fit_dir(tmp_path, named_design):
    """A fit folder (result.json, profiles.csv, posterior.nc, assignments.csv) of the exact posterior."""
    from vcmc.report import write_outputs

    silos, labels = named_design
    write_outputs(exact_posterior_fit(silos, labels), tmp_path / "fit", schema=silos[0].schema)
    return tmp_path / "fit"
