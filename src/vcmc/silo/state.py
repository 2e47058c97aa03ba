"""What the gate remembers within a run (exported with the silo's state between Flower messages; discarded
with the run). Row-free: counts of requests, digests of announced draws, the run's secure-sum keys."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np


def digest_rows(a: np.ndarray) -> list[str]:
    """sha256 of each row's float64 bytes: a later request's draw must be byte-identical to an announced one."""
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    return [hashlib.sha256(a[i].tobytes()).hexdigest()[:32] for i in range(a.shape[0])]


@dataclasses.dataclass
class RunState:
    """The gate's memory of the current run."""

    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    summarized: bool = False
    strategy: str = ""
    beta: float = 0.5
    gaussian_prior: list[float] = dataclasses.field(default_factory=lambda: [0.01, 2.5, 0.75])
    """The summarize request's normal-inverse-gamma prior of Gaussian items (kappa0, a0, b0): the released
    draws of their means and variances are drawn from it given the released sums (docs/design.md §17.4)."""
    announced: bool = False
    assignment: list[int] | None = None
    n_global: int = 0
    pi_rows: list[str] = dataclasses.field(default_factory=list)
    profile_rows: list[str] = dataclasses.field(default_factory=list)
    out_dir_written: bool = False
    rounds_out_dir_written: bool = False
    noise_entropy: int = 0
    noise_key: list[int] = dataclasses.field(default_factory=list)
    n_releases: int = 0
    dp_releases: int = 0
    """Noised releases of this run (each one of the epsilon in force; ``vcmc.silo.release.spent``)."""
    run_recorded: bool = False
    """The run is in the operator's run ledger (``max-runs-per-day``): recorded at its first request that
    touches the rows (``Gate.admit``)."""
    sent_profile_mean: list[list[float]] = dataclasses.field(default_factory=list)
    """Mean of the profile draws of each local cluster as the summary sent them (K, P): the announcement is
    checked against what the silo sent, which under suppression or rounding are draws of the protected table."""
    sent_profile_radius: list[list[float]] = dataclasses.field(default_factory=list)
    """Per local cluster and variable (K, Q), how far (total variation) the sent draws lie from their mean."""
    secure_key: str = ""
    """Secure aggregation of the rounds (``vcmc.silo.secure_sum``): this run's X25519 private key (hex), the
    number of silos announced with it, the secret shared with every other silo (hex, the run's order; empty
    until a secure start, and the mark of a secure stream), this silo's index, the last round masked (each is
    answered once, in increasing order) and the digest its mask is bound to."""
    secure_n_silos: int = 0
    secure_secrets: list[str] = dataclasses.field(default_factory=list)
    secure_index: int = -1
    secure_round: int = 0
    secure_digest: str = ""
    gaussian_rows: list[str] = dataclasses.field(default_factory=list)
    """Digests of the announced global Gaussian draws (docs/design.md §17.6)."""
    kept_round_profiles: list[str] = dataclasses.field(default_factory=list)
    """Digests of the profile draws of the kept rounds this silo answered (the analyst's own session only:
    a round assess request must use some of them)."""
