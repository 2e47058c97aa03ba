"""Helpers of the matching tests: hand-made summaries and Appendix A (true local partitions) datasets."""

import functools
import types

import numpy as np
import pytest

from vcmc.protocol import SiloSummary
from vcmc.research.study.evaluate import appendix_a_silos, in_process_divergence


def make_summary(name, profiles, sizes=None, n_rows=1000, n_modalities=None):
    """A summary whose median profiles are exactly ``profiles`` (one draw), for geometric tests."""
    profiles = np.asarray(profiles, dtype=float)
    k, p = profiles.shape
    if n_modalities is None:
        n_modalities = (2,) * (p // 2)
    sizes = np.full(k, n_rows // k) if sizes is None else np.asarray(sizes)
    pi = sizes / sizes.sum()
    return SiloSummary(silo=name, n_rows=n_rows, n_modalities=n_modalities, schema_fingerprint="test",
                       cluster_sizes=sizes, pi_draws=pi[None, :], profile_draws=profiles[None],
                       pi_estimate=pi, profile_estimate=profiles, n_clusters_posterior=np.array([0.0, 1.0]))


def binary_profiles(points):
    """Flat profiles of binary variables whose coordinates (docs/design.md §5.1) are ``points``: (K, D)."""
    pts = np.atleast_2d(np.asarray(points, dtype=float))
    out = np.empty((pts.shape[0], 2 * pts.shape[1]))
    out[:, 0::2] = pts
    out[:, 1::2] = 1 - pts
    return out


@functools.cache
def appendix_a(design, separability, seed, n_draws=100):
    """(data, summaries, local posteriors, local labels) with local partitions set to the truth."""
    from vcmc.research.simulate import simulate_design

    data = simulate_design(design, separability, rng=seed)
    codes = [s.codes for s in data.silos]
    summaries, locals_, local_labels = appendix_a_silos(codes, data.labels, data.n_modalities,
                                                        n_draws=n_draws, rng=seed + 1000,
                                                        names=[s.name for s in data.silos])
    return data, summaries, locals_, local_labels


def divergence_for(data, locals_):
    return in_process_divergence(list(zip([s.codes for s in data.silos], locals_, strict=True)),
                                 data.n_modalities)


def permute_clusters(summary, perm):
    """The same summary with its local clusters relabelled: new cluster i is old cluster perm[i]."""
    perm = np.asarray(perm)
    return summary.with_changes(
        cluster_sizes=summary.cluster_sizes[perm], pi_draws=summary.pi_draws[:, perm],
        profile_draws=summary.profile_draws[:, perm], pi_estimate=summary.pi_estimate[perm],
        profile_estimate=summary.profile_estimate[perm],
        counts=None if summary.counts is None else summary.counts[perm])


@pytest.fixture(scope="session")
def mh():
    """Matching test helpers (conftest modules are not importable under --import-mode=importlib)."""
    return types.SimpleNamespace(make_summary=make_summary, binary_profiles=binary_profiles,
                                 appendix_a=appendix_a, divergence_for=divergence_for,
                                 permute_clusters=permute_clusters, canonical_pairs=canonical_pairs)


def canonical_pairs(matching, summaries):
    """The partition of (silo name, cluster profile) pairs induced by a matching, order free."""
    groups = {}
    for s, summ in enumerate(summaries):
        for l, g in enumerate(matching.assignment[s]):
            key = (summ.silo, tuple(np.round(summ.profile_estimate[l], 12)))
            groups.setdefault(int(g), set()).add(key)
    return {frozenset(v) for v in groups.values()}
