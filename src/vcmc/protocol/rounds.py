"""Messages of the global-informed rounds: a blocked Gibbs sampler of the pooled model (docs/design.md §16).

After the one-shot pass the server runs the Gibbs sampler of the model of all silos' rows together, with
the two blocks split across the boundary: the allocations of a silo's rows given the weights and profiles
are drawn inside the silo; the weights and profiles given the allocations are drawn by the server from the
summed counts. Every reply is a table of whole-silo sums (per component, per component and modality), the
table a one-shot summary also holds; nothing has a dimension equal to the silo's row count.

- ``RoundBirthRequest`` -> ``RoundBirthReply``: how many of the silo's rows worst explained by their one-shot
  cluster have each profile column as their least probable value (the candidates of new components).
- ``RoundStartRequest`` -> ``RoundCountsReply``: the silo starts its rows' allocations from its one-shot
  labels, mapped to components by the server (``start[label]``: each global cluster of each silo its own
  component), its worst-explained rows in the birth components the server chose, and returns their counts.
- ``RoundSweepRequest`` -> ``RoundCountsReply``: one sweep of the rows' allocations at the server's draw of
  the weights and profiles; the counts of the new allocation.
- ``RoundFinishRequest`` -> ``AssignReply``: the rows' memberships (allocation probabilities averaged over
  the kept rounds) restricted to the components the server keeps; labels and memberships stay in the silo.
- ``RoundAssessRequest`` -> ``AssessReply``: the model assessment (predictive checks, WAIC, occupancy) at
  kept rounds' draws, in the analyst's own session only.

Under secure aggregation (``aggregation.round_secure_sum``, docs/design.md §16, "Secure aggregation"), a
``RoundKeyRequest`` -> ``RoundKeyReply`` first collects each silo's public key, the start request hands every
silo all of them, and every counts reply leaves the silo as a ``RoundMaskedCountsReply``: the table plus
pairwise masks that cancel only in the sum over the silos, so the server learns the sum and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.assess import AssessReply
from vcmc.protocol.assign import AssignReply
from vcmc.protocol.message import Reply, Request

ROUNDS = ("rounds", "secure-rounds")
"""The strategies of the rounds' requests: the operator allows them with or without secure aggregation
("rounds") or only under it ("secure-rounds")."""


@dataclass(frozen=True)
class RoundKeyReply(Reply):
    """``public_key`` (32,) uint8: the silo's X25519 public key for this run's masks."""

    KIND = "round_key_reply"
    VERSION = 1

    public_key: np.ndarray


PUBLIC_KEY_BYTES = 32
"""Length of a raw X25519 public key (``RoundKeyReply.public_key``, the rows of ``RoundStartRequest.peer_keys``)."""


@dataclass(frozen=True)
class RoundKeyRequest(Request, action="round_key", reply=RoundKeyReply, budget=1, strategies=ROUNDS):
    """Secure aggregation's set-up: the silo draws a fresh X25519 key pair for this run's rounds (the private
    key stays in the silo) and returns the public key. ``n_silos``: how many silos the sum will be over."""

    VERSION = 1

    n_silos: int


@dataclass(frozen=True)
class RoundBirthReply(Reply):
    """``counts`` (P,): per profile column, the silo's worst-explained rows whose least probable value it is."""

    KIND = "round_birth_reply"
    VERSION = 1

    counts: np.ndarray


@dataclass(frozen=True)
class RoundBirthRequest(Request, action="round_birth", reply=RoundBirthReply, budget=1, strategies=ROUNDS):
    """Births of the rounds' start (docs/design.md §16, "Births"): the silo scores every row by how surprising
    it is for its one-shot cluster (under the mean of the global profile draws it labelled its rows with) and
    counts, among the ``share`` of its rows scored worst, the rows whose least probable value is each profile
    column (``vcmc.rows.births``). Nothing the server chooses enters the scores."""

    VERSION = 1

    share: float


