"""The comparators of VCMC, each run as its authors describe it: full-data MCMC on the pooled rows,
FedMerDel, federated K-modes and DisCGS (consensus Monte Carlo shares VCMC's matched draws and lives in
``vcmc.aggregation.consensus``).

The ``run_*`` adapters give them the one signature of the method registry (``vcmc.methods.Method.run``),
through which ``vcmc.fit``, ``vcmc fit --method`` and the simulation study call them.
"""

from __future__ import annotations

from vcmc.exceptions import ConfigError


def run_full_mcmc(codes, n_modalities, *, config, rng, jobs=1, silo_names=None, n_clusters=None, progress=None):
    """Full-data MCMC: the same sampler on the pooled rows (the gold standard, not federated)."""
    from vcmc.research.baselines.full_mcmc import fit_full_mcmc

    return fit_full_mcmc(codes, n_modalities, prior=config.prior, sampler=config.sampler,
                         postprocess=config.postprocess, rng=rng, jobs=jobs, silo_names=silo_names,
                         progress=progress)


def run_fed_kmodes(codes, n_modalities, *, config, rng, jobs=1, silo_names=None, n_clusters=None, progress=None):
    """Federated K-modes with ``n_clusters`` clusters (it does not infer the number)."""
    from vcmc.research.baselines.fed_kmodes import fit_fed_kmodes

    if n_clusters is None:
        raise ConfigError("method 'fed-kmodes' needs n_clusters (K-modes does not infer the number of "
                          "clusters; the paper sets it to the truth).")
    return fit_fed_kmodes(codes, n_modalities, n_clusters=n_clusters, rng=rng, silo_names=silo_names)


def run_fedmerdel(codes, n_modalities, *, config, rng, jobs=1, silo_names=None, n_clusters=None, progress=None):
    """FedMerDel, started from C+ clusters with the weights' Dirichlet concentration."""
    from vcmc.research.baselines.fedmerdel import fit_fedmerdel

    return fit_fedmerdel(codes, n_modalities, k_init=config.prior.n_components, alpha=config.prior.alpha, rng=rng,
                         silo_names=silo_names)


def run_discgs(codes, n_modalities, *, config, rng, jobs=1, silo_names=None, n_clusters=None, progress=None):
    """DisCGS."""
    from vcmc.research.baselines.discgs import fit_discgs

    return fit_discgs(codes, n_modalities, rng=rng, silo_names=silo_names)
