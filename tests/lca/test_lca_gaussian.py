"""The latent class analysis with Gaussian items (StepMix's gaussian_diag; docs/design.md §17): the federated fit is
the pooled fit, the one-class fit is the closed form in the data's own units, and the fit recovers known truth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vcmc.data.schema import ContinuousVariable, Schema
from vcmc.lca.analysis import analyse, compare
from vcmc.research.simulate_mixed import simulate_mixed
from vcmc.silo.local import LocalSilo

MEANS = np.array([[35.0, 50.0], [50.0, 65.0], [65.0, 40.0]])
SDS = np.array([[5.0, 7.0], [6.0, 5.0], [4.0, 6.0]])


@pytest.fixture(scope="module")
def mixed():
    silos, truth = simulate_mixed([250, 300, 350], [0.5, 0.3, 0.2], MEANS, SDS, missing=0.03, rng=4)
    schema = Schema(silos[0].schema.variables, continuous=(ContinuousVariable("X1", 50.0, 15.0),
                                                          ContinuousVariable("X2", 50.0, 12.0)))
    return [dataclasses.replace(s, schema=schema) for s in silos], truth


def _pooled(silos):
    one = dataclasses.replace(silos[0], name="pooled", codes=np.vstack([s.codes for s in silos]),
                              values=np.vstack([s.values for s in silos]), row_ids=None)
    return [LocalSilo(one)]


def test_federated_fit_is_the_pooled_fit(mixed):
    silos, _ = mixed
    fed, fed_fits = compare([LocalSilo(s) for s in silos], [2, 3], n_starts=3, rng=1, waic_draws=0)
    pooled, pooled_fits = compare(_pooled(silos), [2, 3], n_starts=3, rng=1, waic_draws=0)
    assert np.allclose(fed["log_likelihood"], pooled["log_likelihood"], rtol=1e-9)
    assert np.allclose(fed_fits[3].gaussian, pooled_fits[3].gaussian, atol=1e-6)
    assert fed["n_parameters"].tolist() == [1 + 2 * 6 + 2 * 4, 2 + 3 * 6 + 3 * 4]     # 6 free per profile, 2 items


def test_one_class_is_the_closed_form_in_the_data_s_units(mixed):
    silos, _ = mixed
    fit = analyse([LocalSilo(s) for s in silos], 1, rng=0).fit
    x = np.vstack([s.values for s in silos])
    codes = np.vstack([s.codes for s in silos])
    ll = 0.0
    for g in range(x.shape[1]):
        v = x[~np.isnan(x[:, g]), g]
        ll += stats.norm.logpdf(v, v.mean(), v.std()).sum()
    for q in range(codes.shape[1]):
        c = codes[codes[:, q] >= 0, q]
        p = np.bincount(c) / c.size
        ll += np.sum(np.log(p[c]))
    assert fit.loglik == pytest.approx(ll, rel=1e-7)


def test_recovers_the_true_classes_means(mixed):
    silos, _ = mixed
    fit = analyse([LocalSilo(s) for s in silos], 3, n_starts=5, rng=2).fit
    means = fit.gaussian[:, :2] * [15.0, 12.0] + 50.0
    order = np.argsort(means[:, 0])
    assert np.allclose(means[order], MEANS, atol=2.0)
    assert np.allclose(np.sqrt(fit.gaussian[order, 2:]) * [15.0, 12.0], SDS, rtol=0.2)
    assert analyse([LocalSilo(s) for s in silos], 3, n_starts=5, rng=2).fit.loglik == fit.loglik   # seeded


def test_vcmc_fit_k_writes_the_classes_means_in_the_data_s_units(mixed, tmp_path):
    from vcmc.cli import main

    silos, _ = mixed
    files = []
    for s in silos:
        files.append(tmp_path / f"{s.name}.csv")
        s.to_frame().to_csv(files[-1], index=False)
    silos[0].schema.to_json(tmp_path / "schema.json")
    assert main(["fit", *map(str, files), "--k", "3", "--seed", "2", "--out", str(tmp_path / "out")]) == 0
    table = pd.read_csv(tmp_path / "out" / "continuous.csv")
    x1 = np.sort(table.loc[table["variable"] == "X1", "mean"].to_numpy())
    assert np.allclose(x1, np.sort(MEANS[:, 0]), atol=2.0)
    assert (table["ci95_low"] < table["mean"]).all()
    # the fit's own memberships use every item's density, and vcmc predict scores new rows as the fit did
    members = pd.read_csv(tmp_path / "out" / "memberships.csv")
    assert main(["predict", str(tmp_path / "out"), str(files[0]), "--out", str(tmp_path / "pred")]) == 0
    pred = pd.read_csv(tmp_path / "pred" / "memberships.csv")
    cols = ["p_1", "p_2", "p_3"]
    assert np.allclose(pred[cols].to_numpy(), members[members.silo == silos[0].name][cols].to_numpy())
    import json

    from vcmc.lca.outputs import lca_memberships

    doc = json.loads((tmp_path / "out" / "lca.json").read_text())
    assert np.shape(doc["gaussian"]) == (3, 4)
    categorical_only = lca_memberships(silos[0].codes, doc["n_modalities"], doc["weights"], doc["profiles"])
    assert not np.allclose(pred[cols].to_numpy(), categorical_only, atol=1e-3)


def test_the_fit_over_a_process_pool_fits_the_continuous_items(mixed):
    """A transport that reaches the silos without holding them (a process pool; a deployment's Flower grid alike)
    learns the continuous items from the silos' hello replies: the fit is the in-process fit."""
    from vcmc.federation.transport import ProcessPoolTransport

    silos, _ = mixed
    local = analyse([LocalSilo(s) for s in silos], 3, n_starts=2, rng=5, standard_errors=False).fit
    with ProcessPoolTransport(silos, max_workers=1) as tr:
        assert {h.n_gaussian for h in tr.hello.values()} == {2}
        pooled = analyse(None, 3, n_starts=2, rng=5, transport=tr, n_modalities=silos[0].n_modalities,
                         standard_errors=False).fit
    assert pooled.gaussian is not None and np.shape(pooled.gaussian) == (3, 4)
    assert pooled.loglik == pytest.approx(local.loglik, rel=1e-12)
    np.testing.assert_allclose(pooled.gaussian, local.gaussian, atol=1e-10)


def test_the_hello_reply_carries_the_continuous_items_through_flower_records(mixed):
    """The Flower record of a hello reply (and its protobuf bytes) keeps ``n_gaussian``."""
    pytest.importorskip("flwr")
    from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
    from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

    from vcmc.flower.records import decode_record, encode_record
    from vcmc.protocol import HelloRequest

    silos, _ = mixed
    reply = LocalSilo(silos[0]).handle(HelloRequest())
    assert reply.n_gaussian == 2
    record = encode_record(reply)
    wire = recorddict_from_proto(ProtoRecordDict.FromString(recorddict_to_proto(record).SerializeToString()))
    assert decode_record(wire).n_gaussian == 2
