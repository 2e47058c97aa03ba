"""The global-informed rounds (docs/design.md §16) on a design the one-shot pass cannot resolve: a small silo
whose own posterior has one cluster where the pooled data have three."""

import numpy as np
import pytest

import vcmc
from vcmc.config import AggregationConfig, FitConfig, SamplerConfig
from vcmc.metrics import adjusted_rand_index
from vcmc.research.simulate import simulate

N_ITER = 800


@pytest.fixture(scope="module")
def small_silo_design():
    """Three large silos with all three clusters and a silo of 24 rows (8 of each): under the minimum cluster
    size (10) its sampler keeps one local cluster."""
    w = np.array([[0.4, 0.35, 0.25]] * 3 + [[1 / 3, 1 / 3, 1 / 3]])
    return simulate(n_per_silo=[300, 300, 300, 24], weights=w, n_modalities=[2] * 10, concentration=0.3, rng=1,
                    exact=True)


def _fit(data, rounds, *, jobs=1, seed=1, labels="pooled"):
    cfg = FitConfig(sampler=SamplerConfig(n_iter=N_ITER),
                    aggregation=AggregationConfig(rounds=rounds, round_labels=labels))
    return vcmc.fit(data, config=cfg, rng=seed, jobs=jobs)


@pytest.fixture(scope="module")
def one_shot(small_silo_design):
    return _fit(small_silo_design, 1)


@pytest.fixture(scope="module")
def refined(small_silo_design):
    return _fit(small_silo_design, 600)


def test_a_silo_with_one_local_cluster_gets_its_rows_spread(small_silo_design, one_shot, refined):
    small = small_silo_design.silos[3].name
    assert one_shot.diagnostics["local"][small]["n_clusters"] == 1
    assert np.unique(one_shot.assignments[3]).size == 1              # the one-shot answer: one class
    truth = small_silo_design.labels[3]
    assert adjusted_rand_index(truth, refined.assignments[3]) >= 0.9
    assert refined.weights.shape[0] == 3


def test_rounds_do_not_lower_agreement_with_the_truth(small_silo_design, one_shot, refined):
    truth = np.concatenate(small_silo_design.labels)
    before = adjusted_rand_index(truth, np.concatenate(one_shot.assignments))
    after = adjusted_rand_index(truth, np.concatenate(refined.assignments))
    assert after >= before
    assert after >= 0.95


def test_rounds_are_recorded_in_the_result(refined):
    rounds = refined.diagnostics["rounds"]
    assert rounds["n_rounds"] == 600 and rounds["n_kept"] == 300 and rounds["burn_in"] == 300
    assert rounds["stability"]["stable"], rounds["stability"]
    per = rounds["per_round"]
    assert [r["round"] for r in per] == list(range(1, 601))
    assert {"k", "log_joint", "bytes_sent", "kept"} <= set(per[0])
    # the start is the over-complete one (each silo's clusters its own components); the chain's log joint rises
    assert per[0]["k"] > 3
    assert np.mean([r["log_joint"] for r in per[-50:]]) > per[0]["log_joint"]
    # memberships: the kept rounds' average, with its Monte Carlo error stated
    mc = refined.diagnostics["classification"]["monte_carlo"]
    assert set(mc["draws_per_silo"].values()) == {300}
    for m in refined.memberships:
        np.testing.assert_allclose(m.sum(axis=1), 1.0)
    np.testing.assert_allclose(refined.pi_draws.sum(axis=1), 1.0)
    # the posterior of K is the pooled chain's over the kept rounds, not the one-shot matching's point mass
    k_post = refined.diagnostics["n_clusters_posterior"]
    assert k_post["definition"] == "occupied components of the pooled chain"
    kept_k = [r["k"] for r in per if r["kept"]]
    assert k_post["global"]["values"] == sorted(set(kept_k))
    np.testing.assert_allclose(sum(k_post["global"]["probabilities"]), 1.0)
    assert k_post["local"]                     # the silos' own posteriors of their K, from the one-shot pass


