"""Everything that crosses the silo boundary: typed, versioned messages with a plain-array encoding.

A leaf package imported by both sides: the silo side (``vcmc.silo``) and the server side (matching,
aggregation, the pipeline, the transports) share these definitions and nothing else. One module per request
family holds its requests and replies, each declaring itself (``vcmc.protocol.message.Request``); importing
this package registers them all, and ``vcmc.protocol.registry`` derives every table of the boundary from
them. None has a dimension equal to a silo's row count.
"""

from vcmc.protocol import lca, registry, rounds  # noqa: F401 - their requests register (vcmc.protocol.registry)
from vcmc.protocol.announce import AnnounceReply, AnnounceRequest
from vcmc.protocol.assess import AssessReply, AssessRequest
from vcmc.protocol.assign import AssignReply, AssignRequest
from vcmc.protocol.counts import CountsReply, CountsRequest
from vcmc.protocol.divergence import DivergenceReply, DivergenceRequest
from vcmc.protocol.hello import HelloReply, HelloRequest
from vcmc.protocol.message import ErrorReply, Message, Reply, Request
from vcmc.protocol.registry import decode_message
from vcmc.protocol.silo import Silo
from vcmc.protocol.silo_config import SiloConfig
from vcmc.protocol.summarize import SiloSummary, SummarizeRequest

__all__ = ["AnnounceReply", "AnnounceRequest", "AssessReply", "AssessRequest", "AssignReply", "AssignRequest",
           "CountsReply", "CountsRequest", "DivergenceReply", "DivergenceRequest", "ErrorReply", "HelloReply",
           "HelloRequest", "Message", "Reply", "Request", "Silo", "SiloConfig", "SiloSummary", "SummarizeRequest",
           "decode_message", "registry"]
