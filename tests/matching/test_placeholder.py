import numpy as np
import pytest

from vcmc.config import PriorConfig
from vcmc.matching import build_matched_draws, match_ball
from vcmc.matching.placeholder import build_matched_draws_with_placeholders


def test_absent_clusters_become_empty_overfitted_slots(mh):
    data, summaries, _, _ = mh.appendix_a("non-nested", "easy", 1, n_draws=2000)
    m = match_ball(summaries)
    base = build_matched_draws(summaries, m)
    md = build_matched_draws_with_placeholders(summaries, m, prior=PriorConfig(), rng=0)
    assert md.present.all()
    for s in range(4):
        np.testing.assert_allclose(md.pi[s].sum(axis=1), 1.0)
        absent = ~base.present[s]
        # own clusters keep their profiles; their weights only shrink by the placeholder mass
        np.testing.assert_array_equal(md.profiles[s][:, ~absent], base.profiles[s][:, ~absent])
        assert np.all(md.pi[s][:, ~absent] <= base.pi[s][:, ~absent])
    # silo 4 holds 2 of the 6 clusters: 4 placeholders with Beta(a, n + (C+ - 1) a) weights, a = 0.7525
    a = (0.01 - 1) / 4 + 1
    absent = np.nonzero(~base.present[3])[0]
    w = md.pi[3][:, absent]
    expected = a / (1000 + 15 * a)
    assert w.mean() == pytest.approx(expected, rel=0.1)
    # placeholder profiles from Dir(b), b = 0.875: block means 1/K
    prof = md.profiles[3][:, absent, :2]
    np.testing.assert_allclose(prof.mean(axis=(0, 1)), 0.5, atol=0.02)
    np.testing.assert_array_equal(md.counts, base.counts)


def test_matched_draws_dispatches_on_config(mh):
    from vcmc.config import MatchingConfig
    from vcmc.matching import matched_draws

    _, summaries, _, _ = mh.appendix_a("nested", "easy", 1)
    m = match_ball(summaries)
    assert not matched_draws(summaries, m).present.all()
    assert matched_draws(summaries, m, MatchingConfig(absent="placeholder"), rng=0).present.all()
