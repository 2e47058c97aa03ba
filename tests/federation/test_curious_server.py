"""A curious server against the deployed ClientApp, through real Flower with TLS and SuperNode authentication.

One SuperLink (TLS, ``--enable-supernode-auth``), one registered SuperNode whose operator set the review's
limits (min-cluster-size 10, suppress-cells-below 8, round-to 5, share-counts false, an iteration cap and an
assign budget), and a modified ServerApp (``curious_app/``) that runs the attacks of issue 20 and records what
came back. Each test asserts that the server learnt nothing below the operator's limits.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

# one worker runs the whole module, so its deployment (a module fixture) starts once under pytest -n 2
pytestmark = pytest.mark.xdist_group("curious-server")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "curious_app"))
from flowerlab import Lab, make_node_key  # noqa: E402

APP = Path(__file__).parent / "curious_app"
N_ROWS = 199
NODE = ('min-cluster-size=10 suppress-cells-below=8 round-to=5 share-counts=false max-iterations=1000000 '
        'request-budget="assign=3"')


def _setup(folder):
    from vcmc.config import FitConfig, PostprocessConfig, SamplerConfig
    from vcmc.research.simulate import simulate_design

    sim = simulate_design("homogeneous", "easy", rng=8, n_per_silo=N_ROWS)
    data = sim.silos[0]
    sim.schema.to_json(folder / "schema.json")
    data.to_frame().to_csv(folder / "silo.csv", index=False)
    config = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200, thin=5),
                       postprocess=PostprocessConfig(min_cluster_fraction=0.05)).to_dict()
    plan = {"config": config, "n_modalities": list(data.schema.n_modalities),
            "target_row": [int(c) for c in data.codes[0]], "out": str(folder / "attacks.json")}
    (folder / "plan.json").write_text(json.dumps(plan))
    return plan, data, sim.schema


def _node_config(folder) -> dict:
    """The SuperNode's node config as Flower parses NODE (the same keys and values)."""
    return {"data-path": str(folder / "silo.csv"), "schema-path": str(folder / "schema.json"),
            "silo-name": "hospital", "out-dir": str(folder / "out"), "min-cluster-size": 10,
            "suppress-cells-below": 8, "round-to": 5, "share-counts": False, "max-iterations": 1000000,
            "request-budget": "assign=3"}


