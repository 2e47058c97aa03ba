"""The same ClientApp as flower_app/: every query answered by the installed library's ``client_handle``."""

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from vcmc.flower.client import client_handle

app = ClientApp()


@app.query("hello")
def hello(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("summarize")
def summarize(message: Message, context: Context) -> Message:
    return client_handle(message, context)
