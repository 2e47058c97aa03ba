"""Memberships of a silo's rows: exact on one draw, averaged over draws, zero where a cluster is absent."""

import numpy as np
import pytest

from vcmc.model import MISSING, log_likelihood_rows
from vcmc.rows.memberships import membership_summary, posterior_memberships


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

    from vcmc.rows.memberships import write_membership_files

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
    from vcmc.rows.memberships import write_membership_files

    with pytest.raises(ValueError, match="not the most probable"):
        write_membership_files(tmp_path, [("A", np.array([[0.6, 0.4]]), np.array([1]))])
    assert not (tmp_path / "assignments.csv").exists()


def _reference(codes, n_mod, pi, prof):
    """The average over every draw of Bayes' rule per row, by the model's per-variable formula."""
    out = np.zeros((codes.shape[0], pi.shape[1]))
    for t in range(pi.shape[0]):
        with np.errstate(divide="ignore"):
            ll = log_likelihood_rows(codes, pi[t], prof[t], n_mod)
        w = np.exp(ll - ll.max(axis=1, keepdims=True))
        out += w / w.sum(axis=1, keepdims=True)
    return out / pi.shape[0]


def _separated(rng, n, t, n_mod=(2,) * 12 + (3,) * 4, c=3):
    """Rows of well separated clusters and T posterior-like draws around the truth (Dirichlet, 300 pseudo-counts
    per block), some cells missing."""
    offsets = np.concatenate([[0], np.cumsum(n_mod)])
    truth = np.concatenate([rng.dirichlet(np.full(k, 0.3), size=c) for k in n_mod], axis=1)
    w = np.array([0.5, 0.3, 0.2])
    z = rng.choice(c, size=n, p=w)
    codes = np.stack([[rng.choice(k, p=truth[z[i], offsets[q]:offsets[q + 1]]) for i in range(n)]
                      for q, k in enumerate(n_mod)], axis=1)
    codes[rng.random(codes.shape) < 0.1] = MISSING
    pi = rng.dirichlet(300 * w, size=t)
    prof = np.concatenate([np.stack([rng.dirichlet(300 * truth[k, offsets[q]:offsets[q + 1]] + 0.01, size=t)
                                     for k in range(c)], axis=1) for q in range(len(n_mod))], axis=2)
    return codes, n_mod, pi, prof


def test_memberships_to_target_match_the_average_over_every_draw_within_the_stated_error():
    """The labelling's memberships (as many draws as the target needs) against the average of all 400
    draws by the per-variable formula: every probability within 4 standard errors of the stated Monte Carlo
    error, the same label wherever the reference's top two are further apart than that."""
    from vcmc.rows.memberships import memberships_to_target

    rng = np.random.default_rng(3)
    codes, n_mod, pi, prof = _separated(rng, 400, 400)
    ref = _reference(codes, n_mod, pi, prof)
    for target in (0.05, 0.01):
        m, mc = memberships_to_target(codes, n_mod, pi, prof, target=target)
        assert mc.target == target and mc.n_available == 400 and mc.n_draws < 400
        assert mc.error <= target
        np.testing.assert_allclose(m.sum(axis=1), 1.0)
        assert np.abs(m - ref).max() <= 4 * mc.error
        top2 = np.sort(ref, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 8 * mc.error
        assert clear.mean() > 0.9
        np.testing.assert_array_equal(np.argmax(m, axis=1)[clear], np.argmax(ref, axis=1)[clear])
    strict, mc = memberships_to_target(codes, n_mod, pi, prof, target=1e-12)
    assert mc.n_draws == 400 and mc.error > 1e-12                  # not reached: every draw, error stated
    np.testing.assert_allclose(strict, ref, rtol=1e-9, atol=1e-14)


def test_rows_every_draw_agrees_on_stop_at_the_first_batch_and_draws_are_spread():
    from vcmc.rows.memberships import FIRST_DRAWS, memberships_to_target, spread_order

    rng = np.random.default_rng(4)
    codes, n_mod, pi, prof = _separated(rng, 100, 200, n_mod=(4,) * 30)    # 30 variables: all rows certain
    m, mc = memberships_to_target(codes, n_mod, pi, prof)
    assert mc.n_draws == FIRST_DRAWS and mc.error < 1e-6
    order = spread_order(200)
    assert sorted(order.tolist()) == list(range(200))
    first = np.sort(order[:FIRST_DRAWS])
    assert first[0] == 0 and first[-1] >= 180 and np.diff(first).max() <= 2 * 200 / FIRST_DRAWS


def test_the_assign_reply_states_the_draws_used_and_the_error():
    """What leaves the silo: cluster-level sums and two numbers about the Monte Carlo error."""
    from vcmc.rows.memberships import memberships_to_target

    rng = np.random.default_rng(5)
    codes, n_mod, pi, prof = _separated(rng, 60, 50)
    m, mc = memberships_to_target(codes, n_mod, pi, prof)
    s = membership_summary(m, np.argmax(m, axis=1), mc)
    assert s["n_draws"] == mc.n_draws and s["mc_error"] == mc.error and s["mc_target"] == mc.target
    assert all(np.ndim(v) <= 1 and np.size(v) <= 3 for v in s.values())
