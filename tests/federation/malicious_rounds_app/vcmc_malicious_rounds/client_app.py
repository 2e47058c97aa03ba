"""The ClientApp as deployed (flower_app/): one query handler per request kind, each ``client_handle``."""

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from vcmc.flower.client import client_handle
from vcmc.protocol import registry

app = ClientApp()


def _register(action: str) -> None:
    @app.query(action)
    def handler(message: Message, context: Context) -> Message:
        return client_handle(message, context)


for _action in registry.actions():
    _register(_action)
