"""Every option of the pipeline: frozen dataclasses (``options``, where each option is defined), the table
of options read from them (``schema``) and the parser that builds them from plain mappings, TOML files and
Flower run configs (``mapping``)."""

from vcmc.config.mapping import SECTIONS, config_from_mapping, config_to_mapping, load_config_file
from vcmc.config.options import (
    AggregationConfig,
    AssessmentConfig,
    FitConfig,
    MatchingConfig,
    PostprocessConfig,
    PriorConfig,
    PrivacyConfig,
    SamplerConfig,
)

__all__ = ["SECTIONS", "AggregationConfig", "AssessmentConfig", "FitConfig", "MatchingConfig",
           "PostprocessConfig", "PriorConfig", "PrivacyConfig", "SamplerConfig", "config_from_mapping",
           "config_to_mapping", "load_config_file"]