def test_the_rounds_answer_is_assessed_and_predicts_the_small_silo_better(small_silo_design, one_shot, refined):
    """The predictive checks and WAIC after the rounds are the rounds' own (at kept rounds' draws), not the
    one-shot pass's: the small silo's rows, which the one-shot pass puts in one cluster, are predicted better."""
    diag, before = refined.diagnostics, one_shot.diagnostics
    assert {k: diag["rounds"]["assessment"][k] for k in ("n_replicates", "weights")} == {
        "n_replicates": 100, "weights": "pooled"}
    assert refined.timings["rounds_assessment"] == diag["rounds"]["assessment"]["seconds"] > 0
    small = small_silo_design.silos[3].name
    assert diag["waic"]["n_rows"] == before["waic"]["n_rows"] == 924
    assert diag["waic"]["per_silo"][small]["elpd_waic"] > before["waic"]["per_silo"][small]["elpd_waic"] + 20
    assert diag["waic"]["elpd_waic"] > before["waic"]["elpd_waic"]
    for check in ("prevalence", "pairs"):
        assert diag["ppc"][check]["p_value"] > 0.05          # the pooled model passes its own checks
    assert set(diag["n_clusters_posterior"]["global_per_silo"]) == set(refined.silos)
    assert not any("model assessment" in w for w in diag["warnings"])
    assert any(w.startswith("the matching checks describe the one-shot pass") for w in diag["warnings"])


def test_the_report_shows_the_rounds_posterior_of_k(refined, small_silo_design, tmp_path):
    from vcmc.report import write_outputs, write_report

    write_outputs(refined, tmp_path / "out", schema=small_silo_design.schema)
    page = write_report(tmp_path / "out").html.read_text(encoding="utf-8")
    start = page.index('id="k-posterior"')
    section = page[start:page.index("</section>", start)]
    assert "is fixed by the matching" not in section
    assert "the pooled sampler's number of occupied components over its kept draws" in section


def test_same_seed_same_result_whatever_the_number_of_processes(small_silo_design):
    a = _fit(small_silo_design, 40, jobs=1)
    b = _fit(small_silo_design, 40, jobs=2)
    c = _fit(small_silo_design, 40, jobs=1)
    for other in (b, c):
        np.testing.assert_array_equal(a.pi_draws, other.pi_draws)
        for x, y in zip(a.assignments, other.assignments, strict=True):
            np.testing.assert_array_equal(x, y)


def test_silo_labels_change_the_memberships_not_the_chain(small_silo_design):
    # aggregation.round_labels = "silo": the same draws seed for seed, memberships under each silo's own
    # weights (their exact values: tests/silo/test_rounds.py)
    pooled = _fit(small_silo_design, 40, labels="pooled")
    own = _fit(small_silo_design, 40, labels="silo")
    np.testing.assert_array_equal(pooled.pi_draws, own.pi_draws)
    np.testing.assert_array_equal(pooled.profile_draws, own.profile_draws)
    assert own.diagnostics["rounds"]["labels"] == "silo" and pooled.diagnostics["rounds"]["labels"] == "pooled"
    assert any(not np.allclose(a, b) for a, b in zip(pooled.memberships, own.memberships, strict=True))
    for m in own.memberships:
        np.testing.assert_allclose(m.sum(axis=1), 1.0)
    # each silo's rows are checked at the weights that label them (issue 46): its own, sent with the replies
    assert own.diagnostics["rounds"]["assessment"]["weights"] == "silo"
    assert pooled.diagnostics["rounds"]["assessment"]["weights"] == "pooled"
    small = small_silo_design.silos[3].name
    assert own.diagnostics["ppc"]["prevalence"]["per_silo"][small] != \
        pooled.diagnostics["ppc"]["prevalence"]["per_silo"][small]


@pytest.fixture(scope="module")
def refined_pooled(small_silo_design):
    return _fit(small_silo_design, 600, labels="pooled")


