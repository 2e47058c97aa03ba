"""Memberships of a silo's rows: exact on one draw, averaged over draws, zero where a cluster is absent."""

import numpy as np
import pytest

from vcmc.model import MISSING, log_likelihood_rows
from vcmc.silo.memberships import membership_summary, posterior_memberships


def _draws(rng, t, c, n_mod):
    pi = rng.dirichlet(np.ones(c), size=t)
    prof = np.concatenate([rng.dirichlet(np.ones(k), size=(t, c)) for k in n_mod], axis=2)
    return pi, prof


def test_one_draw_is_bayes_rule_and_many_draws_are_averaged():
    rng = np.random.default_rng(0)
    n_mod = (2, 3, 4)
    codes = np.stack([rng.integers(0, k, 50) for k in n_mod], axis=1)
    codes[rng.random(codes.shape) < 0.2] = MISSING
    pi, prof = _draws(rng, 7, 4, n_mod)
    one = posterior_memberships(codes, n_mod, pi[0], prof[0])
    lik = np.exp(log_likelihood_rows(codes, pi[0], prof[0], n_mod))
    np.testing.assert_allclose(one, lik / lik.sum(axis=1, keepdims=True), rtol=1e-12)
    many = posterior_memberships(codes, n_mod, pi, prof)
    each = [posterior_memberships(codes, n_mod, pi[t], prof[t]) for t in range(7)]
    np.testing.assert_allclose(many, np.mean(each, axis=0), rtol=1e-12)
    np.testing.assert_allclose(many.sum(axis=1), 1.0)


def test_a_cluster_absent_from_the_silo_gets_no_member():
    rng = np.random.default_rng(1)
    n_mod = (3,) * 5
    codes = np.stack([rng.integers(0, 3, 40) for _ in n_mod], axis=1)
    pi, prof = _draws(rng, 3, 3, n_mod)
    pi[:, 1] = 0.0
    pi /= pi.sum(axis=1, keepdims=True)
    m = posterior_memberships(codes, n_mod, pi, prof)
    assert np.all(m[:, 1] == 0.0) and np.allclose(m.sum(axis=1), 1.0)


def test_summary_is_cluster_level():
    m = np.array([[0.9, 0.1], [0.4, 0.6], [0.5, 0.5]])
    labels = np.array([0, 1, 0])
    s = membership_summary(m, labels)
    assert s["counts"].tolist() == [2, 1]
    np.testing.assert_allclose(s["expected"], [1.8, 1.2])
    np.testing.assert_allclose(s["probability"], [1.4, 0.6])
    ent = -np.sum(m * np.log(m))
    assert s["entropy"] == pytest.approx(ent)


def test_files_agree_exactly_including_ties(tmp_path):
    """The label is the most probable cluster, ties going to the lowest-numbered one (numpy's argmax, as a
    reader's idxmax); the files carry the memberships at full precision, so reading them back finds the
    label as the row's maximum, ties included."""
    import pandas as pd

    from vcmc.silo.memberships import write_membership_files

    third = 1.0 / 3.0
    m = np.array([[0.5, 0.5, 0.0], [third, third, third], [0.1, 0.2, 0.7], [0.2, 0.4, 0.4],
                  [1 - 2e-16, 1e-16, 1e-16]])
    labels = np.argmax(m, axis=1)
    assert labels.tolist() == [0, 0, 2, 1, 0]
    other = np.array([[0.25, 0.75, 0.0]])
    paths = write_membership_files(tmp_path, [("A", m, labels), ("B", other, np.array([1]))])
    member = pd.read_csv(paths["memberships"])
    assign = pd.read_csv(paths["assignments"])
    assert list(member.columns) == ["silo", "row", "p_1", "p_2", "p_3"]
    assert list(assign.columns) == ["silo", "row", "cluster", "probability"]
    assert assign.silo.tolist() == ["A"] * 5 + ["B"] and assign.row.tolist() == [0, 1, 2, 3, 4, 0]
    p = member[["p_1", "p_2", "p_3"]].to_numpy()
    np.testing.assert_array_equal(p, np.vstack([m, other]))           # full precision round trip
    assert (member[["p_1", "p_2", "p_3"]].idxmax(axis=1).str[2:].astype(int) == assign.cluster).all()
    np.testing.assert_array_equal(assign.probability.to_numpy(), p.max(axis=1))


def test_a_label_that_is_not_a_most_probable_cluster_is_refused(tmp_path):
    from vcmc.silo.memberships import write_membership_files

    with pytest.raises(ValueError, match="not the most probable"):
        write_membership_files(tmp_path, [("A", np.array([[0.6, 0.4]]), np.array([1]))])
    assert not (tmp_path / "assignments.csv").exists()
