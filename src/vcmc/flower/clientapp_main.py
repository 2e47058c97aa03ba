"""The ClientApp process that vcmc's SuperExec starts for each message (``vcmc.flower.superexec``).

``python -m vcmc.flower.clientapp_main --runtime-api-address ADDR --token T [--insecure | --root-certificates
CA] [--parent-pid PID]``: the command line of Flower's ``flwr-clientapp``, parsed by Flower's own argument
helpers, and Flower's own ``run_clientapp`` called with the same arguments, so the process does what
``flwr-clientapp`` does. What it leaves out is the import of the SuperNode's command-line package: the
``flwr-clientapp`` entry point lives in ``flwr.supernode.cli``, whose ``__init__`` imports the whole
``flower-supernode`` command (its SQL state, object store and web framework), which a ClientApp never runs.
That is half of the process's start-up before any vcmc code loads (measured in docs/results/flower/), and
it is paid once per message, so once per site and round of the global-informed rounds.

``vcmc.flower.superexec.check_flower_internals`` checks, when the SuperExec starts, that Flower's
``flwr_clientapp`` function and its argument parser are still the ones this module repeats.
"""

from __future__ import annotations

import argparse

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    """``flwr-clientapp``'s argument parser (flwr 1.42: ``_parse_args_run_flwr_clientapp``), built from
    Flower's own helpers."""
    from flwr.common.args import add_args_flwr_app_common
    from flwr.supercore.constant import SUPERNODE_DEFAULT_CLIENT_ADDRESS

    p = argparse.ArgumentParser(description="Run a Flower ClientApp (vcmc's launcher of flwr-clientapp)")
    p.add_argument("--runtime-api-address", dest="runtime_api_address", default=SUPERNODE_DEFAULT_CLIENT_ADDRESS,
                   type=str, help="Address of SuperNode's Runtime API")
    add_args_flwr_app_common(parser=p)
    return p


def main(argv: list[str] | None = None) -> None:
    """What ``flwr-clientapp`` does (flwr 1.42: ``flwr.supernode.cli.flwr_clientapp.flwr_clientapp``)."""
    from flwr.common.args import try_obtain_flwr_app_token
    from flwr.supercore.tls import validate_and_resolve_root_certificates
    from flwr.supernode.runtime.run_clientapp import run_clientapp

    args = parser().parse_args(argv)
    token = try_obtain_flwr_app_token(args)
    run_clientapp(runtime_api_address=args.runtime_api_address, token=token, insecure=args.insecure,
                  certificates=validate_and_resolve_root_certificates(args.root_certificates, args.insecure),
                  parent_pid=args.parent_pid, runtime_dependency_install=args.runtime_dependency_install)


if __name__ == "__main__":
    main()
