"""Imported first by the process pool's fork server (``set_forkserver_preload``), for one side effect.

A Ctrl-C in a terminal sends SIGINT to every process of the foreground group: the parent handles it (it
closes the pool and says what was kept), the workers ignore it, and so must the fork server, which
otherwise prints a ``KeyboardInterrupt`` traceback when the signal arrives while it imports the library.
Python's fork server ignores SIGINT itself only after its preload; this module, preloaded first, does it
before.
"""

import contextlib
import signal

with contextlib.suppress(ValueError):     # not in the main thread: nothing to do
    signal.signal(signal.SIGINT, signal.SIG_IGN)
