"""A rough estimate of what a fit writes, and the check that the folder has room for it (before sampling)."""

from __future__ import annotations

import shutil
from pathlib import Path

from vcmc.outputs.folder import OutputError


def estimate_bytes(config, silos, *, resume: bool, save_summaries: bool) -> dict[str, int]:
    """A rough estimate of what the run writes, by kind, with 5 clusters per silo and overall (at most C+):
    the check is there to stop a run that cannot fit, not to refuse one that probably does."""
    c = min(config.prior.n_components, 5)
    p = int(sum(silos[0].schema.n_modalities))
    draws = config.sampler.n_kept * config.sampler.n_chains
    if config.postprocess.summary_draws:
        draws = min(draws, config.postprocess.summary_draws)
    n = sum(s.n_rows for s in silos)
    per_draw = 8 * c * (1 + p)
    out = {"posterior.nc": draws * per_draw + 65_536, "assignments.csv": n * 24 + 4096,
           "profiles.csv": c * p * 80 + 4096, "result.json": 65_536 + 2_048 * len(silos)}
    if resume:   # each silo's state: its summary's draws, the same draws kept locally, memberships
        out["silo-state"] = sum(2 * draws * per_draw + s.n_rows * (8 * c + 16) for s in silos)
    if save_summaries:
        out["summaries"] = len(silos) * draws * per_draw
    return out


def check_free_space(out: Path, needed: dict[str, int]) -> None:
    free = shutil.disk_usage(out).free
    total = sum(needed.values())
    if free < total:
        parts = ", ".join(f"{k} ~{v / 2**20:.1f} MB" for k, v in needed.items())
        raise OutputError(f"--out {out}: {free / 2**20:.1f} MB free, the run writes up to about "
                          f"{total / 2**20:.1f} MB ({parts}); free some space or choose another --out")
