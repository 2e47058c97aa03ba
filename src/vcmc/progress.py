"""Progress reporting: a bar with ETA on a terminal, silent in CI or when output is not a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from tqdm.auto import tqdm

ProgressCallback = Callable[[int], None]
"""Called with the number of units just completed (e.g. Gibbs iterations of a block)."""


def progress_enabled() -> bool:
    if os.environ.get("CI") or os.environ.get("VCMC_NO_PROGRESS"):
        return False
    return sys.stderr.isatty()


def progress_bar(total: int, desc: str, enabled: bool | None = None, unit: str = "it"):
    """A tqdm bar (use as a context manager; ``bar.update(k)`` is a ``ProgressCallback``)."""
    return tqdm(total=total, desc=desc, unit=unit, disable=not (progress_enabled() if enabled is None
                                                               else enabled), dynamic_ncols=True,
                smoothing=0.1)
