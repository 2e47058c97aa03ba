"""What a variable family provides to the model, declared once (docs/design.md §17).

A family is a kind of item of the latent class model: categorical (a Dirichlet profile per cluster) or Gaussian
(a mean and a variance per cluster). Given a cluster, the items are independent, so the model is a product over
families and every stage needs the same few things of each family, listed here as the methods of ``Family``:

* its **parameter layout**: how many columns one component's parameters take in the flat parameter row
  (``n_columns``) and how many free coordinates they have (``n_coordinates``, the dimension of the matching's
  closeness test);
* its **row log-likelihood** (``log_likelihood_rows``, the plain numpy reference; the compiled kernels that serve
  the sampler, labelling and the rounds are named in ``served_by``);
* its **sufficient statistics** per cluster (``sufficient_statistics``) and the **conjugate prior** after
  fractionation over S silos (``local_prior``) and **posterior draws** given the statistics
  (``posterior_draws``);
* the **closeness** of two clusters' posteriors for matching: the posterior mean and variance of every
  coordinate (``moments``), from which ``vcmc.closeness`` forms its chi-square statistic;
* **what its summary discloses** (``disclosure``, in words) and the **release rule** the silo's gate applies to
  its statistics, its **predictive replicates** and its **report figure** (named in ``served_by``: the rules live
  beside the gate, the replicates beside the predictive checks, the figure in the report, each importing the
  family, never the other way round).

``spec`` is the family's own description of its items (the categorical family: the modalities of each variable;
the Gaussian family: the number of items). The computation stays in plain functions of arrays; the compiled
kernels stay specialised for speed, and ``served_by`` says which code serves which role for the family, so that
a reader (and ``tests/family``) finds every place a family is implemented from this one table.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

#: The roles a family's code plays in the pipeline, each named in ``Family.served_by`` by the dotted path of the
#: function or module that plays it (a missing role is one the family does not reach yet).
ROLES = ("allocation", "parameters", "relabel", "summary", "release", "matching", "aggregation", "rounds",
         "memberships", "replicates", "waic", "lca", "figure")


class Family(ABC):
    """One family of items (module docstring). Instances are stateless; ``spec`` travels with every call."""

    #: the family's name in the schema and in messages
    name: ClassVar[str]
    #: role -> dotted path of the code serving that role for this family (see ``ROLES``)
    served_by: ClassVar[Mapping[str, str]]
    #: what a silo's summary discloses of this family's items, in words (docs/federation.md's table)
    disclosure: ClassVar[str]

    # -- layout -------------------------------------------------------------------------------------------
    @abstractmethod
    def n_columns(self, spec) -> int:
        """Columns one component's parameters take in the flat parameter row."""

    @abstractmethod
    def n_coordinates(self, spec) -> int:
        """Free coordinates of one component's parameters (the matching's dimension)."""

    # -- likelihood and conjugate updates --------------------------------------------------------------------
    @abstractmethod
    def log_likelihood_rows(self, data: np.ndarray, params: np.ndarray, spec) -> np.ndarray:
        """Per-row, per-component log-likelihood of the family's items, shape (n, C); missing values skipped.
        ``params`` is (C, n_columns)."""

    @abstractmethod
    def sufficient_statistics(self, data: np.ndarray, labels: np.ndarray, n_clusters: int, spec) -> np.ndarray:
        """Per-cluster sufficient statistics of the rows labelled ``0..n_clusters-1`` (negative labels ignored)."""

    @abstractmethod
    def local_prior(self, prior, spec, n_silos: int) -> np.ndarray:
        """The conjugate prior's parameters of one silo's chain, fractionated over ``n_silos`` when
        ``prior.fractionate`` (the product of the S local priors is the prior once)."""

    @abstractmethod
    def posterior_draws(self, stats: np.ndarray, local_prior: np.ndarray, spec, n_draws: int,
                        rng: np.random.Generator) -> np.ndarray:
        """``n_draws`` conjugate posterior draws of every cluster's parameters given its statistics, shape
        (n_draws, K, n_columns)."""

    # -- matching --------------------------------------------------------------------------------------------
    @abstractmethod
    def moments(self, param_draws: np.ndarray, spec) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of every cluster's coordinates from its draws (T, K, n_columns): two
        arrays of shape (K, n_coordinates)."""
