"""Full-data MCMC: the paper's gold-standard comparator (docs/design.md §10, paper section 5.4).

The rows of every silo are pooled and the same Gibbs sampler, relabelling and post-processing as a silo's
apply step are run on them, with prior fractionation off (there is one "silo", so the prior is the
global prior once). This breaks the federation boundary on purpose: it is the reference a federated
method is measured against, available only when the data can be pooled (simulations, or one site).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from vcmc._rng import RngLike, root_entropy
from vcmc.config import PostprocessConfig, PriorConfig, SamplerConfig
from vcmc.exceptions import DataError
from vcmc.mcmc.apply import check_codes, run_apply_step
from vcmc.results import GlobalResult

__all__ = ["fit_full_mcmc"]


def fit_full_mcmc(silos: Sequence[np.ndarray], n_modalities, *, prior: PriorConfig | None = None,
                  sampler: SamplerConfig | None = None, postprocess: PostprocessConfig | None = None,
                  rng: RngLike = None, jobs: int = 1, silo_names: Sequence[str] | None = None,
                  progress: Callable[[int], None] | None = None,
                  values: Sequence[np.ndarray] | None = None) -> GlobalResult:
    """Gibbs sampling of the over-fitted latent class model on the pooled rows of all silos.

    Parameters
    ----------
    silos : sequence of ndarray of shape (n_s, Q), int
        Integer codes of each silo (``-1`` = missing), same schema.
    n_modalities : sequence of int
    prior : PriorConfig, optional
        Its ``fractionate`` flag is ignored (forced off: the pooled data see the prior once).
    sampler : SamplerConfig, optional
    postprocess : PostprocessConfig, optional
        Same post-processing as a silo (minimum cluster size relative to the pooled row count).
    rng : int, Generator, SeedSequence or None
        Root seed (chains are spawned from it as in ``run_apply_step``).
    jobs : int
        Worker processes for the chains; the result does not depend on it.
    silo_names : sequence of str, optional
        Default ``"silo_1".."silo_S"``.
    progress : callable, optional
        Receives numbers of Gibbs iterations completed.
    values : sequence of ndarray of shape (n_s, G), optional
        Each silo's standardised Gaussian items (docs/design.md §17); their draws go to ``gaussian_draws``.

    Returns
    -------
    GlobalResult
        ``method="full-mcmc"``; weights and profiles are posterior means of the label-consistent draws of
        the pooled clusters with equal-tailed 95% intervals; ``partition_counts`` (S, C) and
        ``assignments`` (one array per silo, input row order) from the pooled partition; timings
        ``{"apply", "total"}``; the chain diagnostics and the posterior of the number of occupied
        components in ``diagnostics``.
    """
    t0 = time.perf_counter()
    if isinstance(silos, np.ndarray) and silos.ndim == 2:
        silos = [silos]
    silos = list(silos)
    if not silos:
        raise DataError("fit_full_mcmc needs at least one silo's codes; got an empty sequence")
    names = tuple(f"silo_{s + 1}" for s in range(len(silos))) if silo_names is None else \
        tuple(str(x) for x in silo_names)
    if len(names) != len(silos):
        raise DataError(f"silo_names lists {len(names)} names for {len(silos)} silos")
    checked = []
    for name, codes in zip(names, silos, strict=True):
        try:
            checked.append(check_codes(codes, n_modalities)[0])
        except DataError as err:
            raise DataError(f"silo {name!r}: {err}") from None
    n_mod = tuple(int(k) for k in n_modalities)
    sizes = np.array([c.shape[0] for c in checked])
    pooled = np.concatenate(checked, axis=0)

    prior = PriorConfig() if prior is None else prior
    sampler = SamplerConfig() if sampler is None else sampler
    postprocess = PostprocessConfig() if postprocess is None else postprocess
    prior_full = dataclasses.replace(prior, fractionate=False)

    t_apply = time.perf_counter()
    pooled_values = None if values is None else np.concatenate([np.asarray(v, dtype=np.float64) for v in values])
    local = run_apply_step(pooled, n_mod, prior=prior_full, sampler=sampler, postprocess=postprocess,
                           n_silos=1, rng=rng, jobs=jobs, progress=progress, values=pooled_values)
    p = int(np.sum(n_mod))
    gaussian_draws = local.profile_draws[:, :, p:] if local.n_gaussian else None
    t_apply = time.perf_counter() - t_apply

    bounds = np.concatenate([[0], np.cumsum(sizes)])
    assignments = tuple(local.partition[bounds[s]:bounds[s + 1]].astype(np.int64) for s in range(len(names)))
    partition_counts = np.stack([np.bincount(a, minlength=local.n_clusters) for a in assignments])
    # the same output files as vcmc (memberships.csv, the `probability` column): each row's share of kept
    # iterations in each pooled cluster, the pooled chain's own membership
    memberships = tuple(np.asarray(local.membership[bounds[s]:bounds[s + 1]], dtype=np.float64)
                        for s in range(len(names)))
    diagnostics = dict(local.diagnostics)
    # the result.json contract of docs/design.md §14.3: the pooled chain's occupied components are global
    k_post = local.n_clusters_posterior()
    support = np.flatnonzero(k_post > 0)
    diagnostics["n_clusters_posterior"] = {
        "global": {"values": support.tolist(), "probabilities": k_post[support].tolist()},
        "local": {}, "definition": "occupied components of the pooled chain"}
    diagnostics["n_reallocated"] = int(local.n_reallocated)
    config = {"prior": dataclasses.asdict(prior_full), "sampler": dataclasses.asdict(sampler),
              "postprocess": dataclasses.asdict(postprocess)}
    return GlobalResult.from_draws(
        pi_draws=local.pi_draws, profile_draws=local.profile_draws[:, :, :p], gaussian_draws=gaussian_draws,
        method="full-mcmc", n_modalities=n_mod,
        silos=names, partition_counts=partition_counts, assignments=assignments, memberships=memberships,
        n_chains=int(sampler.n_chains),
        timings={"apply": float(t_apply), "total": float(time.perf_counter() - t0)}, config=config,
        seed=root_entropy(rng), diagnostics=diagnostics)
