"""ClientApp: one query handler per request kind, each a call of the installed vcmc library.

The silo's operator sets ``data-path`` (and ``schema-path``, ``silo-name``, ``out-dir`` for the silo's own
memberships.csv and assignments.csv, disclosure limits such as ``min-cluster-size`` and
``share-assessment``) in the SuperNode's node config; see ``docs/federation.md``.
"""

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


@app.query("divergence")
def divergence(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("counts")
def counts(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("assign")
def assign(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("assess")
def assess(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("announce")
def announce(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("lca_estep")
def lca_estep(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("lca_classify")
def lca_classify(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("lca_structural")
def lca_structural(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_start")
def round_start(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_sweep")
def round_sweep(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_finish")
def round_finish(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_move")
def round_move(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_key")
def round_key(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_assess")
def round_assess(message: Message, context: Context) -> Message:
    return client_handle(message, context)


@app.query("round_birth")
def round_birth(message: Message, context: Context) -> Message:
    return client_handle(message, context)
