"""The latent class analysis over Flower (docs/design.md §15): SuperNodes that keep covariate and outcome
columns aside, the ServerApp's ``lca-*`` run config, and the result against ``vcmc fit --k`` in process."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from vcmc.cli import main  # noqa: E402
from vcmc.exceptions import ConfigError  # noqa: E402
from vcmc.lca.analysis import coding_text, parse_coding  # noqa: E402
from vcmc.lca.simulate import ITEMS, simulate_lca  # noqa: E402

APP_DIR = Path(__file__).resolve().parents[2] / "flower_app"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "federation"))

K, STARTS, EM_ITER, SEED = 3, 2, 40, 4
COVARIATES = "age:numeric,sex:categorical=f|m"
DISTAL = "death:categorical=0|1,score:numeric"


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    """The identity Flower gives a ServerApp process (needed to build Flower messages outside one)."""
    from flwr.supercore.task_identity import TaskIdentity

    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)


def _files(folder: Path, n=(120, 120, 120)):
    """Three silos of the simulated design (items, covariates age and sex, outcomes death and score) and the
    items' shared schema, beside them as ``vcmc fit`` finds it."""
    from vcmc.data import infer_schema

    sim = simulate_lca(n, missing=0.03, rng=11)
    paths = {}
    for i, df in enumerate(sim.frames):
        p = folder / f"site{i + 1}.csv"
        df.to_csv(p, index=False)
        paths[f"site{i + 1}"] = p
    schema = infer_schema([pd.read_csv(p, dtype=str, keep_default_na=False)[list(ITEMS)] for p in paths.values()],
                          na_values=("",))
    schema.to_json(folder / "schema.json")
    return paths, folder / "schema.json"


def _node_config(name, path, schema, **extra):
    """The operators allow the measurement model's rounds and the structural ones, and send scalar sums exact
    (``exact-scalars``: otherwise a deployment's log-likelihoods, entropies and structural sums leave on a grid,
    docs/federation.md, and the numbers differ from the analyst's own session by up to half a grid)."""
    return {"data-path": str(path), "schema-path": str(schema), "silo-name": name,
            "allow-strategies": "lca,lca-structural", "exact-scalars": "true",
            "covariates": "age,sex", "distal": "death,score", **extra}


class DirectGrid:
    """A ``Grid`` whose SuperNodes are the ClientApp handler in this process (``send_and_receive`` only), each
    with its own ``Context`` whose state persists between messages, as on a SuperNode. Every message passes
    through Flower's protobuf wire format (``message_to_proto`` -> bytes -> ``message_from_proto``), and
    ``seen`` keeps each (request, reply) as the other side received it."""

    def __init__(self, node_configs):
        from flwr.app import Context, RecordDict

        self.contexts = {n: Context(run_id=1, node_id=n, node_config=c, state=RecordDict(), run_config={})
                         for n, c in node_configs.items()}
        self.seen: list[object] = []

    def get_node_ids(self):
        return list(self.contexts)

    def send_and_receive(self, messages, timeout=None):
        from vcmc.flower.client import client_handle

        out = []
        for i, m in enumerate(messages):
            m.metadata.__dict__["_message_id"] = f"m{len(self.seen)}-{i}"    # as the SuperLink stamps it
            inbound = _wire(m)
            reply = _wire(client_handle(inbound, self.contexts[int(inbound.metadata.dst_node_id)]))
            self.seen.append((inbound, reply))
            out.append(reply)
        return out


def _wire(message):
    from flwr.common.serde import message_from_proto, message_to_proto
    from flwr.proto.message_pb2 import Message as ProtoMessage

    return message_from_proto(ProtoMessage.FromString(message_to_proto(message).SerializeToString()))


def _server_run(grid, run_config):
    from flwr.app import Context, RecordDict

    from vcmc.flower.server import server_main

    return server_main(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config))


def _in_process(paths, out):
    assert main(["fit", *map(str, paths.values()), "--k", str(K), "--covariates", "age,sex", "--distal",
                 "death,score", "--starts", str(STARTS), "--max-em-iterations", str(EM_ITER), "--seed", str(SEED),
                 "--min-best", "1", "--standard-errors", "complete-data", "--out", str(out)]) == 0
    return out


