"""What a silo says when a request fails: the error's class and, for vetted types only, its text.

Everything a silo sends crosses the boundary, its errors too: a data error could quote a value of the data
("column 'diagnosis' has unexpected value ...") and is reduced to its class name; the full traceback goes
to the silo's own log (logger ``vcmc.silo``) for its operator.
"""

from __future__ import annotations

import logging

from vcmc.exceptions import (
    ConfigError,
    DisclosureError,
    InconsistentSiloSummaries,
    NotFittedError,
    StateCacheError,
)
from vcmc.protocol import ErrorReply

silo_log = logging.getLogger("vcmc.silo")

__all__ = ["sanitise_exception"]

# Exceptions whose text is built only from configuration, shapes and versions, never from data values, so
# it may cross the boundary. Any other exception (DataError, SchemaError, numpy errors, ...) could quote a
# value of the data and is reduced to its class name (docs/design.md §12.2).
_SAFE_TEXT: tuple[type[BaseException], ...] = (ConfigError, InconsistentSiloSummaries, NotFittedError,
                                               DisclosureError, StateCacheError)


def sanitise_exception(exc: BaseException, stage: str = "") -> ErrorReply:
    """The ``ErrorReply`` a silo sends for ``exc``: its class name and, for vetted types only, its text.

    The full traceback is logged inside the silo (logger ``vcmc.silo``) for the silo's operator.
    """
    silo_log.error("request %s failed inside the silo", stage or "?", exc_info=exc)
    name = type(exc).__name__
    if isinstance(exc, _SAFE_TEXT):
        text = str(exc)
    else:
        text = (f"{name} raised inside the silo{f' during {stage}' if stage else ''}; details withheld "
                "from the server for disclosure control (see the silo's log)")
    return ErrorReply(error_type=name, reason=text[:2000])
