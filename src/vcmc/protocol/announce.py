"""The announce family: the run's global posterior draws, announced to each silo once per summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.message import Reply, Request


@dataclass(frozen=True)
class AnnounceReply(Reply):
    """The silo accepted the announced draws: how many of each it recorded."""

    KIND = "announce_reply"
    VERSION = 1

    n_pi_draws: int
    n_profile_draws: int


@dataclass(frozen=True)
class AnnounceRequest(Request, action="announce", reply=AnnounceReply, budget=4):
    """The run's global posterior draws, announced once per summary before any assign or assess request.

    ``assignment`` (K_s,) is the matching of this silo's local clusters, ``pi`` (T, C) this silo's weights
    of the global clusters (its own sent weight draws mapped through the matching) and ``profiles``
    (T', C, P) the global profile draws. The silo checks them against what it sent and answers later
    assign and assess requests only with these draws (docs/federation.md, "Threat model").
    """

    VERSION = 1

    assignment: np.ndarray             # (K_s,)
    n_global: int
    pi: np.ndarray                     # (T, C)
    profiles: np.ndarray               # (T', C, P)
    gaussian: np.ndarray | None = None  # (T', C, 2G): the Gaussian items' means and variances (docs/design.md §17)
