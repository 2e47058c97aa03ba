"""ServerApp of the probe: for each case of the plan, put the case's files where the silo reads its data (the
test plays the silo's operator: on loopback the ServerApp and the SuperNodes share one disk), send that silo
a hello request (a SuperNode loads its data for every message) and record what came back over Flower."""

import json
import shutil
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vcmc.flower.server import FlowerTransport, discover_silos, wait_for_nodes
from vcmc.protocol import HelloReply, HelloRequest

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    plan = json.loads(Path(str(context.run_config["plan"])).read_text())
    nodes = wait_for_nodes(grid, int(plan["n_nodes"]), timeout=120)
    names, failures = discover_silos(grid, nodes, timeout=120)
    transport = FlowerTransport(grid, names, default_timeout=120)
    results = {"discovered": sorted(names), "discovery_failures": [str(f) for f in failures], "cases": {}}
    for case in plan["cases"]:
        for dst, src in case["files"].items():
            shutil.copyfile(src, dst)
        reply = transport.call({case["silo"]: HelloRequest()})[case["silo"]]
        results["cases"][case["id"]] = ({"ok": True} if isinstance(reply, HelloReply) else
                                        {"ok": False, "reason": getattr(reply, "reason", str(reply))})
        for dst, src in case["restore"].items():
            shutil.copyfile(src, dst)
    out = Path(plan["out"])
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(out)
