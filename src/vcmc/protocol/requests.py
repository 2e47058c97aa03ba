"""The whole silo boundary: the ``Silo`` protocol and its typed, versioned request/reply messages.

The server-side algorithms (matching, aggregation strategies, global partition) are written once against
``Silo``; whether a silo is an object in this process, a worker process or a hospital reached through
Flower is a matter of transport (docs/design.md §12.1). Every request and reply is a frozen ``Message`` with a
plain-array encoding; none has a dimension equal to a silo's row count.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.protocol.lca import LCA_MESSAGE_TYPES, LCA_REPLY_TYPE
from vcmc.protocol.message import Message
from vcmc.protocol.rounds import (
    ROUND_MESSAGE_TYPES,
    RoundAssessRequest,
    RoundBirthReply,
    RoundBirthRequest,
    RoundCountsReply,
    RoundFinishRequest,
    RoundKeyReply,
    RoundKeyRequest,
    RoundMaskedCountsReply,
    RoundMoveReply,
    RoundMoveRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.protocol.silo_config import SiloConfig
from vcmc.protocol.summary import SiloSummary


@dataclass(frozen=True)
class SummarizeRequest(Message):
    """Run the apply step and return a ``SiloSummary``.

    ``config`` is the typed ``SiloConfig`` (prior, sampler, post-processing, the disclosure limits the server
    asks for, which can only tighten the silo operator's own, and the aggregation strategy). The silo's
    random stream is ``SeedSequence(seed_entropy, spawn_key=spawn_key)``. Version 2: version 1 carried the
    configuration as JSON text (``config_json``), which a silo of this release refuses.
    """

    KIND = "summarize_request"
    VERSION = 2
    CLOSED = True

    config: SiloConfig
    n_silos: int
    seed_entropy: int
    spawn_key: tuple[int, ...]

    def __post_init__(self):
        if not isinstance(self.config, SiloConfig):
            raise ConfigError(f"SummarizeRequest.config must be a SiloConfig (SiloConfig.from_fit_config); got "
                              f"{type(self.config).__name__}")

    @classmethod
    def from_arrays(cls, arrays):
        version = arrays.get("__version__")
        if arrays.get("__kind__") == cls.KIND and version is not None and int(version) != cls.VERSION:
            raise InconsistentSiloSummaries(
                f"'summarize_request' message has version {int(version)}; this vcmc understands version "
                f"{cls.VERSION} (the configuration as a typed SiloConfig, no longer as JSON text). Upgrade the "
                "server and the silos to the same vcmc release.")
        if "config.__kind__" not in arrays and arrays.get("__kind__") == cls.KIND:
            raise InconsistentSiloSummaries("the summarize request has no configuration ('config')")
        return super().from_arrays(arrays)


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
    """Summed counts over the silo's rows.

    Soft mode: cluster (M, C), modality (M, C, P) and log-likelihood (M,). Hard mode: cluster (C,),
    modality (C, P) and an empty log-likelihood of shape (0,) (undefined without parameters).
    """

    KIND = "counts_reply"
    VERSION = 1

    cluster: np.ndarray
    modality: np.ndarray
    loglik: np.ndarray


@dataclass(frozen=True)
class AnnounceRequest(Message):
    """The run's global posterior draws, announced once per summary before any assign or assess request.

    ``assignment`` (K_s,) is the matching of this silo's local clusters, ``pi`` (T, C) this silo's weights
    of the global clusters (its own sent weight draws mapped through the matching) and ``profiles``
    (T', C, P) the global profile draws. The silo checks them against what it sent and answers later
    assign and assess requests only with these draws (docs/federation.md, "Threat model").
    """

    KIND = "announce_request"
    VERSION = 1

    assignment: np.ndarray             # (K_s,)
    n_global: int
    pi: np.ndarray                     # (T, C)
    profiles: np.ndarray               # (T', C, P)


@dataclass(frozen=True)
class AnnounceReply(Message):
    """The silo accepted the announced draws: how many of each it recorded."""

    KIND = "announce_reply"
    VERSION = 1

    n_pi_draws: int
    n_profile_draws: int


@dataclass(frozen=True)
class AssignRequest(Message):
    """Give the silo's rows their memberships of the global clusters; the silo keeps them (row-level).

    Without parameters the local posterior is propagated through ``assignment`` (a row's membership of a
    global cluster is its share of kept iterations in the local clusters mapped to it). With ``pi`` and
    ``profiles`` (draws of this silo's weights of the global clusters and of the global profiles) a row's
    membership is its allocation probability averaged over the draws. The label of a row is its most
    probable global cluster.
    """

    KIND = "assign_request"
    VERSION = 2

    assignment: np.ndarray             # (K_s,)
    n_global: int
    pi: np.ndarray | None = None       # (T, C) or (C,)
    profiles: np.ndarray | None = None  # (T, C, P) or (C, P)


@dataclass(frozen=True)
class AssignReply(Message):
    """Cluster-level summaries of the silo's memberships (sums over its rows; nothing row-level).

    ``counts`` (C,): rows labelled with each cluster; ``expected`` (C,): the sum of the memberships (the
    expected cluster sizes); ``probability`` (C,): the sum, over the rows labelled with each cluster, of
    their membership of it (divided by ``counts`` it is the average posterior probability of assignment);
    ``entropy``: the sum over rows of the entropy of their memberships (nats). Memberships averaged over
    draws: ``n_draws`` averaged (0: none, the local posterior propagated), ``mc_error`` the largest Monte
    Carlo standard error of a membership they leave, ``mc_target`` the error asked for.
    """

    KIND = "assign_reply"
    VERSION = 3

    counts: np.ndarray
    expected: np.ndarray | None = None
    probability: np.ndarray | None = None
    entropy: float = 0.0
    n_draws: int = 0
    mc_error: float = 0.0
    mc_target: float = 0.0


@dataclass(frozen=True)
class AssessRequest(Message):
    """Model assessment inside the silo under the global posterior (docs/design.md §14).

    ``pi`` holds draws of this silo's weights of the global clusters and ``profiles`` the global profile
    draws they were paired with (R draws: one replicated dataset each, and the draws of WAIC and of the
    number of clusters). ``pairs`` lists the flat profile columns ``(a, b)`` of the co-occurrence check,
    chosen by the server so that every silo checks the same pairs. The silo's random stream (replicated
    datasets, sampled allocations) is ``SeedSequence(seed_entropy, spawn_key=spawn_key)``.
    """

    KIND = "assess_request"
    VERSION = 1

    pi: np.ndarray                     # (R, C)
    profiles: np.ndarray               # (R, C, P)
    pairs: np.ndarray                  # (E, 2) int
    seed_entropy: int
    spawn_key: tuple[int, ...]


@dataclass(frozen=True)
class AssessReply(Message):
    """Whole-silo aggregates of the assessment: sums over the silo's rows, nothing per row.

    Counts (after the silo's suppression and rounding, applied alike to observed and replicated counts):
    ``n_observed`` (P,) rows with the column's variable observed; ``observed`` (P,) rows with each
    modality; ``replicated`` (R, P) the same in replicated dataset r (same missing cells as the data);
    ``pair_n_observed``, ``pair_observed`` (E,) and ``pair_replicated`` (R, E) the same for rows with both
    modalities of each pair. ``occupied`` (R, C), 0/1: whether any row of the silo falls in each global
    cluster when allocations are sampled at draw r. WAIC sums over the silo's ``n_rows`` rows of
    ``lppd_i = log mean_r p(x_i | theta_r)`` (``lppd``), ``v_i = var_r log p(x_i | theta_r)``
    (``p_waic``) and ``elpd_i = lppd_i - v_i`` (``elpd``), with ``elpd_m2`` the sum of squared deviations of
    ``elpd_i`` from their silo mean (for the standard error). ``n_suppressed``: counts suppressed.
    """

    KIND = "assess_reply"
    VERSION = 1

    n_rows: int
    n_observed: np.ndarray
    observed: np.ndarray
    replicated: np.ndarray
    pair_n_observed: np.ndarray
    pair_observed: np.ndarray
    pair_replicated: np.ndarray
    occupied: np.ndarray
    lppd: float
    p_waic: float
    elpd: float
    elpd_m2: float
    n_suppressed: int = 0


@dataclass(frozen=True)
class HelloRequest(Message):
    """Ask a silo who it is (its operator-chosen name, schema and library version); no data involved.

    Used by transports that reach silos they did not create (worker processes, Flower SuperNodes) to map
    their own handles (a process, a Flower node id) to silo names.
    """

    KIND = "hello_request"
    VERSION = 1

    protocol_version: int = 1


@dataclass(frozen=True)
class HelloReply(Message):
    """The silo's name, the fingerprint and modality counts of its schema, and its vcmc version."""

    KIND = "hello_reply"
    VERSION = 1

    silo: str
    schema_fingerprint: str
    n_modalities: tuple[int, ...]
    vcmc_version: str


@dataclass(frozen=True)
class ErrorReply(Message):
    """A request failed inside the silo. ``reason`` is sanitised: it never carries data values.

    ``error_type`` is the exception class name (e.g. ``"DataError"``). The silo's operator finds the full
    traceback in the silo's own log (logger ``vcmc.silo``).
    """

    KIND = "error_reply"
    VERSION = 1

    error_type: str
    reason: str


@runtime_checkable
class Silo(Protocol):
    """What the server can ask a silo (docs/design.md §12.1)."""

    name: str

    def summarize(self, request: SummarizeRequest) -> SiloSummary: ...

    def membership_divergence(self, request: DivergenceRequest) -> DivergenceReply: ...

    def counts(self, request: CountsRequest) -> CountsReply: ...

    def assign(self, request: AssignRequest) -> AssignReply: ...

    def assess(self, request: AssessRequest) -> AssessReply: ...


MESSAGE_TYPES: tuple[type[Message], ...] = (
    SummarizeRequest, SiloSummary, DivergenceRequest, DivergenceReply, CountsRequest, CountsReply,
    AssignRequest, AssignReply, AssessRequest, AssessReply, HelloRequest, HelloReply, ErrorReply,
    AnnounceRequest, AnnounceReply,
    *LCA_MESSAGE_TYPES,
    *ROUND_MESSAGE_TYPES,
)
"""Every message that may cross the silo boundary (the row-level test walks this tuple)."""

MESSAGE_BY_KIND: dict[str, type[Message]] = {m.KIND: m for m in MESSAGE_TYPES}

REPLY_TYPE: dict[type[Message], type[Message] | tuple[type[Message], ...]] = {
    SummarizeRequest: SiloSummary,
    DivergenceRequest: DivergenceReply,
    CountsRequest: CountsReply,
    AssignRequest: AssignReply,
    AssessRequest: AssessReply,
    HelloRequest: HelloReply,
    AnnounceRequest: AnnounceReply,
    **LCA_REPLY_TYPE,
    RoundStartRequest: (RoundCountsReply, RoundMaskedCountsReply),     # masked under secure aggregation
    RoundSweepRequest: (RoundCountsReply, RoundMaskedCountsReply),
    RoundFinishRequest: AssignReply,
    RoundMoveRequest: RoundMoveReply,
    RoundKeyRequest: RoundKeyReply,
    RoundBirthRequest: RoundBirthReply,
    RoundAssessRequest: AssessReply,
}
"""The reply type each request expects, or the tuple of the types it may be (any request may also be answered
by an ``ErrorReply``)."""


def decode_message(arrays: Mapping[str, object]) -> Message:
    """Rebuild any message from its ``to_arrays()`` encoding, dispatching on ``__kind__``.

    Raises
    ------
    InconsistentSiloSummaries
        If the kind is unknown, the version differs from this vcmc's, or the fields are malformed.
    """
    kind = arrays.get("__kind__")
    if isinstance(kind, np.ndarray) and kind.ndim == 0:
        kind = kind.item()
    cls = MESSAGE_BY_KIND.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InconsistentSiloSummaries(
            f"unknown message kind {kind!r}; this vcmc understands {sorted(MESSAGE_BY_KIND)}")
    plain = {k: (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "USbifu"
                 and k in _SCALAR_KEYS.get(cls, ()) else v) for k, v in arrays.items()}
    try:
        return cls.from_arrays(plain)
    except (InconsistentSiloSummaries, ConfigError):
        # a kind, version or field refused, or an option out of its range (the config dataclasses' own
        # message, naming the option): said as it is
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise InconsistentSiloSummaries(
            f"malformed {kind!r} message: {type(exc).__name__} while decoding its fields") from None


def _scalar_keys(cls: type[Message]) -> tuple[str, ...]:
    """Field names (and the header) whose values are scalars, so 0-d arrays read from disk become scalars."""
    hints = typing.get_type_hints(cls)
    keys = ["__kind__", "__version__"]
    for f in dataclasses.fields(cls):
        alts = typing.get_args(hints[f.name]) or (hints[f.name],)
        if not any(a is np.ndarray for a in alts) and typing.get_origin(hints[f.name]) is not tuple:
            keys.append(f.name)
    return tuple(keys)


_SCALAR_KEYS: dict[type[Message], tuple[str, ...]] = {m: _scalar_keys(m) for m in MESSAGE_TYPES}
