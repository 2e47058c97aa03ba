"""ClientApp: one query handler per request action, each a call of the installed vcmc library.

The handlers are registered from the protocol's registry (``vcmc.protocol.registry.actions``: every request
declares its action), so a new request needs nothing here. The silo's operator sets ``data-path`` (and
``schema-path``, ``silo-name``, ``out-dir`` for the silo's own memberships.csv and assignments.csv, disclosure
limits such as ``min-cluster-size`` and ``share-assessment``) in the SuperNode's node config; see
``docs/federation.md``.
"""

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from vcmc.flower.client import client_handle
from vcmc.protocol import registry

app = ClientApp()


def handle(message: Message, context: Context) -> Message:
    """Every request, whatever its action: ``client_handle`` decodes it and checks it arrived on its own
    action's handler."""
    return client_handle(message, context)


for _action in registry.actions():
    app.query(_action)(handle)