@dataclass(frozen=True)
class RoundCountsReply(Reply):
    """Counts of the silo's current allocation: ``cluster`` (C,) rows per component, ``modality`` (C, P)
    observed cells per component and modality column (missing cells skipped)."""

    KIND = "round_counts_reply"
    VERSION = 1

    cluster: np.ndarray
    modality: np.ndarray


@dataclass(frozen=True)
class RoundMaskedCountsReply(Reply):
    """A ``RoundCountsReply`` under secure aggregation: ``masked`` (C + C P,) uint64, the silo's counts
    (``pack_counts``, as int64 in two's complement) plus its pairwise masks modulo 2^64. One silo's vector is
    uniformly distributed whatever its counts; the vectors of all silos sum to the packed sum of their
    tables (``unpack_counts``)."""

    KIND = "round_masked_counts_reply"
    VERSION = 1

    masked: np.ndarray


def pack_counts(cluster: np.ndarray, modality: np.ndarray) -> np.ndarray:
    """The integer vector a masked counts reply carries: ``cluster`` (C,) then ``modality`` (C, P) by row.
    Counts of rows are whole numbers (DP noise included: discrete); anything else is refused."""
    flat = np.concatenate([np.asarray(cluster, dtype=np.float64).ravel(),
                           np.asarray(modality, dtype=np.float64).ravel()])
    whole = np.rint(flat)
    if not np.all(np.isfinite(flat)) or np.any(whole != flat) or np.any(np.abs(whole) >= 2.0**62):
        raise ValueError("secure aggregation sums whole counts only; a round's table held other values")
    return whole.astype(np.int64)


