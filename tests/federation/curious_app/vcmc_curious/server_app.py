"""A curious ServerApp: a modified server running the attacks of ``attacks.py`` against the deployed ClientApp."""

import json
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vcmc_curious.attacks import run_attacks

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    plan = json.loads(Path(str(context.run_config["plan"])).read_text())
    results = run_attacks(grid, plan)
    out = Path(plan["out"])
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(out)
