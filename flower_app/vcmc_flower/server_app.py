"""ServerApp: runs VCMC over the connected silos. All logic lives in the installed vcmc library."""

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vcmc.flower.server import server_main

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    server_main(grid, context)
