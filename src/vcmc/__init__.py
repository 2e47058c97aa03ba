"""vcmc: federated Bayesian clustering of categorical and continuous data by Variational Consensus Monte Carlo.

The public API, imported on first use (``import vcmc`` stays cheap, and a silo's process loads only the
silo side)::

    import vcmc
    schema = vcmc.infer_schema(["a.csv", "b.csv"])
    silos = vcmc.read_silos(["a.csv", "b.csv"], schema=schema)
    result = vcmc.fit(silos, config=vcmc.FitConfig(), rng=1)
"""

from vcmc._version import __version__

_EXPORTS = {
    "fit": "vcmc.api",
    "FitConfig": "vcmc.config",
    "PriorConfig": "vcmc.config",
    "SamplerConfig": "vcmc.config",
    "PostprocessConfig": "vcmc.config",
    "PrivacyConfig": "vcmc.config",
    "MatchingConfig": "vcmc.config",
    "AggregationConfig": "vcmc.config",
    "config_from_mapping": "vcmc.config",
    "load_config_file": "vcmc.config",
    "GlobalResult": "vcmc.results",
    "Schema": "vcmc.data",
    "SiloData": "vcmc.data",
    "read_csv": "vcmc.data",
    "read_silos": "vcmc.data",
    "infer_schema": "vcmc.data",
    "from_dataframe": "vcmc.data",
    "simulate": "vcmc.research.simulate",
    "simulate_design": "vcmc.research.simulate",
    "FederatedLatentClassModel": "vcmc.estimator",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vcmc' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value          # later accesses are plain attribute lookups
    return value


def __dir__():
    return sorted(__all__)
