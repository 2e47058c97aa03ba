"""The model family seam: what every family of items provides, and the families (docs/design.md §17)."""

from vcmc.family.base import ROLES, Family
from vcmc.family.categorical import CATEGORICAL, CategoricalFamily
from vcmc.family.gaussian import GAUSSIAN, GaussianFamily


def parameter_moments(param_draws, n_modalities, n_gaussian: int = 0):
    """Posterior mean and variance of the closeness coordinates of every family of flat parameter rows (T, K,
    P + 2G): the categorical family's, then the Gaussian family's (docs/design.md §17.1)."""
    if not n_gaussian:
        return CATEGORICAL.moments(param_draws, n_modalities)
    import numpy as np

    p = CATEGORICAL.n_columns(n_modalities)
    cat = CATEGORICAL.moments(param_draws[..., :p], n_modalities)
    gauss = GAUSSIAN.moments(param_draws[..., p:], n_gaussian)
    return tuple(np.concatenate([a, b], axis=-1) for a, b in zip(cat, gauss, strict=True))


#: every family by its schema name
FAMILIES = {f.name: f for f in (CATEGORICAL, GAUSSIAN)}

__all__ = ["CATEGORICAL", "FAMILIES", "GAUSSIAN", "ROLES", "CategoricalFamily", "Family", "GaussianFamily",
           "parameter_moments"]
