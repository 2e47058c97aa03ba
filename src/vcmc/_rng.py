"""Random number handling (docs/design.md §12.3): one ``rng`` argument, normalised once, split with ``spawn``."""

from __future__ import annotations

import numpy as np

RngLike = int | np.random.Generator | np.random.SeedSequence | None


def as_generator(rng: RngLike) -> np.random.Generator:
    """Return a Generator from an int seed, a SeedSequence, a Generator (returned as is) or None."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def as_seed_sequence(rng: RngLike) -> np.random.SeedSequence:
    """Return a SeedSequence; a Generator contributes fresh entropy drawn from it."""
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(int(rng.integers(0, 2**63 - 1)))
    return np.random.SeedSequence(rng)


def spawn_generators(rng: RngLike, n: int) -> list[np.random.Generator]:
    """``n`` independent child Generators (one per silo or chain): adding one never changes the others."""
    return [np.random.default_rng(s) for s in as_seed_sequence(rng).spawn(n)]


def root_entropy(rng: RngLike) -> int | None:
    """The root entropy to store in results so that a run can be repeated (None if not recoverable)."""
    if isinstance(rng, int):
        return rng
    if isinstance(rng, np.random.SeedSequence):
        ent = rng.entropy
        return int(ent) if isinstance(ent, int) else None
    return None
