"""The ``vcmc`` command line: a thin layer that parses arguments into the config objects the API uses.

Each command lives in its own module of this package and defines ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; commands are discovered, so adding one touches no
other file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import pkgutil
import sys

from vcmc._version import __version__
from vcmc.exceptions import VcmcError


def _commands(only: str | None = None):
    """The command modules; with ``only`` (the command being run, when it names a module) just that one, so
    that a command does not pay for the imports of the others before it can check its arguments."""
    names = [info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")]
    if only in names:
        names = [only]
    mods = []
    for name in names:
        mod = importlib.import_module(f"{__name__}.{name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    order = ["demo", "simulate", "fit", "study", "report", "predict"]
    return sorted(mods, key=lambda m: (order.index(m.NAME) if m.NAME in order else len(order), m.NAME))


class RealDefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in the help, but not the ones that say nothing: "(default: None)" beside a flag whose help
    states its real default (a drawn seed, half of the iterations), "(default: False)" beside a switch."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or isinstance(action, argparse._StoreTrueAction):
            return action.help
        return super()._get_help_string(action)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vcmc",
        description="Federated Bayesian clustering of categorical data (Variational Consensus Monte Carlo).")
    parser.add_argument("--version", action="version", version=f"vcmc {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _commands(only):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           formatter_class=RealDefaultsHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    import signal

    words = list(sys.argv[1:] if argv is None else argv)
    command = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(only=command)
    args = parser.parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)   # the command as typed (resume lines)
    # Past a file-size limit (ulimit -f) the kernel would kill the process with SIGXFSZ, leaving a
    # temporary file behind and no message; ignored, the write fails with EFBIG and is reported.
    with contextlib.suppress(AttributeError, ValueError):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except VcmcError as err:
        print(f"vcmc {args.command}: error: {err}", file=sys.stderr)  # noqa: T201
        return 1
    except KeyboardInterrupt:   # a command that has nothing to keep (vcmc fit says what it kept itself)
        print(f"vcmc {args.command}: interrupted", file=sys.stderr)  # noqa: T201
        return 130
    finally:   # the output folders this command held (vcmc.outputs.lock), also when main() runs in a session
        from vcmc.outputs.lock import release

        release()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