def test_memberships_agree_with_prediction_from_the_result_draws(small_silo_design, refined_pooled):
    """With pooled labels the rounds' memberships average each row's allocation probabilities over the kept
    rounds' draws, which are the result's global draws (all of them when at most 1,000 are kept): predicting
    the same rows from the result (what ``vcmc predict`` and ``predict_proba`` do, with the global weights: a
    new person belongs to no silo, docs/design.md §8.2) gives the same memberships."""
    refined = refined_pooled
    from vcmc.rows.memberships import memberships_to_target

    n_mod = small_silo_design.silos[0].schema.n_modalities
    for s, silo in enumerate(small_silo_design.silos):
        predicted, _ = memberships_to_target(silo.codes, n_mod, refined.pi_draws, refined.profile_draws,
                                             target=None)
        # equal up to the renormalisation over the kept components (the dropped ones hold almost no mass)
        np.testing.assert_allclose(predicted, refined.memberships[s], atol=0.02)
        assert np.mean(np.argmax(predicted, axis=1) == refined.assignments[s]) >= 0.99


def _hidden_group_design(seed: int):
    """Four silos of 1,000 people, 20 binary conditions: a large cluster (79.4%), a second (20%) and 6 people
    per silo (24 in all) with a condition the others have at 0.5% and four more at 60%. Under the minimum
    cluster size (10) in every silo, no silo can report them; pooled, they are a cluster of 24."""
    from vcmc.data import Schema, SiloData

    rng = np.random.default_rng(seed)
    q, n, n_hidden = 20, 1000, 6
    p = np.full((3, q), 0.05)
    p[1, :8] = 0.5
    p[2, q - 5:q - 1] = 0.6
    p[:, q - 1] = 0.005
    p[2, q - 1] = 0.95
    schema = Schema.from_n_modalities([2] * q)
    silos, labels = [], []
    for s in range(4):
        lab = np.r_[np.zeros(n - 200 - n_hidden, int), np.ones(200, int), np.full(n_hidden, 2)]
        silos.append(SiloData(f"silo_{s + 1}", (rng.random((n, q)) < p[lab]).astype(np.int64), schema))
        labels.append(lab)
    return silos, labels


def test_births_give_a_cluster_no_silo_can_report_its_component():
    """The births (docs/design.md §16): the hidden group's hallmark condition is the least probable value of the
    silos' worst-explained rows, starts its own component, and that component is the global cluster holding the
    group in the rounds' answer. The start has no silo pieces (``round_components`` = the one-shot K), so the
    component the group ends in is the birth's (at the application's scale, where it matters, the pieces never
    take such a group: docs/results/ehr/README.md)."""
    from vcmc.metrics import best_f1

    silos, labels = _hidden_group_design(3)
    cfg = FitConfig(sampler=SamplerConfig(n_iter=N_ITER), aggregation=AggregationConfig(rounds=1000,
                                                                                        round_components=2))
    res = vcmc.fit(silos, config=cfg, rng=3)
    assert res.diagnostics["one_shot"]["n_clusters"] == 2
    births = res.diagnostics["rounds"]["births"]
    hallmark = 2 * 19 + 1                                   # the profile column of condition 20's "yes"
    assert births["columns"][0] == hallmark and births["rows"][0] >= 10
    cluster = births["clusters"][0]
    assert cluster is not None                              # the birth is a global cluster of the answer
    truth, est = np.concatenate(labels), np.concatenate(res.assignments)
    f1 = best_f1(est, truth, n_estimated=int(est.max()) + 1, n_true=3)
    assert f1[2] >= 0.75
    hidden = truth == 2
    assert np.mean(est[hidden] == cluster - 1) >= 0.65          # its rows: two thirds at least


def test_births_add_components_and_leave_the_silos_pieces():
    """The births take components beyond the start's (docs/design.md §16): the start holds every (silo,
    cluster) piece it holds without them, plus the births."""
    silos, _ = _hidden_group_design(3)
    starts = {}
    for share in (0.0, 0.01):
        cfg = FitConfig(sampler=SamplerConfig(n_iter=N_ITER),
                        aggregation=AggregationConfig(rounds=3, round_births=share))
        res = vcmc.fit(silos, config=cfg, rng=3)
        starts[share] = (res.diagnostics["rounds"]["per_round"][0]["k"], res.diagnostics["rounds"]["births"])
    n_births = len(starts[0.01][1]["columns"])
    assert n_births >= 1 and starts[0.0][1]["columns"] == []
    assert starts[0.01][0] == starts[0.0][0] + n_births
