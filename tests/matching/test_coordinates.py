import numpy as np
import pytest

from vcmc.exceptions import ConfigError
from vcmc.matching.coordinates import coordinates, default_reference, matching_from_groups, resolve_reference


def test_coordinates_drop_the_last_modality_of_each_variable():
    prof = np.array([[0.1, 0.9, 0.2, 0.3, 0.5, 1.0]])          # variables with 2, 3 and 1 modalities
    np.testing.assert_array_equal(coordinates(prof, (2, 3, 1)), [[0.1, 0.2, 0.3]])
    assert coordinates(np.zeros((4, 5, 26)), (2,) * 4 + (3,) * 6).shape == (4, 5, 16)


def test_reference_choice(mh):
    a = mh.make_summary("b", mh.binary_profiles([[0.1], [0.9]]), n_rows=800)
    b = mh.make_summary("a", mh.binary_profiles([[0.1], [0.9]]), n_rows=800)
    # equal clusters and rows: the name decides, not the position
    assert default_reference([a, b]) == 1
    assert default_reference([b, a]) == 0
    assert resolve_reference([a, b], "b") == 0
    with pytest.raises(ConfigError, match="must be a silo name"):
        resolve_reference([a, b], 3)


def test_canonical_numbering_ignores_group_ids(mh):
    s1 = mh.make_summary("s1", mh.binary_profiles([[0.1], [0.5], [0.9]]), sizes=[10, 50, 30])
    s2 = mh.make_summary("s2", mh.binary_profiles([[0.1], [0.9]]), sizes=[20, 30])
    silo = np.array([0, 0, 0, 1, 1])
    local = np.array([0, 1, 2, 0, 1])
    m1 = matching_from_groups([s1, s2], np.array([7, 3, 9, 7, 9]), silo, local, method="x")
    m2 = matching_from_groups([s1, s2], np.array([0, 1, 2, 0, 2]), silo, local, method="x")
    # sizes: group of 0.9 = 60, of 0.5 = 50, of 0.1 = 30
    assert m1.assignment[0].tolist() == [2, 1, 0]
    assert m1.assignment[1].tolist() == [2, 0]
    assert [a.tolist() for a in m1.assignment] == [a.tolist() for a in m2.assignment]
