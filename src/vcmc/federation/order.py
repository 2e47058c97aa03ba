"""The one order of the silos in a run, whatever order they were given in (docs/design.md §12.1).

Silo ``s``'s random stream is ``SeedSequence(root, spawn_key=(0, s))`` and the server's matching, pairing
of draws and sums run over the silos in order, so a run's numbers depend on the silos' positions. To make
a result reproducible from the files alone, every entry point (``vcmc fit`` and ``vcmc.fit`` with any
transport, and the Flower ServerApp, whose SuperNodes arrive in no particular order) puts the silos in this
canonical order first: by name, comparing runs of digits as numbers (``silo_2`` before ``silo_10``, as a
person lists them), ties broken by the plain text so the order is total.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["canonical_order", "silo_sort_key"]

_DIGITS = re.compile(r"(\d+)")


def silo_sort_key(name: str) -> tuple:
    """Sort key of a silo name: text and numbers alternating (``"site_10b"`` -> ``("site_", 10, "b")``),
    then the name itself (``"site_01"`` and ``"site_1"`` compare equal by numbers, not by text)."""
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(str(name)) if p)
    return parts, str(name)


def canonical_order(names: Iterable[str]) -> list[str]:
    """The silo names in the canonical order (``silo_1, silo_2, ..., silo_10``)."""
    return sorted(names, key=silo_sort_key)
