"""SIGTERM (``kill``, a batch scheduler's time limit) and SIGHUP (a closed terminal) end a run like Ctrl-C:
the command's own handling of ``KeyboardInterrupt`` runs (what was kept, the command that resumes, exit
code 130), instead of an exit without a word that leaves temporary files behind."""

from __future__ import annotations

import contextlib
import signal
import threading

_SIGNALS = ("SIGTERM", "SIGHUP")


def _interrupt(signum, frame):   # noqa: ARG001
    raise KeyboardInterrupt(signal.Signals(signum).name)


def end_like_ctrl_c() -> None:
    """Install the handlers (main thread only; elsewhere, e.g. inside a notebook's worker thread, a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in _SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, _interrupt)