@contextlib.contextmanager
def _task_identity():
    """The run's identity a SuperNode sets for its ClientApp (the silo's run key is bound to it), for the deployed
    handler called in this process; restored after."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = {k: getattr(TaskIdentity, k, None) for k in ("_run_id", "_node_id", "_task_id")}
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = 1, 0, 1
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(TaskIdentity, k, v)


def _refused(got: dict, attack: str, reason: str) -> None:
    assert not got["ok"], f"the silo answered {attack}: {got}"
    assert reason in got["reason"], got["reason"]


@pytest.fixture(scope="module", params=["flower-wire", pytest.param("tls-auth", marks=pytest.mark.slow)])
def attacked(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"curious-{request.param}")
    plan, data, schema = _setup(folder)
    if request.param == "flower-wire":
        # the deployed handler behind Flower's protobuf wire encoding, in this process
        from test_flower_boundary import WireGrid
        from vcmc_curious.attacks import run_attacks

        with _task_identity():
            yield run_attacks(WireGrid({7: _node_config(folder)}), plan), data, folder, schema
        return
    lab = Lab(folder, secure=True)
    try:
        lab.start_superlink()
        key = make_node_key(folder, "silo-key")
        lab.register(key)
        lab.start_supernode(f'data-path="{folder / "silo.csv"}" schema-path="{folder / "schema.json"}" '
                            f'silo-name="hospital" out-dir="{folder / "out"}" {NODE}', key=key, log="node.log")
        # a guard against a hung run, not a timing: a deployed ClientApp starts a process per message, 10-30 s
        # each on a loaded 2-core machine, and the attacks send about twenty messages
        status, log = lab.run_app(APP, f'plan="{folder / "plan.json"}"', done_file=Path(plan["out"]), timeout=900)
        assert status == "finished:completed", f"status {status}; server log:\n{log}"
        yield json.loads(Path(plan["out"]).read_text()), data, folder, schema
    finally:
        lab.close()


REFUSED = {
    "soft-counts-before-summary": "counts requests belong",
    "assign-before-summary": "before a summarize request",
    "assess-before-summary": "before a summarize request",
    "wrong-handler": "arrived on the 'query.hello' handler",
    "federated-gradient-strategy": "does not allow the 'federated-gradient' strategy",
    "design-strategy": "does not allow the 'design' strategy",
    "huge-n-iter": "allows at most 1000000",
    "json-configuration": "version 1; this vcmc understands version 2",
    "unknown-option": "'privacy.trust-the-server'",
    "soft-counts-after-summary": "counts requests belong",
    "hard-counts-no-share": "counts requests belong",
    # minimum-divergence references are the server's: refused by default, whatever their values (the values are
    # checked where an operator allows them: tests/silo/test_gate.py)
    "nan-divergence": "divergence requests belong",
    "negative-divergence": "divergence requests belong",
    "assign-without-announcement": "announced first",
    "announce-one-person-profile": "farther than",
    "announce-server-weights": "not one of the silo's own draws",
    "announce-again": "announced already",
    "assign-unannounced-draws": "not announced",
    "assign-again": "budget of assign requests",
    "assess-differencing": "budget of assess requests",
}


@pytest.mark.flower
@pytest.mark.parametrize("attack", sorted(REFUSED))
def test_attack_is_refused(attacked, attack):
    results, *_ = attacked
    _refused(results[attack], attack, REFUSED[attack])


@pytest.mark.flower
def test_the_honest_summary_respects_the_limits(attacked):
    results, *_ = attacked
    summary = results["summary"]
    assert summary["ok"] and min(summary["cluster_sizes"]) >= 10
    assert "counts" not in summary                       # share-counts = false: no table leaves the silo


@pytest.mark.flower
def test_honest_assign_sends_nothing_under_the_limits_and_writes_out_dir_once(attacked):
    results, data, folder, _ = attacked
    reply = results["assign-honest"]
    assert reply["ok"] and results["announce-honest"]["ok"]
    for field in ("counts", "expected", "probability"):
        v = np.asarray(reply[field], dtype=float)
        assert not np.any((v > 0) & (v < 10)) and np.all(v % 5 == 0), (field, v)
    # the silo's row count (in its summary) less the released counts gives no withheld cluster back: what is
    # withheld is none, or at least two clusters holding at least the minimum between them
    labels = np.loadtxt(folder / "out" / "assignments.csv", delimiter=",", skiprows=1, usecols=2, dtype=int) - 1
    truth = np.bincount(labels, minlength=len(reply["counts"]))
    withheld = (np.asarray(reply["counts"]) == 0) & (truth > 0)
    assert not withheld.any() or (withheld.sum() >= 2 and truth[withheld].sum() >= 10), (truth, reply["counts"])
    assert results["summary"]["n_rows"] == truth.sum()
    files = sorted(p.name for p in (folder / "out").iterdir())
    assert "assignments.csv" in files and "memberships.csv" in files
    # the refused second assign did not rewrite them: the labels are those of the honest draws, all finite
    text = (folder / "out" / "memberships.csv").read_text()
    assert "nan" not in text.lower()


@pytest.mark.flower
def test_honest_assess_counts_are_suppressed_and_rounded(attacked):
    results, *_ = attacked
    reply = results["assess-honest"]
    assert reply["ok"], reply
    for field in ("n_observed", "observed", "replicated", "pair_n_observed", "pair_observed", "pair_replicated"):
        v = np.asarray(reply[field], dtype=float)
        assert np.all(v % 5 == 0) and not np.any((v > 0) & (v < 8)), field


@pytest.mark.flower
def test_the_schema_fingerprint_is_keyed(attacked):
    results, _, _, schema = attacked
    assert results["hello"]["ok"]
    sent = results["hello"]["schema_fingerprint"]
    assert sent.startswith("hmac-") and schema.fingerprint() not in sent
    assert results["summary"]["schema_fingerprint"] == sent      # the same key within the run


@pytest.mark.flower
def test_the_contingency_summary_gives_back_no_suppressed_cell(attacked):
    # the review's attack: profile draws x cluster sizes gave back all 47 suppressed cells to within one
    # person (37 exactly). The truth is the silo's table of the same request, reproduced here (same seed, same
    # limits: the same local clusters, whatever the transport)
    from vcmc.config import config_from_mapping
    from vcmc.flower.client import policy_from_node_config, privacy_from_node_config, read_node_data
    from vcmc.model import profile_offsets
    from vcmc.protocol import SiloConfig, SummarizeRequest
    from vcmc.silo.local import LocalSilo

    results, _, folder, _ = attacked
    sent = results["summary"]
    node = _node_config(folder)
    plan = json.loads((folder / "plan.json").read_text())
    silo = LocalSilo(read_node_data(node), privacy=privacy_from_node_config(node), policy=policy_from_node_config(node),
                     run_key="reproduced")
    own = silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(config_from_mapping(plan["config"])),
                                       n_silos=1, seed_entropy=5, spawn_key=(0, 0)))
    np.testing.assert_array_equal(own.cluster_sizes, sent["cluster_sizes"])
    np.testing.assert_array_equal(own.profile_draws, np.asarray(sent["profile_draws"]))
    truth = silo.local_table()
    suppressed = (truth >= 1) & (truth < 8)
    assert suppressed.sum() >= 10
    offsets = profile_offsets(own.n_modalities)
    sizes = np.repeat(np.add.reduceat(truth, offsets[:-1], axis=1), np.diff(offsets), 1)
    for field in ("profile_draws", "profile_estimate"):
        estimate = np.asarray(sent[field], dtype=float)
        recovered = np.rint((estimate.mean(axis=0) if field == "profile_draws" else estimate) * sizes)
        assert np.mean(recovered[suppressed] == truth[suppressed]) < 0.5, field
        assert not np.all(np.abs(recovered[suppressed] - truth[suppressed]) <= 1), field


GAUSSIAN_NODE = {"min-cluster-size": 10, "sum-precision": 0.5, "share-counts": True}
"""The operator's limits of the silo with continuous items: the sums of its clusters' measurements rounded to half a
standardised unit, and the count table shared (so that the summary carries those sums)."""


@pytest.fixture(scope="module")
def attacked_gaussian(tmp_path_factory):
    """The Gaussian items' attacks (vcmc_curious.attacks.run_gaussian_attacks) on a silo of 300 rows with two
    measurements (mmHg) beside four categorical items, through the deployed handler behind Flower's protobuf
    wire encoding (the real-SuperNode run of the same fields: docs/results/flower/, 3 continuous items)."""
    import dataclasses

    from test_flower_boundary import WireGrid
    from vcmc_curious.attacks import run_gaussian_attacks

    from vcmc.config import FitConfig, PostprocessConfig, SamplerConfig
    from vcmc.data.schema import ContinuousVariable, Schema
    from vcmc.research.simulate_mixed import simulate_mixed

    folder = tmp_path_factory.mktemp("curious-gaussian")
    silos, _ = simulate_mixed([300], [0.5, 0.3, 0.2], np.array([[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]]),
                              np.array([[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]]), missing=0.03, rng=8)
    schema = Schema(silos[0].schema.variables, continuous=(ContinuousVariable("X1", 120.0, 15.0, "mmHg"),
                                                          ContinuousVariable("X2", 120.0, 15.0, "mmHg")))
    schema.to_json(folder / "schema.json")
    data = dataclasses.replace(silos[0], schema=schema, values=120.0 + 15.0 * silos[0].values)
    data.to_frame().to_csv(folder / "silo.csv", index=False)
    config = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200, thin=5),
                       postprocess=PostprocessConfig(min_cluster_fraction=0.05)).to_dict()
    node = {"data-path": str(folder / "silo.csv"), "schema-path": str(folder / "schema.json"),
            "silo-name": "hospital", "out-dir": str(folder / "out"), **GAUSSIAN_NODE}
    with _task_identity():
        yield run_gaussian_attacks(WireGrid({7: node}), {"config": config})


GAUSSIAN_REFUSED = {
    "gaussian-strong-prior-summary": "variance_shape (a0) 1e+09 (at most 10)",
    "round-start-strong-prior": "variance_shape (a0) 1e+09 (at most 10)",
    "announce-without-gaussian": "Gaussian draws come exactly when the silo has continuous items",
    "announce-far-gaussian-mean": "is far from the silo's own posterior",
    "assign-unannounced-gaussian": "uses Gaussian draws that were not",
}


@pytest.mark.flower
@pytest.mark.parametrize("attack", sorted(GAUSSIAN_REFUSED))
def test_an_attack_on_the_gaussian_fields_is_refused(attacked_gaussian, attack):
    _refused(attacked_gaussian[attack], attack, GAUSSIAN_REFUSED[attack])


@pytest.mark.flower
def test_the_honest_gaussian_fields_respect_the_operators_limits(attacked_gaussian):
    results = attacked_gaussian
    summary = results["gaussian-summary"]
    assert summary["ok"] and min(summary["cluster_sizes"]) >= 10
    sums = np.asarray(summary["gaussian_sums"], dtype=float)               # (K, 3G): rows, sums, sums of squares
    g = sums.shape[1] // 3
    observed = sums[:, :g]
    assert not np.any((observed > 0) & (observed < 10))                   # no (cluster, item) of fewer rows
    rounded = sums[:, g:] / 0.5
    np.testing.assert_allclose(rounded, np.round(rounded), atol=1e-9)     # on the operator's precision
    assert results["announce-honest-gaussian"]["ok"] and results["assign-honest-gaussian"]["ok"]
    for field in ("counts", "expected", "probability"):
        v = np.asarray(results["assign-honest-gaussian"][field], dtype=float)
        assert not np.any((v > 0) & (v < 10)), (field, v)
