"""The silo-side cases of the catalogue through real Flower SuperNodes: what reaches the server carries no value.

A silo reads its own files. One real deployment on loopback (a SuperLink, three SuperNodes: one inferring its
schema from its file, one given ``schema.json`` as ``schema-path``, one with an ``id-column``) and a probe
ServerApp (``probe_app/``) that, case by case, puts the case's file where the SuperNode reads its data and
asks it for a hello: the SuperNode loads the file for every message. The ClientApp is the one deployed
(``vcmc.flower.client.client_handle``). Each case's test checks that the silo refused and that the reason
the server received names the error's class but no value of the file (the full message, values included,
stays in the silo's own log).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

# one worker runs the whole module, so its deployment (a module fixture) starts once under pytest -n 2
pytestmark = pytest.mark.xdist_group("catalogue-flower")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "federation"))
import cases  # noqa: E402
from flowerlab import Lab  # noqa: E402

APP = Path(__file__).parent / "probe_app"
SILO_SIDE = [c for c in cases.DATA_CASES if c.silo_side]
NODE_CONFIG = "min-cluster-size=5"


def _node_of(case) -> str:
    if "--id-column" in case.args:
        return "ids"
    return "with-schema" if case.schema_node or "schema.json" in case.files else "inferred"


def _silo_file(case) -> str:
    """The file this silo reads: the first of the case's CSV files that differs from the clean data."""
    clean = cases.base()
    for name, text in case.files.items():
        if name.endswith(".csv") and text != clean.get(name):
            return name
    return "a.csv"


def _plan(folder: Path) -> dict:
    clean = {"inferred": cases.clean(0), "with-schema": cases.clean(0),
             "ids": cases.with_column(0, "pid", range(cases.N_ROWS))}
    live = {n: folder / f"{n}.csv" for n in clean}
    restore = {}
    for n, text in clean.items():
        live[n].write_text(text)
        restore[str(live[n])] = folder / f"{n}.clean.csv"
        restore[str(live[n])].write_text(text)
    schema, schema_clean = folder / "schema.json", folder / "schema.clean.json"
    schema.write_text(cases.SCHEMA)
    schema_clean.write_text(cases.SCHEMA)
    plan_cases = []
    for case in SILO_SIDE:
        node, name = _node_of(case), _silo_file(case)
        src = folder / "cases" / case.id / name
        src.parent.mkdir(parents=True, exist_ok=True)
        text = case.files[name]
        src.write_bytes(text if isinstance(text, bytes) else text.encode())
        files = {str(live[node]): str(src)}
        back = {str(live[node]): str(restore[str(live[node])])}
        if node == "with-schema" and "schema.json" in case.files:
            (src.parent / "schema.json").write_text(case.files["schema.json"])
            files[str(schema)] = str(src.parent / "schema.json")
            back[str(schema)] = str(schema_clean)
        plan_cases.append({"id": case.id, "silo": node, "files": files, "restore": back})
    return {"n_nodes": 3, "cases": plan_cases, "out": str(folder / "probe.json"),
            "live": {k: str(v) for k, v in live.items()}, "schema": str(schema)}


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("flower-catalogue")
    plan = _plan(folder)
    (folder / "plan.json").write_text(json.dumps(plan))
    lab = Lab(folder, secure=False)
    try:
        lab.start_superlink()
        live = plan["live"]
        lab.start_supernode(f'data-path="{live["inferred"]}" silo-name="inferred" {NODE_CONFIG}', log="n1.log")
        lab.start_supernode(f'data-path="{live["with-schema"]}" schema-path="{plan["schema"]}" '
                            f'silo-name="with-schema" {NODE_CONFIG}', log="n2.log")
        lab.start_supernode(f'data-path="{live["ids"]}" id-column="pid" silo-name="ids" {NODE_CONFIG}',
                            log="n3.log")
        status, log = lab.run_app(APP, f'plan="{folder / "plan.json"}"', done_file=Path(plan["out"]),
                                  timeout=60 + 20 * len(SILO_SIDE))
        assert status == "finished:completed", f"status {status}; server log:\n{log}"
        yield json.loads(Path(plan["out"]).read_text())
    finally:
        lab.close()


def _cell_texts(case) -> set[str]:
    """Every cell and header text of the silo's file (and schema), as a value that must not cross."""
    text = case.files[_silo_file(case)]
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    out = {t.strip() for line in text.splitlines() for t in line.split(",")}
    return {t for t in out | set(case.values) if t}


@pytest.mark.slow
@pytest.mark.flower
def test_the_probe_reached_every_silo(probed):
    assert probed["discovered"] == ["ids", "inferred", "with-schema"] and probed["discovery_failures"] == []


@pytest.mark.slow
@pytest.mark.flower
@pytest.mark.parametrize("case", SILO_SIDE, ids=[c.id for c in SILO_SIDE])
def test_silo_side_case_through_a_supernode_sends_no_value(probed, case):
    got = probed["cases"][case.id]
    assert not got["ok"], f"the SuperNode accepted case {case.id}"
    # "error code 2: " is Flower's code for an exception in a ClientApp; the rest is what the silo said
    flower_code, _, reason = got["reason"].partition(": ")
    assert flower_code == "error code 2", got["reason"]
    assert re.search(r"(SchemaError|DataError): \1 raised inside the silo during query\.hello; details withheld "
                     r"from the server for disclosure control", reason), reason
    leaked = sorted(t for t in _cell_texts(case) if re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", reason))
    assert leaked == [], f"values of the silo's data in what the server received: {leaked}: {reason}"
