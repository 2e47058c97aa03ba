"""The scikit-learn estimator: scikit-learn's own checks, clone, the input forms, predictions and score."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from vcmc.estimator import FederatedLatentClassModel
from vcmc.exceptions import DataError
from vcmc.metrics import adjusted_rand_index

SHORT = dict(n_iter=3000, burn_in=1500, random_state=2)

#: scikit-learn checks that cannot apply to a clusterer of categorical data, with the reason.
NOT_APPLICABLE = {
    "check_clustering": "clusters continuous Gaussian blobs (every value a distinct label); the model clusters "
                        "categorical variables, and the check's values are not categories",
}


def test_scikit_learn_checks_pass_except_those_for_continuous_data():
    est = FederatedLatentClassModel(n_iter=60, burn_in=30, thin=1, n_components=4, random_state=0)
    check_estimator(est, expected_failed_checks=NOT_APPLICABLE, on_skip=None)


def test_clone_and_params_follow_the_estimator_rules():
    est = FederatedLatentClassModel(random_state=0, n_iter=20_000)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    assert twin.get_params()["burn_in"] is None          # None: half of n_iter
    assert est._fit_config().sampler.burn_in == 10_000
    twin.set_params(matching="min-divergence", n_jobs=2)
    assert twin._fit_config().matching.method == "min-divergence"
    with pytest.raises(ValueError, match="'matching' parameter"):
        FederatedLatentClassModel(matching="kmeans").fit([np.zeros((3, 2))])
    with pytest.raises(NotFittedError):
        est.predict(np.zeros((2, 10), dtype=int))


def test_fit_on_frames_arrays_or_silo_data_gives_one_model(nested_easy):
    frames = [nested_easy.schema.decode(s.codes) for s in nested_easy.silos]
    by_frame = FederatedLatentClassModel(**SHORT).fit(frames)
    by_silo = FederatedLatentClassModel(**SHORT).fit(list(nested_easy.silos))
    by_array = FederatedLatentClassModel(**SHORT).fit([f.to_numpy() for f in frames])
    assert by_frame.n_clusters_ == by_silo.n_clusters_ == by_array.n_clusters_ == 6
    np.testing.assert_array_equal(by_frame.labels_, by_silo.labels_)
    np.testing.assert_array_equal(by_frame.labels_, by_array.labels_)
    assert by_frame.n_features_in_ == 10 and list(by_frame.feature_names_in_) == list(frames[0].columns)
    assert not hasattr(by_array, "feature_names_in_")
    truth = np.concatenate(nested_easy.labels)
    assert adjusted_rand_index(by_frame.labels_, truth) > 0.9
    np.testing.assert_array_equal(FederatedLatentClassModel(**SHORT).fit_predict(frames), by_frame.labels_)


def test_new_rows_are_classified_under_the_global_posterior(nested_easy):
    frames = [nested_easy.schema.decode(s.codes) for s in nested_easy.silos]
    model = FederatedLatentClassModel(**SHORT).fit(frames[:3])
    new = frames[3]                      # silo 4 holds clusters 1 and 2 only, both found in silo 1
    proba = model.predict_proba(new)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(new), proba.argmax(axis=1))
    # rows of a new site that holds the same clusters are classified like the truth
    assert adjusted_rand_index(model.predict(new), nested_easy.labels[3]) > 0.85
    # score: mean log predictive density, higher on data of the model than on the same values shuffled
    rng = np.random.default_rng(0)
    shuffled = new.apply(lambda col: rng.permutation(col.to_numpy()))
    assert model.score(new) > model.score(shuffled) + 0.5
    assert np.isfinite(model.score(new.iloc[:1]))
    # a label outside the fit's schema is an error naming it, never a neighbour's parameters
    bad = new.copy()
    bad.iloc[3, 2] = "9"
    with pytest.raises(DataError, match="V3"):
        model.predict(bad)
    with pytest.raises(DataError, match="features"):
        model.predict(new.iloc[:, :4])


def test_a_list_of_rows_is_one_silo():
    rng = np.random.default_rng(1)
    rows = rng.choice(["a", "b", "c"], size=(60, 3)).tolist()
    model = FederatedLatentClassModel(n_iter=200, burn_in=100, n_components=3, random_state=0).fit(rows)
    assert model.labels_.shape == (60,)
    frame = pd.DataFrame(rows)
    assert model.predict(frame).shape == (60,)