def _assert_same_analysis(flower: Path, local: Path, tol=1e-8):
    a, b = json.loads((flower / "lca.json").read_text()), json.loads((local / "lca.json").read_text())
    assert a["statistics"]["log_likelihood"] == pytest.approx(b["statistics"]["log_likelihood"], rel=1e-10)
    np.testing.assert_allclose(a["weights"], b["weights"], atol=tol)
    for name in ("covariates.csv", "distal.csv", "item_probabilities.csv", "distal_tests.csv"):
        fa, fb = pd.read_csv(flower / name), pd.read_csv(local / name)
        assert list(fa.columns) == list(fb.columns) and len(fa) == len(fb)
        numeric = fa.select_dtypes("number").columns
        np.testing.assert_allclose(fa[numeric].to_numpy(float), fb[numeric].to_numpy(float), atol=tol, rtol=0,
                                   err_msg=name)
        other = [c for c in fa.columns if c not in numeric]
        assert fa[other].astype(str).equals(fb[other].astype(str)), name


def test_coding_is_written_and_read_back_and_malformed_coding_is_refused():
    spec = parse_coding(COVARIATES, "lca-covariates")
    assert [(c.name, c.kind, c.levels) for c in spec.columns] == [("age", "numeric", ()), ("sex", "categorical",
                                                                                          ("f", "m"))]
    assert coding_text(spec) == COVARIATES
    for bad in ("age", "sex:categorical", "sex:categorical=f", "age:numeric=1|2", "age:numeric,age:numeric"):
        with pytest.raises(ConfigError, match="lca-covariates"):
            parse_coding(bad, "lca-covariates")


def test_in_process_fit_records_the_coding_a_run_config_states(tmp_path):
    paths, _ = _files(tmp_path)
    out = _in_process(paths, tmp_path / "local")
    settings = json.loads((out / "lca.json").read_text())["settings"]
    assert settings["covariate_coding"] == COVARIATES and settings["distal_coding"] == DISTAL


def test_serverapp_lca_equals_vcmc_fit_k_in_process(tmp_path):
    """The ServerApp's code path (server_main, FlowerTransport, Flower records, client_handle with the
    node config's columns) gives the in-process ``vcmc fit --k --covariates --distal`` numbers."""
    paths, schema = _files(tmp_path)
    grid = DirectGrid({10 + i: _node_config(n, p, schema) for i, (n, p) in enumerate(paths.items())})
    out = tmp_path / "flower"
    _server_run(grid, {"out-dir": str(out), "schema-path": str(schema), "seed": SEED, "min-nodes": 3,
                       "lca-k": K, "lca-covariates": COVARIATES, "lca-distal": DISTAL, "lca-starts": STARTS,
                       "lca-max-em-iterations": EM_ITER})
    _assert_same_analysis(out, _in_process(paths, tmp_path / "local"))
    assert (out / "schema.json").is_file() and (out / "forest.png").is_file()
    assert not (out / "result.json").exists()          # no Bayesian fit was run
    assert "latent class analysis of 3 silos" in (out / "server.log").read_text()


def test_serverapp_lca_compare_equals_vcmc_compare(tmp_path):
    """Every column but WAIC: in a deployment the silos' gate answers an assessment round only with announced
    draws, so the ServerApp's comparison has no WAIC (``lca-waic-draws`` 0 by default over Flower)."""
    paths, schema = _files(tmp_path)
    grid = DirectGrid({10 + i: _node_config(n, p, schema) for i, (n, p) in enumerate(paths.items())})
    out = tmp_path / "flower"
    _server_run(grid, {"out-dir": str(out), "schema-path": str(schema), "seed": SEED, "min-nodes": 3,
                       "lca-compare": "1-3", "lca-starts": STARTS, "lca-max-em-iterations": EM_ITER})
    local = tmp_path / "local"
    assert main(["compare", *map(str, paths.values()), "--k", "1-3", "--exclude", "age,sex,death,score",
                 "--starts", str(STARTS), "--max-em-iterations", str(EM_ITER), "--seed", str(SEED),
                 "--waic-draws", "20", "--min-best", "1", "--out", str(local)]) == 0
    a, b = pd.read_csv(out / "comparison.csv"), pd.read_csv(local / "comparison.csv")
    assert list(a.columns) == list(b.columns) and a.k.tolist() == [1, 2, 3]
    same = [c for c in a.columns if c != "waic"]
    np.testing.assert_allclose(a[same].to_numpy(float), b[same].to_numpy(float), rtol=1e-9, equal_nan=True)
    assert a.waic.isna().all() and b.waic.notna().all()
    assert (out / "comparison.png").is_file()


