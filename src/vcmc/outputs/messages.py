"""How a fit that cannot finish says so: one line when interrupted, one error when a write fails."""

from __future__ import annotations

import errno
import shlex
from pathlib import Path

from vcmc.outputs.folder import OutputError


def resume_command(argv: list[str], seed: int) -> str:
    """The command that runs this fit again: the user's own words, with the seed it used."""
    words = list(argv)
    if not any(w == "--seed" or w.startswith("--seed=") for w in words):
        words += ["--seed", str(seed)]
    return shlex.join(["vcmc", *words])


def interrupted_line(out: Path, argv: list[str], seed: int, *, resume: bool, n_silos: int) -> str:
    if not resume:
        return (f"vcmc fit: interrupted; nothing was kept (--no-resume); run again with: "
                f"{resume_command(argv, seed)}")
    state = out / "silo-state"
    # hidden names are the temporary files of writes that were cut short
    n_kept = len([p for p in state.glob("*.npz") if not p.name.startswith(".")]) if state.is_dir() else 0
    return (f"vcmc fit: interrupted; kept the finished sampling of {min(n_kept, n_silos)} of {n_silos} silo(s) "
            f"in {out / 'silo-state'}; resume with: {resume_command(argv, seed)}")


def write_error(err: OSError, out: Path, *, resume: bool) -> OutputError:
    """A failed write of the results as one clear error (the atomic writer left no partial file)."""
    what = {errno.ENOSPC: "the disk is full", errno.EFBIG: "a file grew beyond the file-size limit",
            errno.EDQUOT: "the disk quota is exceeded", errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied"}.get(err.errno, err.strerror or str(err))
    where = f" ({err.filename})" if getattr(err, "filename", None) else ""
    kept = ("the silos' finished sampling is kept in " + str(out / "silo-state") + ": free space and run the "
            "same command again to write the results without sampling again") if resume else \
        "with --no-resume the sampling was not kept"
    return OutputError(f"cannot write the results into {out}: {what}{where}. No result file was left half "
                       f"written (each is replaced only once complete); {kept}")
