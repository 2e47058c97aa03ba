import numpy as np
import pytest

from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.protocol import SiloSummary


def make_summary(**over):
    rng = np.random.default_rng(0)
    pi = rng.dirichlet([5, 5], size=10)
    prof = np.concatenate([rng.dirichlet([1, 1], size=(10, 2)), rng.dirichlet([1, 1, 1], size=(10, 2))], axis=2)
    kw = dict(silo="A", n_rows=100, n_modalities=(2, 3), schema_fingerprint="abc",
              cluster_sizes=np.array([60, 40]), pi_draws=pi, profile_draws=prof,
              pi_estimate=np.median(pi, 0), profile_estimate=np.median(prof, 0),
              n_clusters_posterior=np.array([0, 0, 1.0]), counts=np.ones((2, 5), int),
              diagnostics={"rhat_log_posterior": 1.01})
    kw.update(over)
    return SiloSummary(**kw)


def test_summary_round_trip():
    s = make_summary()
    arrays = s.to_arrays()
    back = SiloSummary.from_arrays(arrays)
    assert back.silo == "A" and back.n_modalities == (2, 3)
    np.testing.assert_array_equal(back.profile_draws, s.profile_draws)
    assert back.diagnostics == {"rhat_log_posterior": 1.01}


def test_summary_wrong_version_names_versions():
    arrays = make_summary().to_arrays()
    arrays["__version__"] = 99
    with pytest.raises(InconsistentSiloSummaries, match="version 99"):
        SiloSummary.from_arrays(arrays)


def test_summary_with_nan_names_silo():
    s = make_summary()
    bad = s.pi_draws.copy()
    bad[0, 0] = np.nan
    with pytest.raises(InconsistentSiloSummaries, match="silo 'A'.*NaN"):
        make_summary(pi_draws=bad)
