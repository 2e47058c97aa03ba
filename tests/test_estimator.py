"""The scikit-learn style estimator: fit on silos, predict new rows."""

import numpy as np
import pytest

from vcmc.estimator import FederatedLatentClassModel
from vcmc.exceptions import DataError, NotFittedError
from vcmc.metrics import adjusted_rand_index


def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError, match="fit"):
        FederatedLatentClassModel().predict(np.zeros((2, 10), dtype=np.int16))


def test_fit_predict_new_rows(nested_easy):
    from vcmc.simulate import simulate_design

    model = FederatedLatentClassModel(n_iter=3000, burn_in=1500, rng=2).fit(nested_easy)
    assert model.n_clusters_ == 6
    np.testing.assert_allclose(model.weights_.sum(), 1.0)
    # rows of the training silos: prediction agrees with the propagated partition almost everywhere
    pred = model.predict(nested_easy.silos[0])
    assert adjusted_rand_index(pred, model.labels_[0]) > 0.9
    proba = model.predict_proba(nested_easy.silos[1].codes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    with pytest.raises(DataError, match="shape"):
        model.predict(np.zeros((3, 4), dtype=np.int16))
    del simulate_design
