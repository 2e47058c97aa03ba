"""What the operators of a Flower deployment read: the ServerApp's progress and warnings.

Flower 1.42 streams to ``flwr log`` whatever the ServerApp process writes to stdout and stderr (its
``flwr-serverapp`` process mirrors both streams into the log it uploads to the SuperLink), but Python's
logging prints nothing below WARNING without a handler, so vcmc's progress used to reach nobody.
``RunLog`` gives the ``vcmc`` loggers two handlers for the length of a run:

- one on the ServerApp's stderr: the lines appear in ``flwr log <run-id>`` (streaming or ``--show``);
- one into ``server.log`` in the run's result folder: the same lines, the file rewritten whole through
  ``vcmc.atomic`` after every line, so a reader (or a crash) never meets a half-written file. A run logs a
  few lines per stage and silo (repeated rounds are summarised), so rewriting stays cheap.

Python warnings raised during the run (a ``SiloDroppedWarning`` naming a dropped silo) go to the same two
places as they happen. The quality warnings ``vcmc fit`` prints after a run (matching artefacts,
prior-dominated profiles, silos left out) are printed by ``server_main`` in the same form,
``warning: ...``; the pipeline's INFO lines carrying the same texts are not repeated.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from pathlib import Path

from vcmc.atomic import atomic_write_text

__all__ = ["LOG_FILE", "RunLog", "format_bytes"]

LOG_FILE = "server.log"
"""Name of the ServerApp's log file in the run's ``out-dir``."""

_FORMAT = "%(asctime)s vcmc %(levelname)s: %(message)s"


def format_bytes(n: int) -> str:
    """``1234567`` -> ``"1.2 MB"`` (decimal units, as network figures are usually read)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


class _NotPipelineNotes(logging.Filter):
    """Drop the pipeline's INFO copies of the result's warnings (printed once, as ``warning: ...``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "vcmc.pipeline" and record.levelno < logging.WARNING)


class _AtomicFileHandler(logging.Handler):
    """Keeps the formatted lines and rewrites the whole file atomically after each one."""

    def __init__(self, path: Path):
        super().__init__(logging.INFO)
        self.path = path
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
            atomic_write_text(self.path, "\n".join(self.lines) + "\n")
        except Exception:  # noqa: BLE001 - a log line must never stop a run
            self.handleError(record)


class RunLog:
    """Context manager: the ``vcmc`` loggers write INFO and above to stderr and to ``out_dir/server.log``.

    ``stream`` defaults to the ``sys.stderr`` of the moment (Flower's mirrored stream in a ServerApp).
    Handlers, levels and the warnings hook are restored on exit, so running several runs in one process
    (tests) leaves nothing behind.
    """

    def __init__(self, out_dir, *, stream=None, logger: str = "vcmc"):
        self.path = Path(out_dir) / LOG_FILE
        self.stream = stream
        self.logger = logging.getLogger(logger)
        self._handlers: list[logging.Handler] = []

    def __enter__(self) -> RunLog:
        formatter = logging.Formatter(_FORMAT)
        formatter.converter = time.gmtime     # one clock for every host of a federation: UTC
        console = logging.StreamHandler(self.stream if self.stream is not None else sys.stderr)
        self.file = _AtomicFileHandler(self.path)
        for h in (console, self.file):
            h.setLevel(logging.INFO)
            h.setFormatter(formatter)
            h.addFilter(_NotPipelineNotes())
            self.logger.addHandler(h)
            self._handlers.append(h)
        self._level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self._showwarning = warnings.showwarning
        log = logging.getLogger(f"{self.logger.name}.warnings")

        def showwarning(message, category, filename, lineno, file=None, line=None):
            log.warning("%s: %s", category.__name__, message)

        warnings.showwarning = showwarning
        return self

    def __exit__(self, *exc) -> None:
        warnings.showwarning = self._showwarning
        for h in self._handlers:
            self.logger.removeHandler(h)
            h.close()
        self._handlers.clear()
        self.logger.setLevel(self._level)

    @property
    def lines(self) -> list[str]:
        """The lines written so far (what ``server.log`` holds)."""
        return list(self.file.lines)
