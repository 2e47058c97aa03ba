"""Small clusters under structural zeros (the paper's Table 4, heterogeneous-poor designs).

The Appendix A setting (true local partitions, exact conjugate local draws from ``vcmc.research.study.oracle``),
Ball matching and the default aggregation. Cluster 6 lives in one silo only, so its global weight is
``omega^1_0 pi^1_6``: the pi block's weights must pool the silos by their sizes for it to be unbiased.
The paper reports relative biases of pi_6 of -0.198 (nested poor) and 0.009 (non-nested poor) for VCMC,
against -0.855 and -0.027 for full-data MCMC.
"""

import numpy as np
import pytest

from vcmc.aggregation import aggregate, aggregate_with_weights, uniform_weights
from vcmc.config import MatchingConfig, PriorConfig
from vcmc.matching import match, matched_draws
from vcmc.research.simulate import simulate_design
from vcmc.research.study.oracle import oracle_summary


def _pi6_relative_bias(design, seed, uniform=False):
    data = simulate_design(design, "poor", rng=seed)
    prior = PriorConfig()
    summaries = [oracle_summary(s.codes, data.n_modalities, lab, silo=s.name, prior=prior, n_silos=4,
                                n_draws=1000, rng=seed * 10 + i)
                 for i, (s, lab) in enumerate(zip(data.silos, data.labels, strict=True))]
    matching = match(summaries, MatchingConfig(method="ball"))
    matched = matched_draws(summaries, matching)
    res = (aggregate_with_weights(matched, uniform_weights(matched), rng=seed) if uniform
           else aggregate(matched, prior=prior, rng=seed))
    # oracle local clusters are the true labels present in the silo, in increasing order; true cluster 6
    # (index 5) is present in silo 0 only (nested) or in silo 1 (non-nested)
    silo = int(np.nonzero([np.any(lab == 5) for lab in data.labels])[0][0])
    local = int(np.searchsorted(np.unique(data.labels[silo]), 5))
    g = int(matching.assignment[silo][local])
    members = [int(np.unique(data.labels[s])[l]) for s in range(4)
               for l in np.nonzero(matching.assignment[s] == g)[0]]
    if set(members) != {5}:
        return None              # Ball merged cluster 6 with another one: no pi_6 estimate
    truth = data.global_weights[5]
    return (res.pi_draws[:, g].mean() - truth) / truth


@pytest.mark.slow
@pytest.mark.parametrize("design", ["nested", "non-nested"])
def test_small_cluster_weight_is_estimated_without_large_bias(design):
    rb = [_pi6_relative_bias(design, seed) for seed in range(4)]
    found = [r for r in rb if r is not None]
    assert len(found) >= 3, rb
    # well inside the paper's VCMC figures, and far from full MCMC's -0.855 in the nested design
    assert abs(np.mean(found)) < 0.15, rb
