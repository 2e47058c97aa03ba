"""``Silo``: what the server can ask a silo (docs/design.md §12.1).

The server-side algorithms (matching, aggregation strategies, global partition) are written once against
``Silo``; whether a silo is an object in this process, a worker process or a hospital reached through
Flower is a matter of transport.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from vcmc.protocol.assess import AssessReply, AssessRequest
from vcmc.protocol.assign import AssignReply, AssignRequest
from vcmc.protocol.counts import CountsReply, CountsRequest
from vcmc.protocol.divergence import DivergenceReply, DivergenceRequest
from vcmc.protocol.summarize import SiloSummary, SummarizeRequest


@runtime_checkable
class Silo(Protocol):
    """What the server can ask a silo."""

    name: str

    def summarize(self, request: SummarizeRequest) -> SiloSummary: ...

    def membership_divergence(self, request: DivergenceRequest) -> DivergenceReply: ...

    def counts(self, request: CountsRequest) -> CountsReply: ...

    def assign(self, request: AssignRequest) -> AssignReply: ...

    def assess(self, request: AssessRequest) -> AssessReply: ...
