"""Typed errors and warnings of vcmc.

Every message says what was expected, what was found and, where cheap, how to fix it. Errors raised
inside a silo and sent to the server must never carry data values (see ``vcmc.federation``).
"""


class VcmcError(Exception):
    """Base class of every error raised by vcmc."""


class DataError(VcmcError, ValueError):
    """Input data (a file, a column, a value) does not match what was expected."""


class SchemaError(DataError):
    """The schema (variables and their modalities) is invalid or silos disagree on it."""


class ConfigError(VcmcError, ValueError):
    """A configuration argument is out of its valid range."""


class InconsistentSiloSummaries(VcmcError, ValueError):
    """Summaries from different silos cannot be combined (schema, version, shapes)."""


class SiloFailure(VcmcError, RuntimeError):
    """A silo failed, timed out or returned a malformed reply. The message names the silo."""

    def __init__(self, silo: str, reason: str):
        super().__init__(f"silo {silo!r}: {reason}")
        self.silo = silo
        self.reason = reason


class DisclosureError(VcmcError):
    """The silo refuses to send a summary because disclosure control cannot be satisfied.

    Its text names thresholds only (never data values), so it may be sent to the server.
    """


class NotFittedError(VcmcError, AttributeError):
    """An estimator method needs ``fit`` to have been called first."""


class ConvergenceWarning(UserWarning):
    """An iterative procedure stopped before its convergence criterion was met."""
