"""The whole silo boundary: the ``Silo`` protocol and its typed, versioned request/reply messages.

The server-side algorithms (matching, aggregation strategies, global partition) are written once against
``Silo``; whether a silo is an object in this process, a worker process or a hospital reached through
Flower is a matter of transport (architecture.md). Every request and reply is a frozen ``Message`` with a
plain-array encoding; none has a dimension equal to a silo's row count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from vcmc.messages import Message
from vcmc.silo.summary import SiloSummary


@dataclass(frozen=True)
class SummarizeRequest(Message):
    """Run the apply step and return a ``SiloSummary``.

    ``config_json`` is ``FitConfig.to_dict()`` as JSON (prior, sampler, post-processing; the silo's own
    disclosure limits, set by its operator, can only be tightened by the server's privacy section).
    The silo's random stream is ``SeedSequence(seed_entropy, spawn_key=spawn_key)``.
    """

    KIND = "summarize_request"
    VERSION = 1

    config_json: str
    n_silos: int
    seed_entropy: int
    spawn_key: tuple[int, ...]


@dataclass(frozen=True)
class DivergenceRequest(Message):
    """Minimum-divergence matching: cost of matching each local cluster to each reference cluster."""

    KIND = "divergence_request"
    VERSION = 1

    reference_pi: np.ndarray          # (C,)
    reference_profiles: np.ndarray    # (C, P)
    rule: str                         # "penalised" | "augmented"
    penalty_multiplier: float = 1.0


@dataclass(frozen=True)
class DivergenceReply(Message):
    """Cost matrix (K_s, C + K_s): columns C.. are the 'open a new cluster' options (inf off-diagonal)."""

    KIND = "divergence_reply"
    VERSION = 1

    cost: np.ndarray


@dataclass(frozen=True)
class CountsRequest(Message):
    """Counts at parameters chosen by the server (federated-gradient strategy).

    mode "soft": E-step soft counts at each of the M aggregated parameter draws (objective (b)).
    mode "hard": counts of the propagated local partition under ``assignment`` (objective (a)), the
    same for every draw.
    """

    KIND = "counts_request"
    VERSION = 1

    mode: str                          # "soft" | "hard"
    pi: np.ndarray | None = None       # (M, C)
    profiles: np.ndarray | None = None  # (M, C, P)
    assignment: np.ndarray | None = None  # (K_s,) local -> global
    n_global: int = 0


@dataclass(frozen=True)
class CountsReply(Message):
    """Summed counts: cluster (M, C), modality (M, C, P) and log-likelihood (M,) (soft mode)."""

    KIND = "counts_reply"
    VERSION = 1

    cluster: np.ndarray
    modality: np.ndarray
    loglik: np.ndarray


@dataclass(frozen=True)
class AssignRequest(Message):
    """Relabel the silo's rows with global clusters; the silo keeps the labels and returns counts.

    Without parameters the local partition is propagated through ``assignment``; with ``pi`` and
    ``profiles`` each row is reallocated to its most probable global cluster under them.
    """

    KIND = "assign_request"
    VERSION = 1

    assignment: np.ndarray             # (K_s,)
    n_global: int
    pi: np.ndarray | None = None       # (C,)
    profiles: np.ndarray | None = None  # (C, P)


@dataclass(frozen=True)
class AssignReply(Message):
    """Members of each global cluster in the silo, shape (C,)."""

    KIND = "assign_reply"
    VERSION = 1

    counts: np.ndarray


@runtime_checkable
class Silo(Protocol):
    """What the server can ask a silo (architecture.md, "What a silo can be asked")."""

    name: str

    def summarize(self, request: SummarizeRequest) -> SiloSummary: ...

    def membership_divergence(self, request: DivergenceRequest) -> DivergenceReply: ...

    def counts(self, request: CountsRequest) -> CountsReply: ...

    def assign(self, request: AssignRequest) -> AssignReply: ...


MESSAGE_TYPES: tuple[type[Message], ...] = (
    SummarizeRequest, SiloSummary, DivergenceRequest, DivergenceReply, CountsRequest, CountsReply,
    AssignRequest, AssignReply,
)
