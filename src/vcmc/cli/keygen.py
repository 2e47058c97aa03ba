"""``vcmc keygen``: a silo's static key pair for the rounds' secure sums (docs/federation.md, "The rounds")."""

from __future__ import annotations

import argparse
from pathlib import Path

from vcmc.exceptions import ConfigError

NAME = "keygen"
HELP = "write a silo's key pair for the rounds' secure sums"
DESCRIPTION = (
    "Writes a fresh X25519 private key to KEY_FILE (hex, permissions 0600: it stays on the silo's host, named by "
    "the node config's 'rounds-key') and prints the public key as the line 'SILO=PUBLIC_KEY', which the operator "
    "gives to the other silos' operators for their node config 'rounds-peers' (a comma-separated list, or a file "
    "of such lines). With --public, prints the public line of an existing KEY_FILE instead. The key never passes "
    "through the server: pinning it is what stops a server from putting its own key in a peer's place.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("key_file", metavar="KEY_FILE", help="the private key's file (written, or read with --public)")
    p.add_argument("--silo-name", required=True, metavar="SILO",
                   help="this silo's name in the federation (its node config 'silo-name')")
    p.add_argument("--public", action="store_true", help="print the public line of an existing KEY_FILE")
    p.add_argument("--force", action="store_true", help="replace an existing KEY_FILE (its old key is lost)")


def run(args: argparse.Namespace) -> int:
    from vcmc.atomic import atomic_write_text
    from vcmc.silo import secure_sum

    name = str(args.silo_name).strip()
    if not name or any(c in name for c in "=,\n"):
        raise ConfigError(f"--silo-name: {args.silo_name!r} must be a non-empty name without '=', ',' or a newline")
    path = Path(args.key_file)
    if args.public:
        public = secure_sum.public_of(secure_sum.read_private_key(path))
    else:
        if path.exists() and not args.force:
            raise ConfigError(f"{str(path)!r} exists: a silo's key is made once (its public key is pinned by the "
                              "other operators); --force replaces it, and every peer must then pin the new one")
        private, public = secure_sum.new_key()
        atomic_write_text(path, private + "\n", mode=0o600)
    print(f"{name}={public}")  # noqa: T201  (the line the other operators pin)
    return 0
