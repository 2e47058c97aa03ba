"""The model family seam (docs/design.md §17): every family declares every hook, every role it names is real
code, and the categorical family is the code every stage used before the seam."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from vcmc.closeness import posterior_moments
from vcmc.config import PriorConfig
from vcmc.family import CATEGORICAL, FAMILIES, ROLES
from vcmc.model import beta_per_column, fractionate, log_likelihood_rows, one_hot_counts


def _resolve(path: str):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise AssertionError(path)


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_every_role_a_family_names_is_real_code(family):
    assert set(family.served_by) <= {r for role in ROLES for r in (role, f"{role}.sparse", f"{role}.mixed")}
    for role, path in family.served_by.items():
        assert _resolve(path) is not None, (family.name, role, path)
    assert family.disclosure


def test_categorical_family_is_the_model_s_code():
    rng = np.random.default_rng(0)
    k = (2, 3, 4)
    codes = np.column_stack([rng.integers(-1, kq, 50) for kq in k]).astype(np.int16)
    labels = rng.integers(0, 3, 50)
    assert np.array_equal(CATEGORICAL.sufficient_statistics(codes, labels, 3, k), one_hot_counts(codes, labels, 3, k))
    prior = PriorConfig(beta=0.5)
    assert np.array_equal(CATEGORICAL.local_prior(prior, k, 4), fractionate(beta_per_column(0.5, k), 4))
    draws = CATEGORICAL.posterior_draws(one_hot_counts(codes, labels, 3, k), CATEGORICAL.local_prior(prior, k, 1), k,
                                        5, rng)
    assert draws.shape == (5, 3, CATEGORICAL.n_columns(k))
    pi = np.full(3, 1.0)
    assert np.allclose(CATEGORICAL.log_likelihood_rows(codes, draws[0], k), log_likelihood_rows(codes, pi, draws[0], k))
    for a, b in zip(CATEGORICAL.moments(draws, k), posterior_moments(draws, k), strict=True):
        assert np.array_equal(a, b)
    assert CATEGORICAL.n_coordinates(k) == CATEGORICAL.moments(draws, k)[0].shape[1] == 6
