"""The SuperNode process that ``vcmc supernode`` starts: Flower's ``flower-supernode``, asking for messages sooner
while a run is under way (docs/federation.md §3.6, "What is left of a round").

``python -m vcmc.flower.supernode_main ARGS``: Flower's own ``flower_supernode`` command with the same arguments.
Flower 1.42's SuperNode loop (``flwr.supernode.start_client_internal.start_client_internal``) asks the SuperLink
for a message and, when there is none, sleeps 3 s before it asks again; after handing a message to its ClientApp it
looks for the reply every 0.5 s. Both are constants of the loop, not options. A round of the global-informed
rounds is one message per site whose work takes a fraction of a second (with warm ClientApps, ``vcmc.flower.warm``),
so the 3 s pause is most of a round: the next round's message waits for it at every site.

This launcher changes only those pauses, through the one name the loop reads them by (its module's ``time``):

- the pause between two empty asks is ``ACTIVE_PAUSE_SECONDS`` for ``ACTIVE_SECONDS`` after the last message
  this SuperNode received, then grows back to Flower's 3 s over ``RAMP_SECONDS`` (``vcmc.flower.superexec.
  ramped_pause``, the SuperExec's claims' pacing too; an idle SuperNode asks as often as Flower's does, so a host
  of many idle sites pays nothing more);
- the reply is looked for every ``REPLY_PAUSE_SECONDS`` (a read of the SuperNode's own state, no network).

``check_supernode_internals`` verifies first that the installed Flower's loop is the one read for this (an AST
digest of each function whose pauses are changed) and fails naming the Flower version and the function
otherwise; ``vcmc supernode --flower-supernode`` starts Flower's own command instead.
"""

from __future__ import annotations

import sys
import threading
import time

from vcmc.exceptions import FlowerInternalsChanged
from vcmc.flower.superexec import ACTIVE_POLL_SECONDS as ACTIVE_PAUSE_SECONDS
from vcmc.flower.superexec import ACTIVE_SECONDS, RAMP_SECONDS, ramped_pause

__all__ = ["ACTIVE_PAUSE_SECONDS", "ACTIVE_SECONDS", "RAMP_SECONDS", "REPLY_PAUSE_SECONDS", "PollClock",
           "check_supernode_internals", "main"]

REPLY_PAUSE_SECONDS = 0.1

FLOWER_IDLE_PAUSE = 3.0       # flwr 1.42: the loop's pause after an empty ask
FLOWER_REPLY_PAUSE = 0.5      # flwr 1.42: the pause between two looks for the ClientApp's reply

# AST digests (vcmc.flower.superexec.function_digest) of the functions whose pauses this changes, flwr 1.42.0
_READ = {
    "start_client_internal": "818c188d51a52935",
    "_push_messages": "827bc83c6e43fc8e",
}


class PollClock:
    """The ``time`` module as the SuperNode loop sees it: every name is the real module's but ``sleep``, whose
    two pauses of the loop are shortened while messages come (module docstring). ``received`` is called when the
    SuperNode pulled a message."""

    def __init__(self, real=time):
        self._real = real
        self._lock = threading.Lock()
        self._last = float("-inf")

    def __getattr__(self, name):
        return getattr(self._real, name)

    def received(self) -> None:
        with self._lock:
            self._last = self._real.monotonic()

    def pause(self, seconds: float) -> float:
        """The pause the loop takes where Flower's takes ``seconds``."""
        if seconds == FLOWER_REPLY_PAUSE:
            return REPLY_PAUSE_SECONDS
        if seconds != FLOWER_IDLE_PAUSE:
            return seconds
        with self._lock:
            quiet = self._real.monotonic() - self._last
        return ramped_pause(quiet, FLOWER_IDLE_PAUSE)

    def sleep(self, seconds: float) -> None:
        self._real.sleep(self.pause(seconds))


def check_supernode_internals() -> None:
    """Raise ``FlowerInternalsChanged`` unless the installed Flower's SuperNode loop is the one read for
    ``PollClock`` (each function's AST digest as recorded in ``_READ``)."""
    import functools
    import inspect

    from vcmc.flower.superexec import function_digest, internals_changed

    changed = functools.partial(internals_changed, part="vcmc's SuperNode launcher",
                                 instead="start Flower's own SuperNode (vcmc supernode --flower-supernode), which asks "
                                         "the SuperLink for a message every 3 s")

    try:
        import flwr.supernode.start_client_internal as loop
    except ImportError as err:
        raise changed("a module", f"{err}") from None
    source = inspect.getsource(loop)
    for name, digest in _READ.items():
        got = function_digest(source, name)
        if got != digest:
            raise changed(f"supernode/start_client_internal.py: {name}",
                          "its code changed since vcmc read its pauses" if got else "it is gone")
    if not hasattr(loop, "_pull_and_store_message") or getattr(loop, "time", None) is not time:
        raise changed("supernode/start_client_internal.py", "the loop no longer reads its pauses from `time`")


def install(loop=None) -> PollClock:
    """Give the SuperNode loop's module the ``PollClock`` and tell it of every message pulled."""
    if loop is None:
        import flwr.supernode.start_client_internal as loop
    clock = PollClock()
    pull = loop._pull_and_store_message

    def pulled(*args, **kwargs):
        run_id = pull(*args, **kwargs)
        if run_id is not None:
            clock.received()
        return run_id

    loop.time = clock
    loop._pull_and_store_message = pulled
    return clock


def main(argv: list[str] | None = None) -> None:
    """Flower's ``flower-supernode`` with ``argv``, its loop's pauses shortened while messages come."""
    try:
        check_supernode_internals()
    except FlowerInternalsChanged as err:
        print(f"vcmc supernode: {err}", file=sys.stderr)  # noqa: T201
        raise SystemExit(2) from None
    install()
    from flwr.supernode.cli import flower_supernode

    sys.argv = ["flower-supernode", *(sys.argv[1:] if argv is None else argv)]
    flower_supernode()


if __name__ == "__main__":
    main()
