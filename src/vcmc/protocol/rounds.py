"""Messages of the global-informed rounds: a blocked Gibbs sampler of the pooled model (docs/design.md §16).

After the one-shot pass the server runs the Gibbs sampler of the model of all silos' rows together, with
the two blocks split across the boundary: the allocations of a silo's rows given the weights and profiles
are drawn inside the silo; the weights and profiles given the allocations are drawn by the server from the
summed counts. Every reply is a table of whole-silo sums (per component, per component and modality), the
table a one-shot summary also holds; nothing has a dimension equal to the silo's row count.

- ``RoundStartRequest`` -> ``RoundCountsReply``: the silo starts its rows' allocations from its one-shot
  labels, mapped to components by the server (``start[label]``: each global cluster of each silo its own
  component), and returns their counts.
- ``RoundSweepRequest`` -> ``RoundCountsReply``: one sweep of the rows' allocations at the server's draw of
  the weights and profiles; the counts of the new allocation.
- ``RoundFinishRequest`` -> ``AssignReply``: the rows' memberships (allocation probabilities averaged over
  the kept rounds) restricted to the components the server keeps; labels and memberships stay in the silo.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.message import Message


@dataclass(frozen=True)
class RoundStartRequest(Message):
    """Start the rounds: the allocation of a row with one-shot label k is component ``start[k]`` (``start``
    has one entry per global cluster of the one-shot result), of ``n_components``. ``silo_weight_prior``
    (version 2): 0, the memberships are the rows' allocation probabilities under the server's weights (the
    pooled model's); above 0, under the silo's own weights of the components, at each kept round the
    posterior mean ``(a + n_sc) / (C a + n_s)`` given the allocation the silo drew in that round, with this
    ``a`` (``aggregation.round_labels = "silo"``, docs/design.md §16). The draws are the same either way."""

    KIND = "round_start_request"
    VERSION = 2

    start: np.ndarray
    n_components: int
    silo_weight_prior: float = 0.0


@dataclass(frozen=True)
class RoundSweepRequest(Message):
    """One sweep at the server's draw: ``log_pi`` (C,) and ``log_profiles`` (C, P), the log weights and the
    log category probabilities of every component. ``keep``: the round is after the rounds' burn-in, so the
    silo adds its rows' allocation probabilities under this draw to their memberships. The silo's stream is
    ``SeedSequence(seed_entropy, spawn_key=spawn_key)``. ``inverse_temperature`` (version 2; burn-in rounds
    only, 1 in a kept round): the rows are drawn from their conditional raised to this power and
    renormalised (docs/design.md §16)."""

    KIND = "round_sweep_request"
    VERSION = 2

    round: int
    log_pi: np.ndarray
    log_profiles: np.ndarray
    keep: bool
    seed_entropy: int
    spawn_key: tuple[int, ...]
    inverse_temperature: float = 1.0


@dataclass(frozen=True)
class RoundCountsReply(Message):
    """Counts of the silo's current allocation: ``cluster`` (C,) rows per component, ``modality`` (C, P)
    observed cells per component and modality column (missing cells skipped)."""

    KIND = "round_counts_reply"
    VERSION = 1

    cluster: np.ndarray
    modality: np.ndarray


@dataclass(frozen=True)
class RoundFinishRequest(Message):
    """End of the rounds: ``keep`` (K,) the components that are the global clusters, in their order. Each row's
    membership of cluster k is its averaged allocation probability of component ``keep[k]``, renormalised
    over the kept components; its label the most probable cluster."""

    KIND = "round_finish_request"
    VERSION = 1

    keep: np.ndarray


@dataclass(frozen=True)
class RoundMoveRequest(Message):
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

    KIND = "round_move_request"
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
class RoundMoveReply(Message):
    """The silo's part of a split-merge proposal: ``log_q`` the sum over its rows of the log proposal
    probabilities (a sum over rows, like every count), and for a split ``cluster_b`` the rows drawn to b and
    ``modality_b`` (P,) their observed cells per modality column (0 and zeros for a merge)."""

    KIND = "round_move_reply"
    VERSION = 1

    log_q: float
    cluster_b: float
    modality_b: np.ndarray


ROUND_MESSAGE_TYPES: tuple[type[Message], ...] = (RoundStartRequest, RoundSweepRequest, RoundCountsReply,
                                                 RoundFinishRequest, RoundMoveRequest, RoundMoveReply)
