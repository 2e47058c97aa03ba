"""The typed configuration a silo receives with its summarize request (``vcmc.protocol.silo_config``)."""

import dataclasses

import numpy as np
import pytest

from vcmc.config import AggregationConfig, FitConfig, PostprocessConfig, PriorConfig, PrivacyConfig, SamplerConfig
from vcmc.config.schema import options
from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.protocol import SiloConfig, SummarizeRequest, decode_message
from vcmc.protocol.silo_config import SILO_SECTIONS, silo_options

UNUSUAL = FitConfig(prior=PriorConfig(n_components=7, alpha=0.2, beta=(0.5, 1.0, 2.0), fractionate=False),
                    sampler=SamplerConfig(n_iter=3000, burn_in=700, thin=3, n_chains=2, stop="converged"),
                    postprocess=PostprocessConfig(merge_unresolved=True, min_local_size=4, summary_draws=0,
                                                  partition="psm"),
                    privacy=PrivacyConfig(min_cluster_size=12, suppress_cells_below=8, round_to=5,
                                          dp_epsilon=0.5, share_counts=False, sum_noise=0.2),
                    aggregation=AggregationConfig(strategy="design", rounds=40))


def _request(config: FitConfig = UNUSUAL) -> SummarizeRequest:
    return SummarizeRequest(config=SiloConfig.from_fit_config(config), n_silos=3, seed_entropy=2**100 + 1,
                            spawn_key=(0, 2))


def test_the_silo_config_is_the_silo_sections_of_the_fit_config():
    cfg = SiloConfig.from_fit_config(UNUSUAL)
    for name in SILO_SECTIONS:
        assert getattr(cfg, name) == getattr(UNUSUAL, name)
    assert (cfg.strategy, cfg.rounds) == ("design", 40)


@pytest.mark.parametrize("config", [FitConfig(), UNUSUAL], ids=["defaults", "unusual"])
def test_round_trip_through_the_flower_encoding(config):
    pytest.importorskip("flwr")
    from vcmc.flower.records import decode_record, encode_record

    req = _request(config)
    record = encode_record(req)
    back = decode_record(record)
    assert back == req
    assert back.config.sampler.n_iter == config.sampler.n_iter
    assert back.config.prior.beta == config.prior.beta
    assert back.config.privacy.dp_epsilon == config.privacy.dp_epsilon
    assert back.config.rounds == config.aggregation.rounds
    # every value is a typed scalar or a numeric array: no JSON text left for the silo to parse again
    for key, value in dict(record["scalars"]).items():
        assert not (isinstance(value, str) and value.lstrip().startswith(("{", "["))), key


def test_every_option_of_the_silo_sections_is_a_field_of_the_encoding():
    """Adding an option to a silo section adds it to the message (nothing to write in the protocol)."""
    keys = {k[len("config."):] for k in _request().to_arrays() if k.startswith("config.") and "__" not in k}
    announced = {"aggregation.strategy", "aggregation.rounds"}
    expected = {o.key for o in options() if o.section in SILO_SECTIONS} | announced
    assert keys == expected == {o.key for o in silo_options()}
    # the server-only sections stay with the server
    assert not any(k.startswith(("matching.", "assessment.")) for k in keys)


def test_an_unknown_option_in_the_configuration_is_refused():
    arrays = _request().to_arrays()
    with pytest.raises(InconsistentSiloSummaries, match=r"'sampler\.n-warmup'"):
        decode_message({**arrays, "config.sampler.n-warmup": 10})
    with pytest.raises(InconsistentSiloSummaries, match="matching.method"):
        decode_message({**arrays, "config.matching.method": "ball"})


def test_an_extra_field_of_the_request_is_refused():
    arrays = _request().to_arrays()
    with pytest.raises(InconsistentSiloSummaries, match="config_json"):
        decode_message({**arrays, "config_json": "{}"})


def test_a_missing_option_is_refused_and_a_missing_optional_one_is_none():
    arrays = _request().to_arrays()
    del arrays["config.sampler.n-iter"]
    with pytest.raises(InconsistentSiloSummaries, match="sampler.n-iter"):
        decode_message(arrays)
    arrays = _request().to_arrays()
    del arrays["config.privacy.dp-epsilon"]
    assert decode_message(arrays).config.privacy.dp_epsilon is None


def test_an_option_of_the_wrong_type_or_out_of_range_is_refused():
    arrays = _request().to_arrays()
    with pytest.raises(InconsistentSiloSummaries, match=r"'sampler\.n-iter' must be int; got a str"):
        decode_message({**arrays, "config.sampler.n-iter": "3000"})
    with pytest.raises(InconsistentSiloSummaries, match="must be int; got a float"):
        decode_message({**arrays, "config.sampler.n-iter": 3000.0})
    with pytest.raises(InconsistentSiloSummaries, match="bool"):
        decode_message({**arrays, "config.privacy.share-counts": 1})
    with pytest.raises(ConfigError, match="n_iter"):
        decode_message({**arrays, "config.sampler.n-iter": 0})
    with pytest.raises(ConfigError, match="strategy"):
        decode_message({**arrays, "config.aggregation.strategy": "everything"})


def test_the_old_json_version_is_refused_with_the_reason():
    old = {"__kind__": "summarize_request", "__version__": 1, "config_json": "{}", "n_silos": 3,
           "seed_entropy": 1, "spawn_key": np.array([0, 0])}
    with pytest.raises(InconsistentSiloSummaries, match=r"version 1; this vcmc understands version 2 .*JSON"):
        decode_message(old)
    arrays = _request().to_arrays()
    arrays["config.__version__"] = 99
    with pytest.raises(InconsistentSiloSummaries, match="'silo_config' message has version 99"):
        decode_message(arrays)


def test_a_request_is_built_from_a_silo_config_only():
    with pytest.raises(ConfigError, match="SiloConfig"):
        SummarizeRequest(config=FitConfig().to_dict(), n_silos=1, seed_entropy=1, spawn_key=(0,))
    with pytest.raises(ConfigError, match="SiloConfig.sampler"):
        dataclasses.replace(SiloConfig.from_fit_config(FitConfig()), sampler={"n_iter": 10})
