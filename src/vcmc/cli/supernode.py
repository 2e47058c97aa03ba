"""``vcmc supernode``: start a site's SuperNode the documented way (docs/federation.md §3.3 and §3.6)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vcmc.exceptions import ConfigError

NAME = "supernode"
HELP = "start this site's Flower SuperNode (TLS, authentication, launch cap) and its SuperExec"
DESCRIPTION = (
    "Starts flower-supernode (flwr 1.42; through vcmc.flower.supernode_main, which asks the SuperLink for "
    "messages sooner while a run is under way) for this site with --isolation process and, beside it, vcmc's "
    "SuperExec (vcmc superexec), which starts one ClientApp process per message, at most --max-clientapps at "
    "once over every site of this host that shares --slots-dir. The SuperNode reaches the SuperLink over TLS "
    "(--root-certificates, the federation's CA) and authenticates with the site's private key (--auth-key, "
    "whose public key the coordinator registered with flwr supernode register); --insecure is for a loopback "
    "test only. The node config is checked before anything starts (its keys, absolute paths, that the files "
    "exist). SuperNode and SuperExec share a secret made for this session, so no other local process can "
    "claim the site's tasks. This process becomes the SuperNode (its exit code, its signals: Ctrl-C or "
    "SIGTERM stops it, and the SuperExec ends with it). --dry-run prints the two commands instead.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from vcmc.cli.superexec import add_common_arguments

    p.add_argument("--superlink", required=True, metavar="HOST:PORT",
                   help="the SuperLink's address (a name or IP in its certificate's subjectAltName)")
    tls = p.add_mutually_exclusive_group(required=True)
    tls.add_argument("--root-certificates", metavar="CA", help="the federation's CA certificate (ca.crt)")
    tls.add_argument("--insecure", action="store_true",
                     help="plain text to the SuperLink: a loopback test only (no authentication possible)")
    p.add_argument("--auth-key", metavar="PRIVATE_KEY", default=None,
                   help="the site's private key (ssh-keygen -t ecdsa -b 384), whose .pub the coordinator registered "
                        "(SuperNode authentication; needs --root-certificates)")
    p.add_argument("--node-config", required=True, metavar="TEXT",
                   help="the site's node config: 'data-path=\"/abs/site.csv\" schema-path=\"/abs/schema.json\" "
                        "silo-name=\"site_a\" ...' (docs/federation.md §3.3), or a .toml file")
    p.add_argument("--host", default="127.0.0.1", metavar="HOST", help="address of the SuperNode's Runtime API")
    p.add_argument("--port", type=int, default=9094, metavar="PORT",
                   help="port of the SuperNode's Runtime API (each site of a host its own)")
    add_common_arguments(p)
    p.add_argument("--max-retries", type=int, default=None, metavar="N",
                   help="flower-supernode --max-retries (default: retry forever)")
    p.add_argument("--max-wait-time", type=float, default=None, metavar="S",
                   help="flower-supernode --max-wait-time (default: no limit)")
    p.add_argument("--flower-supernode", action="store_true",
                   help="start Flower's own flower-supernode, which asks the SuperLink for a message every 3 s when "
                        "it has none, instead of vcmc's launcher of it (every 0.2 s for 30 s after a message, then "
                        "back to 3 s: vcmc.flower.supernode_main; docs/federation.md §3.6)")
    p.add_argument("--dry-run", action="store_true", help="print the two commands and exit")


def commands(args, secret_file: str) -> tuple[list[str], list[str]]:
    """The SuperNode's and the SuperExec's command lines (the SuperExec's ``--parent-pid`` is added when the
    SuperNode's process id is known)."""
    if args.flower_supernode:
        bin_dir = Path(sys.executable).parent
        head = [shutil.which("flower-supernode", path=str(bin_dir)) or shutil.which("flower-supernode")
                or "flower-supernode"]
    else:
        head = [sys.executable, "-m", "vcmc.flower.supernode_main"]
    node = [*head, *(["--insecure"] if args.insecure else ["--root-certificates", args.root_certificates])]
    if args.auth_key:
        node += ["--auth-supernode-private-key", args.auth_key]
    node += ["--superlink", args.superlink, "--isolation", "process", "--host", args.host, "--port", str(args.port),
             "--superexec-auth-secret-file", secret_file, "--node-config", args.node_config]
    if args.max_retries is not None:
        node += ["--max-retries", str(args.max_retries)]
    if args.max_wait_time is not None:
        node += ["--max-wait-time", str(args.max_wait_time)]
    execs = [sys.executable, "-m", "vcmc", "superexec", "--runtime-api-address", f"{args.host}:{args.port}",
             "--insecure", "--superexec-auth-secret-file", secret_file, "--max-clientapps", str(args.max_clientapps)]
    if args.slots_dir:
        execs += ["--slots-dir", str(args.slots_dir)]
    if args.poll_interval is not None:
        execs += ["--poll-interval", f"{args.poll_interval:g}"]
    for h in args.trusted_bundle:
        execs += ["--trusted-bundle", h]
    if args.flower_clientapp:
        execs.append("--flower-clientapp")
    if args.cold_clientapps:
        execs.append("--cold-clientapps")
    return node, execs


def _check(args) -> None:
    from vcmc.flower.node_config import check_node_config, parse_node_config

    check_node_config(parse_node_config(args.node_config))
    if args.insecure and args.auth_key:
        raise ConfigError("--auth-key needs TLS: give --root-certificates CA instead of --insecure (Flower refuses "
                          "SuperNode authentication over plain text)")
    for flag, path in (("--root-certificates", args.root_certificates), ("--auth-key", args.auth_key)):
        if path and not Path(path).is_file():
            raise ConfigError(f"{flag} {path!r} does not exist")
    if args.max_clientapps < 0:
        raise ConfigError(f"--max-clientapps must be a whole number >= 0 (0: no cap); got {args.max_clientapps}")
    if not 1 <= args.port <= 65535:
        raise ConfigError(f"--port must be a TCP port (1-65535); got {args.port}")


def run(args) -> int:
    from vcmc.flower.superexec import check_flower_internals

    _check(args)
    check_flower_internals()          # before anything starts: a SuperNode whose SuperExec cannot run is no use
    if not args.flower_supernode:
        from vcmc.flower.supernode_main import check_supernode_internals

        check_supernode_internals()
    if args.dry_run:
        import shlex

        node, execs = commands(args, "SECRET_FILE")
        print(shlex.join(node))  # noqa: T201
        print(shlex.join([*execs, "--parent-pid", "SUPERNODE_PID"]))  # noqa: T201
        return 0
    # The SuperNode and the SuperExec authenticate each other with a secret made for this session, in a
    # private folder (0700) that the SuperExec removes once both have read it (its first claim request).
    private = tempfile.mkdtemp(prefix="vcmc-supernode-")
    secret_file = os.path.join(private, "superexec.secret")
    import secrets

    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(32))      # a session secret, not a statistical draw
    node_cmd, exec_cmd = commands(args, secret_file)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        # the SuperExec watches this process id, which the SuperNode keeps (exec below): it ends with the SuperNode
        subprocess.Popen([*exec_cmd, "--parent-pid", str(os.getpid()), "--remove-after-start", private])  # noqa: S603
        os.execv(node_cmd[0], node_cmd)       # this process becomes the SuperNode: its exit code, its signals
    except OSError as err:
        shutil.rmtree(private, ignore_errors=True)
        raise ConfigError(f"cannot start {node_cmd[0]!r}: {err.strerror or err}") from None
    return 1     # not reached: execv does not return
