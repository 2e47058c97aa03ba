"""Data layer: the shared schema, readers (CSV, pandas, Parquet), validation and encoding to integer codes.

Every silo encodes its data with one shared :class:`Schema` (ordered variables, ordered modalities), so a
code means the same modality everywhere; missing values are coded ``vcmc.model.MISSING`` (-1) and keep
their rows. Typical use::

    schema = infer_schema(["silo_1.csv", "silo_2.csv"])    # or Schema.from_json("schema.json")
    silo = read_csv("silo_1.csv", schema=schema)           # SiloData(name="silo_1", codes=(n, Q) int16)
"""

from importlib import import_module

__all__ = ["DEFAULT_NA_VALUES", "Schema", "SiloData", "Variable", "check_same_schema", "from_dataframe",
           "infer_schema", "read_csv", "read_parquet", "read_rows", "read_silos", "split_by_column",
           "validate_silo"]

# Names resolved on first use (PEP 562): importing any ``vcmc.data`` submodule runs this file, and the
# readers import pandas (and pyarrow), which a silo answering from its already-encoded codes (a Flower
# ClientApp after the run's first message, a worker process) does not need; benchmarks/flower.py
# (clientapp_cost) measures the difference.
_HOME = {**dict.fromkeys(("from_dataframe", "infer_schema", "read_csv", "read_parquet", "read_rows", "read_silos",
                          "split_by_column"), "vcmc.data.readers"),
         **dict.fromkeys(("DEFAULT_NA_VALUES", "Schema", "SiloData", "Variable"), "vcmc.data.schema"),
         **dict.fromkeys(("check_same_schema", "validate_silo"), "vcmc.data.validate")}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'vcmc.data' has no attribute {name!r}")
    value = getattr(import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