def unpack_counts(packed: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """``pack_counts`` reversed: (cluster (C,), modality (C, P)) as float64."""
    packed = np.asarray(packed, dtype=np.int64)
    c = int(n_components)
    if packed.size < c or (packed.size - c) % c:
        raise ValueError(f"a packed table of {c} components cannot have {packed.size} entries")
    return packed[:c].astype(np.float64), packed[c:].reshape(c, -1).astype(np.float64)


@dataclass(frozen=True)
class RoundStartRequest(Request, action="round_start", reply=(RoundCountsReply, RoundMaskedCountsReply),
                        budget=1, strategies=ROUNDS):
    """Start the rounds: the allocation of a row with one-shot label k is component ``start[k]`` (``start``
    has one entry per global cluster of the one-shot result), of ``n_components``. ``silo_weight_prior``
    (version 2): 0, the memberships are the rows' allocation probabilities under the server's weights (the
    pooled model's); above 0, under the silo's own weights of the components, at each kept round the
    posterior mean ``(a + n_sc) / (C a + n_s)`` given the allocation the silo drew in that round, with this
    ``a`` (``aggregation.round_labels = "silo"``, docs/design.md §16). The draws are the same either way.
    ``peer_keys`` (version 3; (S, 32) uint8, or None without secure aggregation): every silo's public key
    (``RoundKeyReply``) in the run's silo order, ``peer_index`` this silo's row of it; every counts reply of
    the rounds is then masked (``RoundMaskedCountsReply``). Births (version 4; docs/design.md §16): with
    ``birth_share`` above 0, the silo's misfits as a ``RoundBirthRequest`` of that share finds them whose
    least probable value is ``birth_columns[i]`` start in component ``birth_components[i]`` instead."""

    VERSION = 4

    start: np.ndarray
    n_components: int
    silo_weight_prior: float = 0.0
    peer_keys: np.ndarray | None = None
    peer_index: int = -1
    birth_share: float = 0.0
    birth_columns: np.ndarray | None = None
    birth_components: np.ndarray | None = None


@dataclass(frozen=True)
class RoundSweepRequest(Request, action="round_sweep", reply=(RoundCountsReply, RoundMaskedCountsReply),
                        budget=20000, strategies=ROUNDS):
    """One sweep at the server's draw: ``log_pi`` (C,) and ``log_profiles`` (C, P), the log weights and the
    log category probabilities of every component. ``keep``: the result keeps this round's draw (a round after
    the burn-in, at most 1,000 of them evenly spaced), so the silo adds its rows' allocation probabilities
    under it to their memberships. The silo's stream is
    ``SeedSequence(seed_entropy, spawn_key=spawn_key)``. ``inverse_temperature`` (version 2; burn-in rounds
    only, 1 in a kept round): the rows are drawn from their conditional raised to this power and
    renormalised (docs/design.md §16)."""

    VERSION = 2

    round: int
    log_pi: np.ndarray
    log_profiles: np.ndarray
    keep: bool
    seed_entropy: int
    spawn_key: tuple[int, ...]
    inverse_temperature: float = 1.0


@dataclass(frozen=True)
class RoundFinishRequest(Request, action="round_finish", reply=AssignReply, budget=1, strategies=ROUNDS):
    """End of the rounds: ``keep`` (K,) the components that are the global clusters, in their order. Each row's
    membership of cluster k is its averaged allocation probability of component ``keep[k]``, renormalised
    over the kept components; its label the most probable cluster."""

    VERSION = 1

    keep: np.ndarray


@dataclass(frozen=True)
class RoundMoveReply(Reply):
    """The silo's part of a split-merge proposal: ``log_q`` the sum over its rows of the log proposal
    probabilities (a sum over rows, like every count), and for a split ``cluster_b`` the rows drawn to b and
    ``modality_b`` (P,) their observed cells per modality column (0 and zeros for a merge)."""

    KIND = "round_move_reply"
    VERSION = 1

    log_q: float
    cluster_b: float
    modality_b: np.ndarray


@dataclass(frozen=True)
class RoundMoveRequest(Request, action="round_move", reply=RoundMoveReply, budget=20000, strategies=ROUNDS):
    """A split-merge proposal between two components ``a`` and ``b`` (docs/design.md §16, "Split-merge
    moves"), made on the allocation after the last sweep. The split probabilities of a row are
    ``P(a) = rho f_a(x) / (rho f_a(x) + (1 - rho) f_b(x))`` with the profiles ``log_profile_a``,
    ``log_profile_b`` (P,) and ``log_rho``, ``log_1m_rho`` (logs of rho and 1 - rho). ``kind`` "merge": the
    silo returns the sum over its rows in a or b of the log of the probability of their current component
    (nothing changes yet). "split": every row of a is drawn to a or b with these probabilities (the silo's
    stream ``SeedSequence(seed_entropy, spawn_key=spawn_key)``) and the silo returns the sum of the log
    probabilities of the draws and the counts of the rows drawn to b. Nothing changes in the silo either
    way: the next sweep draws every row afresh given the server's next draw, which the server makes from
    the counts of the state it accepted."""

    VERSION = 1

    kind: str
    a: int
    b: int
    log_profile_a: np.ndarray
    log_profile_b: np.ndarray
    log_rho: float
    log_1m_rho: float
    seed_entropy: int
    spawn_key: tuple[int, ...]


@dataclass(frozen=True)
class RoundAssessRequest(Request, action="round_assess", reply=AssessReply, budget=1, strategies=ROUNDS):
    """The model assessment after the rounds (docs/design.md §14 and §16): an ``AssessRequest`` at R of the
    kept rounds' draws. ``log_profiles`` (R, C, P) are those rounds' profile draws exactly as their sweep
    requests sent them (the silo checks each against the kept rounds it answered), ``keep`` (K,) the
    components that are the result's global clusters, in its order, ``pi`` (R, K) this silo's weights of
    them at each draw; ``pairs``, ``seed_entropy`` and ``spawn_key`` as in an ``AssessRequest``. Answered by
    an ``AssessReply``, in the analyst's own session only."""

    VERSION = 1

    log_profiles: np.ndarray           # (R, C, P)
    keep: np.ndarray                   # (K,) int
    pi: np.ndarray                     # (R, K)
    pairs: np.ndarray                  # (E, 2) int
    seed_entropy: int
    spawn_key: tuple[int, ...]
