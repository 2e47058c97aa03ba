"""The model family seam: what every family of items provides, and the families (docs/design.md §17)."""

from vcmc.family.base import ROLES, Family
from vcmc.family.categorical import CATEGORICAL, CategoricalFamily

#: every family by its schema name
FAMILIES = {f.name: f for f in (CATEGORICAL,)}

__all__ = ["CATEGORICAL", "FAMILIES", "ROLES", "CategoricalFamily", "Family"]
