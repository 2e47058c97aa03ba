"""Real data shipped with the library, for examples and tests.

``ability.csv``: 16 ability items (reasoning, letter series, matrices, rotation) scored correct (1) or
incorrect (0) for 1,525 people, with missing answers (``NA``), from the SAPA web-based personality
assessment project (items of the public-domain International Cognitive Ability Resource), as distributed
in the R package ``psych`` (dataset ``ability``). The first column is a row identifier. Nobody simulated
it and its number of latent classes is unknown: it shows how the library behaves on real data, with real
missingness.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["ability_path"]


def ability_path() -> Path:
    """Path of ``ability.csv`` inside the installed package."""
    return Path(str(resources.files("vcmc.research.datasets").joinpath("ability.csv")))
