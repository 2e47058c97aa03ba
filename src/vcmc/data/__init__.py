"""Data layer: the shared schema, readers (CSV, pandas, Parquet), validation and encoding to integer codes.

Every silo encodes its data with one shared :class:`Schema` (ordered variables, ordered modalities), so a
code means the same modality everywhere; missing values are coded ``vcmc.model.MISSING`` (-1) and keep
their rows. Typical use::

    schema = infer_schema(["silo_1.csv", "silo_2.csv"])    # or Schema.from_json("schema.json")
    silo = read_csv("silo_1.csv", schema=schema)           # SiloData(name="silo_1", codes=(n, Q) int16)
"""

from vcmc.data.readers import (
           from_dataframe,
           infer_schema,
           read_csv,
           read_parquet,
           read_rows,
           read_silos,
           split_by_column,
)
from vcmc.data.schema import DEFAULT_NA_VALUES, Schema, SiloData, Variable
from vcmc.data.validate import check_same_schema, validate_silo

__all__ = ["DEFAULT_NA_VALUES", "Schema", "SiloData", "Variable", "check_same_schema", "from_dataframe",
           "infer_schema", "read_csv", "read_parquet", "read_rows", "read_silos", "split_by_column",
           "validate_silo"]
