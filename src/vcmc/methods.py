"""The one registry of methods: VCMC and its comparators, as the CLI, the API, the estimator and the study
see them.

``vcmc fit --method`` takes its choices from here, ``vcmc.fit`` dispatches through it, the estimator
accepts the methods marked ``estimator`` and the simulation study (``vcmc.research.study.registry``)
runs the comparators through the same ``Method.run``. VCMC and consensus run through the pipeline
(``vcmc.pipeline``); each comparator is named by the path of its adapter in the research harness
(``vcmc.research.baselines``) and imported only when it runs, so the library core never imports the
harness (tests/test_architecture.py).

Adding a comparator: an adapter in ``vcmc/research/baselines/__init__.py`` with the signature below and
one ``Method`` entry here (CONTRIBUTING.md, "Adding a comparator").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from vcmc.exceptions import ConfigError

__all__ = ["METHODS", "Method", "get", "names"]


@dataclass(frozen=True)
class Method:
    """One method.

    Attributes
    ----------
    name : str
        ``--method`` value and ``vcmc.fit(method=...)``.
    label : str
        Its name in tables and reports.
    adapter : str or None
        ``"module:function"`` of a comparator, called as ``function(codes, n_modalities, *, config, rng,
        jobs, silo_names, n_clusters, progress) -> GlobalResult``; None for the methods that run through
        the pipeline (every silo's apply step, matching, then aggregation or consensus weights).
    federated : bool
        False for the pooled gold standard (full-data MCMC).
    estimator : bool
        Offered by ``FederatedLatentClassModel`` (fed-kmodes is not: it needs the number of clusters).
    pooled_sampler : bool
        Runs the Gibbs sampler on the pooled rows (the API shows a progress bar over its iterations).
    about : str
        What it is, in a few words (the ``--method`` help).
    """

    name: str
    label: str
    adapter: str | None = None
    federated: bool = True
    estimator: bool = True
    pooled_sampler: bool = False
    about: str = ""

    def run(self, codes, n_modalities, *, config, rng, jobs: int = 1, silo_names=None, n_clusters=None,
            progress=None):
        """Run a comparator on the silos' codes (the pipeline's methods are run by ``vcmc.pipeline``)."""
        if self.adapter is None:
            raise ValueError(f"method {self.name!r} runs through vcmc.pipeline, not an adapter")
        module, _, function = self.adapter.partition(":")
        fn = getattr(importlib.import_module(module), function)
        return fn(codes, n_modalities, config=config, rng=rng, jobs=jobs, silo_names=silo_names,
                  n_clusters=n_clusters, progress=progress)


_BASELINES = "vcmc.research.baselines"

METHODS: dict[str, Method] = {m.name: m for m in (
    Method("vcmc", "VCMC", about="Variational Consensus Monte Carlo (the default)"),
    Method("consensus", "Consensus MC", about="Scott et al.'s consensus weights on the same apply step"),
    Method("full-mcmc", "Full MCMC", f"{_BASELINES}:run_full_mcmc", federated=False, pooled_sampler=True,
           about="one sampler on the pooled rows (a reference, not federated)"),
    Method("fed-kmodes", "Fed K-modes", f"{_BASELINES}:run_fed_kmodes", estimator=False,
           about="federated K-modes (a comparator; needs --clusters)"),
    Method("fedmerdel", "FedMerDel", f"{_BASELINES}:run_fedmerdel", about="a variational comparator"),
    Method("discgs", "DisCGS", f"{_BASELINES}:run_discgs", about="distributed collapsed Gibbs (a comparator)"),
)}
"""Every method, by name, in the order the CLI lists them."""


def names(*, estimator: bool = False) -> tuple[str, ...]:
    """The method names (with ``estimator=True``, those the scikit-learn estimator offers)."""
    return tuple(n for n, m in METHODS.items() if m.estimator or not estimator)


def get(name: str, *, owner: str = "vcmc.fit") -> Method:
    """The method called ``name``; a ``ConfigError`` listing the valid names otherwise."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"The 'method' parameter of {owner} must be one of {', '.join(METHODS)}. "
                          f"Got {name!r} instead.", option=f"{owner}.method",
                          expected="one of " + ", ".join(METHODS), got=name) from None
