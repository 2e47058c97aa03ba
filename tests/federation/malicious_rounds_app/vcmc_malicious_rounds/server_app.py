"""A malicious ServerApp: a modified server running the rounds' attacks of ``attacks.py`` against the deployed
ClientApp, and writing what came back to the plan's ``out`` file."""

import json
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vcmc_malicious_rounds.attacks import run_round_attacks

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    plan = json.loads(Path(str(context.run_config["plan"])).read_text())
    # the run id keys every silo's context digest: a server knows it, and uses it to forge what it can
    results = run_round_attacks(grid, plan, run_key=str(context.run_id))
    out = Path(plan["out"])
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(json.dumps(results))
    tmp.replace(out)
