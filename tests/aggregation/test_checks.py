"""Profile estimates that the silos' fractionated priors dominate are flagged, and only those."""

import numpy as np
import pytest

from vcmc.aggregation import aggregate
from vcmc.aggregation.checks import describe_prior_dominated, prior_dominated_profiles
from vcmc.config import AggregationConfig, MatchingConfig, PriorConfig
from vcmc.matching import match, matched_draws
from vcmc.research.simulate import simulate
from vcmc.research.study.evaluate import appendix_a_silos

PREV = np.array([[0.7, 0.2, 0.6, 0.1, 0.5, 0.8, 0.3, 0.05],
                 [0.2, 0.7, 0.3, 0.8, 0.4, 0.1, 0.6, 0.05],
                 [0.5, 0.5, 0.9, 0.5, 0.1, 0.5, 0.9, 0.0]])     # condition 8 never occurs in cluster 3


def _fit(n_silos, n_per_silo, seed):
    prof = np.zeros((3, 16))
    prof[:, 0::2], prof[:, 1::2] = 1 - PREV, PREV
    data = simulate(n_per_silo=n_per_silo, weights=np.tile([0.5, 0.4, 0.1], (n_silos, 1)),
                    n_modalities=[2] * 8, profiles=prof, rng=seed)
    prior = PriorConfig()
    summaries, _, _ = appendix_a_silos([s.codes for s in data.silos], list(data.labels), data.n_modalities,
                                       prior=prior, n_draws=200, rng=seed)
    matching = match(summaries, MatchingConfig())
    agg = aggregate(matched_draws(summaries, matching), config=AggregationConfig(), prior=prior, rng=seed)
    found = prior_dominated_profiles(summaries, matching, agg.profile_draws, beta=prior.beta,
                                     n_modalities=data.n_modalities, pi_draws=agg.pi_draws)
    return data, matching, agg, found


def test_a_rare_condition_of_a_cluster_thin_in_every_silo_is_flagged():
    # 30 silos x 200: cluster 3 has about 20 members per silo and no case of condition 8. Each silo's draw
    # carries ~1 prior pseudo-person (beta' = 0.983), so the average sits near 1/22; the pooled posterior
    # given the partition, Beta(0.5, ~600), has mean 0.08%.
    data, matching, agg, found = _fit(30, 200, 1)
    assert matching.n_global == 3
    rare = [f for f in found if f["variable"] == 8 and f["modality"] == 2 and f["cluster"] is not None]
    assert len(rare) == 1 and rare[0]["count"] == 0
    assert rare[0]["estimate"] > 10 * rare[0]["pooled_counts_mean"]
    line = describe_prior_dominated(found)[0]
    assert "dominated by the silos' fractionated priors" in line and "from the pooled counts" in line


@pytest.mark.parametrize("seed", [2, 3])
def test_few_large_silos_raise_no_flag(seed):
    # 3 silos of 3,000: every silo holds ~300 members of cluster 3, its prior is one person in 300
    _, matching, _, found = _fit(3, 3000, seed)
    assert matching.n_global == 3
    assert found == []
