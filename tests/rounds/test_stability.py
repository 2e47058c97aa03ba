"""The warnings a rounds result carries when it is still doubtful."""

import numpy as np

from vcmc.result_builder import one_cluster_silo_warnings
from vcmc.rounds.stage import stability_of


def _rounds(lj, k):
    return [{"log_joint": float(a), "k": int(b)} for a, b in zip(lj, k, strict=True)]


def test_settled_rounds_are_stable_and_drifting_ones_are_not():
    rng = np.random.default_rng(0)
    flat = rng.normal(-1000, 3, 400)
    assert stability_of(_rounds(flat, [5] * 400))["stable"]
    drifting = flat + np.linspace(0, 60, 400)
    got = stability_of(_rounds(drifting, [5] * 400))
    assert not got["stable"] and "did not settle" in got["said"] and "--rounds" in got["said"]
    assert "aggregation.round-anneal" in got["said"]                            # the other remedy measured
    assert not stability_of(_rounds(flat, [6] * 200 + [5] * 200))["stable"]     # K still changing
    assert not stability_of(_rounds(flat[:12], [5] * 12))["stable"]             # too few kept rounds


def test_a_silo_labelled_one_class_is_named():
    counts = np.array([[10, 12, 0], [0, 30, 0], [5, 5, 5]])
    words = one_cluster_silo_warnings(counts, ("a", "b", "c"))
    assert len(words) == 1 and "'b'" in words[0] and "(2)" in words[0]
    assert one_cluster_silo_warnings(np.array([[4], [6]]), ("a", "b")) == []     # one cluster in all: nothing to say
