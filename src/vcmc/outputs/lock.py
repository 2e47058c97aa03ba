"""The lock on an output folder: one run writes into a folder at a time.

``fcntl.flock`` on ``DIR/.vcmc-lock``, taken without waiting: a second run into the folder is refused at
once, naming the process that holds it. The kernel releases the lock when its process ends, however it
ends (``kill -9`` included), so the lock file a dead process leaves behind locks nothing: the next run
takes it ("stale locks recovered" needs no clean-up step, and no guess from a pid that may be reused).
A run that ends normally removes the lock file. Within one process the lock is re-entrant (a command run
twice by ``vcmc.cli.main`` in one Python session
holds it once) and released at exit or by :func:`release`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import os
import time
from pathlib import Path

from vcmc.exceptions import VcmcError

LOCK_NAME = ".vcmc-lock"

_held: dict[str, int] = {}     # resolved folder -> open descriptor holding its lock


class FolderBusy(VcmcError):
    """Another process is writing into the output folder."""


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(path.read_text(encoding="utf-8"))
        return f" (process {info.get('pid')}, {info.get('command', 'vcmc')}, since {info.get('since')})"
    return ""


def acquire(folder: Path, command: str = "vcmc") -> None:
    """Hold the lock of ``folder`` until :func:`release` or the end of the process; refuse when another
    process holds it."""
    key = str(Path(folder).resolve())
    if key in _held:
        return
    path = Path(key) / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise FolderBusy(f"--out {folder}: another vcmc run is writing there{_holder(path)}; wait for it to "
                             "finish, or choose another --out (two runs into one folder would mix their "
                             "results)") from None
        # the file may have been replaced between open and lock (a holder removing it): lock the one in place
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"pid": os.getpid(), "command": command,
                             "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
    _held[key] = fd


def release(folder: Path | None = None) -> None:
    """Release the lock of ``folder`` (every lock this process holds when None)."""
    keys = list(_held) if folder is None else [str(Path(folder).resolve())]
    for key in keys:
        fd = _held.pop(key, None)
        if fd is not None:
            # removed while still held, so that no result folder keeps it; a process that opened it just
            # before finds it gone once it has the lock, and locks a new one (acquire's inode check)
            with contextlib.suppress(OSError):
                os.unlink(Path(key) / LOCK_NAME)
            with contextlib.suppress(OSError):
                os.close(fd)      # closing the descriptor releases the flock


def holds(folder: Path) -> bool:
    return str(Path(folder).resolve()) in _held


atexit.register(release)
