"""Everything that crosses the silo boundary: typed, versioned messages with a plain-array encoding.

A leaf package imported by both sides: the silo side (``vcmc.silo``) and the server side (matching,
aggregation, the pipeline, the transports) share these definitions and nothing else.
"""

from vcmc.protocol.message import Message
from vcmc.protocol.requests import (
    MESSAGE_BY_KIND,
    MESSAGE_TYPES,
    REPLY_TYPE,
    AnnounceReply,
    AnnounceRequest,
    AssessReply,
    AssessRequest,
    AssignReply,
    AssignRequest,
    CountsReply,
    CountsRequest,
    DivergenceReply,
    DivergenceRequest,
    ErrorReply,
    HelloReply,
    HelloRequest,
    Silo,
    SummarizeRequest,
    decode_message,
)
from vcmc.protocol.silo_config import SiloConfig
from vcmc.protocol.summary import SiloSummary

__all__ = ["MESSAGE_BY_KIND", "MESSAGE_TYPES", "REPLY_TYPE", "AnnounceReply", "AnnounceRequest", "AssessReply",
           "AssessRequest", "AssignReply",
           "AssignRequest", "CountsReply", "CountsRequest", "DivergenceReply", "DivergenceRequest",
           "ErrorReply", "HelloReply", "HelloRequest", "Message", "Silo", "SiloConfig", "SiloSummary",
           "SummarizeRequest", "decode_message"]
