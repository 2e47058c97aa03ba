"""The server's announcement of the run's global draws to every silo (before assign and assess).

Each silo receives the matching of its local clusters, its own weights of the global clusters (its sent
weight draws mapped through the matching) and the global profile draws; it checks them against what it sent
and answers the later assign and assess requests only with these draws (``vcmc.silo.gate``).
"""

from __future__ import annotations

import numpy as np

from vcmc.federation.faults import FaultPolicy, gather
from vcmc.protocol import AnnounceRequest


def announce_global_draws(transport, names, matching, matched, agg, policy: FaultPolicy | None = None) -> None:
    """Send one ``AnnounceRequest`` per silo; a silo that refuses stops the run (``SiloFailure``)."""
    policy = policy or FaultPolicy()
    profiles = np.asarray(agg.profile_draws, dtype=np.float64)
    reqs = {n: AnnounceRequest(assignment=np.asarray(matching.assignment[s], dtype=np.int64),
                               n_global=int(matching.n_global), pi=np.asarray(matched.pi[s], dtype=np.float64),
                               profiles=profiles, gaussian=getattr(agg, "gaussian_draws", None))
            for s, n in enumerate(names)}
    gather(transport, reqs, FaultPolicy(min_silos=None, timeout=policy.timeout), stage="announce")
