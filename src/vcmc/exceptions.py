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
    """A configuration argument is out of its valid range.

    ``option`` (``"PriorConfig.alpha"``), ``expected`` and ``got``, when set, are the parts of the message,
    so that a front end can say it in its own words (the CLI names the flag the user typed).
    """

    def __init__(self, message: str = "", *, option: str | None = None, expected: str | None = None,
                 got=None):
        super().__init__(message)
        self.option = option
        self.expected = expected
        self.got = got

    def __reduce__(self):   # keyword-only attributes survive pickling (process pools)
        return (_rebuild_config_error, (str(self), self.option, self.expected, self.got))


def _rebuild_config_error(message, option, expected, got):
    return ConfigError(message, option=option, expected=expected, got=got)


class FlowerInternalsChanged(VcmcError, RuntimeError):
    """The installed Flower lacks an internal that vcmc's SuperExec relies on (``vcmc.flower.superexec``); the
    message names the Flower version and the internal."""


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


class StateCacheError(VcmcError):
    """A silo's saved state (``DIR/silo-state``) belongs to another run or silo and was not used.

    Its text names the file, silo names, seeds and which parts of the key differ, never data values, so it
    may be sent to the server.
    """


class NotFittedError(VcmcError, AttributeError):
    """An estimator method needs ``fit`` to have been called first."""


class ConvergenceWarning(UserWarning):
    """An iterative procedure stopped before its convergence criterion was met."""


class ConvergenceError(VcmcError, RuntimeError):
    """An estimation did not converge or its information matrix is unusable (latent class analysis)."""