def test_a_column_the_operator_did_not_allow_is_refused_by_the_silo(tmp_path):
    paths, schema = _files(tmp_path)
    # site2's operator allows only age as a covariate: the covariate model asking for sex is refused there
    configs = {10 + i: _node_config(n, p, schema, **({"covariates": "age"} if n == "site2" else {}))
               for i, (n, p) in enumerate(paths.items())}
    configs[11]["distal"] = "death,score,sex"      # sex is still kept out of site2's clustering
    grid = DirectGrid(configs)
    # the refusal loses the covariate model, not the latent class model: lca.json says why (issue 46)
    _server_run(grid, {"out-dir": str(tmp_path / "o"), "schema-path": str(schema), "seed": SEED,
                       "min-nodes": 3, "lca-k": K, "lca-covariates": COVARIATES, "lca-starts": 1,
                       "lca-max-em-iterations": 5})
    refusals = [r.error.reason for m, r in grid.seen if r.has_error()]
    assert refusals and all("does not allow columns ['sex'] as covariates" in t for t in refusals)
    doc = json.loads((tmp_path / "o" / "lca.json").read_text())
    assert any("covariate model was not fitted" in w and "site2" in w for w in doc["warnings"])
    assert not (tmp_path / "o" / "covariates.csv").exists() and (tmp_path / "o" / "item_probabilities.csv").is_file()


def test_node_config_columns_are_kept_out_of_the_clustering_and_checked(tmp_path):
    from flwr.app import Context, RecordDict

    from vcmc.flower.client import _silo_for_message, read_node_data

    paths, schema = _files(tmp_path)
    cfg = _node_config("site1", paths["site1"], schema)
    data = read_node_data(cfg)
    assert list(data.schema.names) == list(ITEMS)
    context = Context(run_id=1, node_id=1, node_config=cfg, state=RecordDict(), run_config={})
    first = _silo_for_message(context)
    again = _silo_for_message(context)           # from the node state, not the file
    assert first.auxiliary.astype(object).equals(again.auxiliary.astype(object))
    assert list(first.auxiliary.columns) == ["age", "sex", "death", "score"]
    assert first.auxiliary["death"].isna().sum() == pd.read_csv(paths["site1"])["death"].isna().sum()
    with pytest.raises(ConfigError, match=r"columns \['weight'\]"):
        read_node_data({**cfg, "covariates": "age,weight"})
    with pytest.raises(ConfigError, match="both under 'covariates' and 'distal'"):
        read_node_data({**cfg, "distal": "age"})


def test_run_config_lca_errors_come_before_any_silo_is_asked(tmp_path):
    grid = DirectGrid({})
    with pytest.raises(ConfigError, match="need 'lca-k'"):
        _server_run(grid, {"out-dir": str(tmp_path), "lca-covariates": COVARIATES})
    with pytest.raises(ConfigError, match="lca-distal"):
        _server_run(grid, {"out-dir": str(tmp_path), "lca-k": 2, "lca-distal": "death"})
    assert grid.seen == []


