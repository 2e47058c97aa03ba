"""``vcmc superexec``: a site's SuperExec with a launch cap (``vcmc.flower.superexec``), beside a SuperNode
started with ``--isolation process`` (``vcmc supernode`` starts both)."""

from __future__ import annotations

import argparse

NAME = "superexec"
HELP = "run a site's Flower SuperExec with a cap on the ClientApps a host runs at once"
DESCRIPTION = (
    "Flower's SuperExec (flwr 1.42) for a SuperNode started with --isolation process, with an executor that "
    "starts at most --max-clientapps ClientApp processes at once on the host, counted over every SuperExec "
    "that shares --slots-dir: a task is claimed only when a slot is free, and the ClientApp holds the slot "
    "until it exits. Checks first that the installed Flower has the internals this relies on, and fails "
    "naming the Flower version and the internal otherwise (--check does only that). `vcmc supernode` starts "
    "the SuperNode and this SuperExec together; run this alone under your own supervisor. See "
    "docs/federation.md §3.6.")


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """The launch options shared with ``vcmc supernode``."""
    p.add_argument("--max-clientapps", type=int, default=0, metavar="N",
                   help="most ClientApp processes alive at once on this host, over every SuperExec sharing "
                        "--slots-dir (0: no cap). Where several sites share a host: its number of cores")
    p.add_argument("--slots-dir", metavar="DIR", default=None,
                   help="folder of the host's launch slots, the same for every site of the host (default: "
                        "$XDG_RUNTIME_DIR or /tmp, vcmc-launch-slots-<uid>)")
    p.add_argument("--poll-interval", type=float, default=None, metavar="S",
                   help="seconds between two claims of a task when idle (Flower's FLWR_SUPEREXEC_TASK_POLL_INTERVAL "
                        "if set, else 1); 0.2 s for 30 s after a ClientApp started, then back to it over 30 s")
    p.add_argument("--trusted-bundle", action="append", default=[], metavar="SHA256",
                   help="run only the app bundle (FAB) with this sha256 (repeatable): the pinned-bundle check of "
                        "docs/federation.md §3.7; a task of any other bundle is never started")
    p.add_argument("--flower-clientapp", action="store_true",
                   help="start ClientApps with Flower's own flwr-clientapp instead of vcmc's lighter launcher "
                        "(vcmc.flower.clientapp_main)")
    p.add_argument("--cold-clientapps", action="store_true",
                   help="start each ClientApp as a new interpreter instead of forking it from a warm process that "
                        "has Flower and vcmc imported (about 280 MB per site, held while the SuperExec runs; "
                        "docs/federation.md §3.6)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime-api-address", metavar="HOST:PORT", default="127.0.0.1:9094",
                   help="the SuperNode's Runtime API (its --host and --port)")
    tls = p.add_mutually_exclusive_group()
    tls.add_argument("--insecure", action="store_true",
                     help="the SuperNode's Runtime API is plain text (its default: no --ssl-certfile)")
    tls.add_argument("--root-certificates", metavar="CA", help="CA of the Runtime API's TLS certificate")
    p.add_argument("--superexec-auth-secret-file", metavar="FILE", default=None,
                   help="the secret shared with the SuperNode (its --superexec-auth-secret-file)")
    p.add_argument("--parent-pid", type=int, default=None, metavar="PID",
                   help="end when this process (the SuperNode) ends")
    add_common_arguments(p)
    p.add_argument("--remove-after-start", metavar="DIR", default=None, help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true",
                   help="only check that the installed Flower has the internals the SuperExec relies on")
    p.add_argument("--bundle-hash", metavar="APP_DIR", default=None,
                   help="only print the sha256 of the app bundle (FAB) Flower builds from APP_DIR (what flwr run "
                        "sends; the value --trusted-bundle pins after the app was reviewed)")


def run(args) -> int:
    from vcmc.flower.superexec import check_flower_internals, run_superexec

    if args.bundle_hash is not None:
        import hashlib
        from pathlib import Path

        from flwr.cli.build import build_fab_from_disk

        from vcmc.exceptions import ConfigError

        app = Path(args.bundle_hash)
        if not (app / "pyproject.toml").is_file():
            raise ConfigError(f"--bundle-hash {str(app)!r}: not a Flower app folder (no pyproject.toml)")
        print(hashlib.sha256(build_fab_from_disk(app)).hexdigest())  # noqa: T201
        return 0
    if args.check:
        check_flower_internals()
        from vcmc.flower.superexec import FLOWER_SERIES

        print(f"vcmc superexec: the installed Flower has the {FLOWER_SERIES}x internals the launch cap "  # noqa: T201
              "relies on")
        return 0
    if not args.insecure and args.root_certificates is None:
        from vcmc.exceptions import ConfigError

        raise ConfigError("say how the SuperNode's Runtime API is reached: --insecure (plain text, the SuperNode's "
                          "default) or --root-certificates CA (its --ssl-certfile's CA)")
    run_superexec(args.runtime_api_address, insecure=args.insecure, root_certificates=args.root_certificates,
                  auth_secret_file=args.superexec_auth_secret_file, parent_pid=args.parent_pid,
                  max_clientapps=args.max_clientapps, slots_dir=args.slots_dir, poll_interval=args.poll_interval,
                  trusted_bundles=args.trusted_bundle, light_clientapp=not args.flower_clientapp,
                  warm=not args.cold_clientapps, remove_after_start=args.remove_after_start)
    return 0
