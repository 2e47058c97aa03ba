"""One parser for the CLI, the API and the Flower run config: same FitConfig from every spelling."""

import json

import pytest

from vcmc.config import (
    FitConfig,
    MatchingConfig,
    PriorConfig,
    PrivacyConfig,
    SamplerConfig,
    config_from_mapping,
    config_to_mapping,
)
from vcmc.exceptions import ConfigError


def test_flat_dotted_hyphenated_keys_as_flower_gives_them():
    cfg = config_from_mapping({"sampler.n-iter": 2000, "sampler.burn-in": 1000, "prior.beta": [0.5, 1],
                               "privacy.dp-epsilon": "none", "matching.radius": 0.3,
                               "matching.method": "hungarian", "min-nodes": 4, "out-dir": "/x"},
                              ignore=("min_nodes", "out-dir"))
    assert cfg.sampler == SamplerConfig(n_iter=2000, burn_in=1000)
    assert cfg.prior == PriorConfig(beta=(0.5, 1.0))
    assert cfg.privacy.dp_epsilon is None
    assert cfg.matching == MatchingConfig(method="hungarian", radius=0.3)


def test_nested_sections_and_to_dict_json_round_trip():
    cfg = FitConfig(prior=PriorConfig(beta=(0.5, 2.0), alpha=0.1), privacy=PrivacyConfig(dp_epsilon=1.5),
                    matching=MatchingConfig(radius="finite", reference="silo_2"))
    assert config_from_mapping(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert config_from_mapping(config_to_mapping(cfg)) == cfg
    assert config_from_mapping({}) == FitConfig()


def test_string_values_from_a_command_line_are_coerced():
    cfg = config_from_mapping({"sampler": {"n_iter": "500", "burn_in": "100"},
                               "privacy": {"share-counts": "false", "round_to": 5.0}})
    assert cfg.sampler.n_iter == 500 and cfg.privacy.share_counts is False and cfg.privacy.round_to == 5


def test_unknown_key_names_it_and_lists_valid_options():
    with pytest.raises(ConfigError, match=r"'sampler.n-iters'.*Valid options: n-iter, burn-in"):
        config_from_mapping({"sampler.n-iters": 10})
    with pytest.raises(ConfigError, match="Unknown configuration section 'samplers'"):
        config_from_mapping({"samplers.n-iter": 10})
    with pytest.raises(ConfigError, match="Unknown configuration key 'seed'"):
        config_from_mapping({"seed": 1})


def test_bad_value_type_and_range_errors_name_the_option():
    with pytest.raises(ConfigError, match=r"'sampler.n-iter' option \(SamplerConfig.n_iter\) must be an int"):
        config_from_mapping({"sampler.n-iter": "many"})
    with pytest.raises(ConfigError, match="one of 'calibrated', 'ball', 'hungarian', 'min-divergence'"):
        config_from_mapping({"matching.method": "kmeans"})
    with pytest.raises(ConfigError, match="'burn_in' parameter of SamplerConfig"):
        config_from_mapping({"sampler.n-iter": 10, "sampler.burn-in": 20})