def test_no_per_row_quantity_crosses_in_the_lca_flower_messages(tmp_path):
    """Every message of the ServerApp's latent class analysis (fixed K with covariates and outcomes, and the
    comparison), both ways, decoded from Flower's wire bytes: plain numeric arrays, none with a silo's row
    count (prime, 151) as a dimension or a multiple of it as its size; the only text is the columns' coding
    the run config stated; the silos' refusals carry no value of the data."""
    from vcmc.flower.records import decode_record
    from vcmc.protocol import lca

    n_rows = 151
    paths, schema = _files(tmp_path, n=(n_rows,) * 3)
    configs = {10 + i: _node_config(n, p, schema) for i, (n, p) in enumerate(paths.items())}
    # site3 keeps sex out of the clustering but refuses it as a covariate: its refusals cross too
    configs[12].update({"covariates": "age", "distal": "death,score,sex"})
    grid = DirectGrid(configs)
    for run in ({"lca-compare": "1-3"}, {"lca-k": K, "lca-distal": DISTAL},
                {"lca-k": K, "lca-covariates": COVARIATES}):
        try:
            _server_run(grid, {"out-dir": str(tmp_path / "o"), "schema-path": str(schema), "seed": SEED,
                               "min-nodes": 3, "lca-starts": 2, "lca-max-em-iterations": 20, **run})
        except Exception as exc:         # the covariate run stops at site3's refusal, naming it
            assert "lca-covariates" in run and "site3" in str(exc) and "as covariates" in str(exc)
    lca_kinds = {t.KIND for t in vars(lca).values() if isinstance(t, type) and t.__module__ == lca.__name__}
    values = {str(v) for p in paths.values() for c in ("age", "score") for v in pd.read_csv(p)[c].dropna()}
    kinds, refusals = set(), 0
    for request, reply in grid.seen:
        for message in (request, reply):
            if message.has_error():
                refusals += 1
                assert message.metadata.message_type == "query.lca_structural"
                assert not any(v in message.error.reason for v in values if len(v) > 2), message.error.reason
                continue
            content = message.content
            for key, array in content["arrays"].items():
                a = array.numpy()
                assert a.dtype.kind in "biuf", (key, a.dtype)
                assert n_rows not in a.shape and (a.size % n_rows or a.size == 0), (key, a.shape)
            decoded = decode_record(content)
            kinds.add(decoded.KIND)
            for key, value in dict(content["scalars"]).items():
                if key == "spec_json":      # the coding the run config stated: names and levels only
                    assert value in (parse_coding(COVARIATES, "c").to_json(), parse_coding(DISTAL, "d").to_json())
                elif isinstance(value, str):
                    assert len(value) <= 64 and value not in values, (decoded.KIND, key, value)
            if decoded.KIND == "lca_estep_reply":
                assert decoded.n_rows == n_rows       # a count of rows, the one row-level fact that crosses
    assert lca_kinds - kinds == set()                 # every latent class message crossed and was checked
    assert refusals >= 1


# ------------------------------------------------------------------------------------------------------
# A real deployment on loopback: a SuperLink and one SuperNode per silo (tests/federation/flowerlab.py)

@pytest.mark.slow
@pytest.mark.flower
def test_real_flower_lca_equals_vcmc_fit_k(tmp_path):
    from flowerlab import Lab

    paths, schema = _files(tmp_path)
    lab = Lab(tmp_path)
    try:
        lab.start_superlink()
        for i, (name, csv) in enumerate(paths.items()):
            lab.start_supernode(f'data-path="{csv}" schema-path="{schema}" silo-name="{name}" '
                                f'allow-strategies="lca,lca-structural" exact-scalars=true '
                                f'covariates="age,sex" distal="death,score"',
                                log=f"supernode{i}.log")
        out = tmp_path / "flower"
        run_config = " ".join([f'out-dir="{out}"', f'schema-path="{schema}"', f"seed={SEED}", "min-nodes=3",
                               "wait-nodes=90", "round-timeout=300", f"lca-k={K}",
                               f'lca-covariates="{COVARIATES}"', f'lca-distal="{DISTAL}"', "lca-starts=1",
                               "lca-max-em-iterations=5"])
        status, log = lab.run_app(APP_DIR, run_config, done_file=out / "distal_tests.csv", timeout=1500)
        assert status == "finished:completed", f"status {status}; server log:\n{log}"
    finally:
        lab.close()
    local = tmp_path / "local"
    assert main(["fit", *map(str, paths.values()), "--k", str(K), "--covariates", "age,sex", "--distal",
                 "death,score", "--starts", "1", "--max-em-iterations", "5", "--seed", str(SEED),
                 "--min-best", "1", "--standard-errors", "complete-data", "--out", str(local)]) == 0
    _assert_same_analysis(out, local)
