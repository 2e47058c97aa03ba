"""Model assessment inside a silo: WAIC sums against the row-level matrix, replicated data from the model,
predictive checks calibrated under the model and sensitive to misfit, occupancy, disclosure control."""

import numpy as np
import pytest
from scipy.special import logsumexp

from vcmc.assessment import choose_pairs, combine_assessment
from vcmc.config import PrivacyConfig
from vcmc.model import MISSING, profile_offsets
from vcmc.protocol import AssessReply, AssessRequest
from vcmc.rows.ppc import assess_rows, one_hot


def _draws(rng, t, c, n_mod, conc=1.0):
    pi = rng.dirichlet(np.full(c, 5.0), size=t)
    prof = np.concatenate([rng.dirichlet(np.full(k, conc), size=(t, c)) for k in n_mod], axis=2)
    return pi, prof


def _simulate(rng, n, pi, prof, n_mod, missing=0.0):
    """Rows from the latent class model with one parameter value (written out here, not the library's)."""
    offsets = profile_offsets(n_mod)
    z = rng.choice(pi.size, size=n, p=pi)
    codes = np.empty((n, len(n_mod)), dtype=np.int64)
    for q, k in enumerate(n_mod):
        for i in range(n):
            codes[i, q] = rng.choice(k, p=prof[z[i], offsets[q]:offsets[q + 1]])
    codes[rng.random(codes.shape) < missing] = MISSING
    return codes


def _row_loglik_reference(codes, pi, prof, n_mod):
    """log p(x_i | theta_t) by the product formula, one row and one draw at a time: (n, T)."""
    offsets = profile_offsets(n_mod)
    out = np.empty((codes.shape[0], pi.shape[0]))
    for t in range(pi.shape[0]):
        for i in range(codes.shape[0]):
            lik = pi[t].copy()
            for q in range(codes.shape[1]):
                if codes[i, q] != MISSING:
                    lik = lik * prof[t, :, offsets[q] + codes[i, q]]
            out[i, t] = np.log(lik.sum())
    return out


def _arviz_waic(loglik):
    """ArviZ's waic (arviz 0.x, ``scale="log"``) on the (n, T) pointwise matrix, written out: ArviZ 1.x
    ships loo but no waic, so its formula is the reference (lppd_i by logsumexp, var over draws with
    divisor T, se = sqrt(n var_i(elpd_i)))."""
    n_draws = loglik.shape[1]
    lppd_i = logsumexp(loglik, axis=1) - np.log(n_draws)
    v_i = loglik.var(axis=1)
    elpd_i = lppd_i - v_i
    return {"elpd_waic": elpd_i.sum(), "p_waic": v_i.sum(), "se": np.sqrt(elpd_i.size * elpd_i.var()),
            "lppd": lppd_i.sum()}


N_MOD = (2, 3, 2, 4)


def test_waic_sums_equal_arviz_waic_on_the_row_level_matrix_of_two_silos_pooled():
    """Two silos, each with its own weights: the pooled WAIC from their sums equals ArviZ's formula on the
    (rows x draws) matrix of all rows, computed directly by the product formula."""
    rng = np.random.default_rng(1)
    t = 40
    _, prof = _draws(rng, t, 3, N_MOD)
    silos = {}
    for name, n in (("A", 70), ("B", 45)):
        pi = rng.dirichlet(np.full(3, 4.0), size=t)
        codes = np.stack([rng.integers(0, k, n) for k in N_MOD], axis=1)
        codes[rng.random(codes.shape) < 0.1] = MISSING
        silos[name] = (codes, pi)
    pairs = choose_pairs(np.full(3, 1 / 3), prof.mean(axis=0), N_MOD, max_pairs=10)
    requests = {n: AssessRequest(pi=pi, profiles=prof, pairs=pairs, seed_entropy=3, spawn_key=(2, i))
                for i, (n, (_, pi)) in enumerate(silos.items())}
    replies = {n: AssessReply(**assess_rows(codes, N_MOD, pi, prof, pairs, rng=i))
               for i, (n, (codes, pi)) in enumerate(silos.items())}
    got = combine_assessment(replies, requests, N_MOD)["waic"]
    matrix = np.concatenate([_row_loglik_reference(codes, pi, prof, N_MOD) for codes, pi in silos.values()])
    ref = _arviz_waic(matrix)
    assert got["n_rows"] == 115
    for key in ("elpd_waic", "p_waic", "se", "lppd"):
        assert got[key] == pytest.approx(ref[key], rel=1e-10), key
    # per silo too
    ref_a = _arviz_waic(_row_loglik_reference(*silos["A"], prof, N_MOD))
    assert got["per_silo"]["A"]["elpd_waic"] == pytest.approx(ref_a["elpd_waic"], rel=1e-10)
    assert got["per_silo"]["A"]["se"] == pytest.approx(ref_a["se"], rel=1e-10)


def test_waic_agrees_with_arviz_loo_on_a_well_behaved_posterior():
    """WAIC and PSIS-LOO estimate the same elpd; on many rows and a concentrated posterior they agree to
    well within the standard error (Vehtari, Gelman and Gabry 2017)."""
    import arviz as az

    rng = np.random.default_rng(2)
    pi_true = np.array([0.6, 0.4])
    prof_true = np.array([[0.8, 0.2, 0.7, 0.1, 0.2, 0.9, 0.1, 0.5, 0.1, 0.1, 0.3],
                          [0.3, 0.7, 0.1, 0.2, 0.7, 0.2, 0.8, 0.1, 0.2, 0.4, 0.3]])
    codes = _simulate(rng, 400, pi_true, prof_true, N_MOD)
    # a posterior concentrated around the truth: Dirichlet with 400 pseudo-observations
    t = 200
    pi = rng.dirichlet(400 * pi_true, size=t)
    offsets = profile_offsets(N_MOD)
    prof = np.concatenate([np.stack([rng.dirichlet(200 * prof_true[c, offsets[q]:offsets[q + 1]], size=t)
                                     for c in range(2)], axis=1) for q in range(len(N_MOD))], axis=2)
    out = assess_rows(codes, N_MOD, pi, prof, np.zeros((0, 2), int), rng=0)
    matrix = _row_loglik_reference(codes, pi, prof, N_MOD)
    loo = az.loo(az.from_dict({"posterior": {"w": pi[None, :, 0]}, "log_likelihood": {"x": matrix.T[None]}},
                              dims={"x": ["row"]}))
    se = np.sqrt(out["elpd_m2"])
    assert abs(out["elpd"] - loo.elpd) < 0.1 * se


def test_replicates_keep_the_missing_cells_and_follow_the_model():
    rng = np.random.default_rng(3)
    n, r = 3000, 60
    pi, prof = _draws(rng, 1, 2, N_MOD)
    codes = _simulate(rng, n, pi[0], prof[0], N_MOD, missing=0.15)
    pis, profs = np.repeat(pi, r, axis=0), np.repeat(prof, r, axis=0)
    out = assess_rows(codes, N_MOD, pis, profs, np.zeros((0, 2), int), rng=4)
    offsets = profile_offsets(N_MOD)
    observed_rows = (codes != MISSING).sum(axis=0)
    for q in range(len(N_MOD)):
        block = slice(offsets[q], offsets[q + 1])
        # every replicate has exactly the data's observed cells of each variable
        assert np.all(out["replicated"][:, block].sum(axis=1) == observed_rows[q])
        assert np.all(out["n_observed"][block] == observed_rows[q])
    # counts of a modality in a replicate ~ Binomial(n_q, m) with m = sum_c pi_c p_c: mean within 4 sd
    m = pi[0] @ prof[0]
    n_q = out["n_observed"]
    sd = np.sqrt(n_q * m * (1 - m) / r)
    assert np.all(np.abs(out["replicated"].mean(axis=0) - n_q * m) < 4 * sd)
    np.testing.assert_array_equal(out["observed"], one_hot(codes, N_MOD).sum(axis=0))


def test_pair_counts_are_rows_with_both_modalities():
    rng = np.random.default_rng(5)
    codes = np.stack([rng.integers(0, k, 200) for k in N_MOD], axis=1)
    codes[rng.random(codes.shape) < 0.1] = MISSING
    pi, prof = _draws(rng, 3, 2, N_MOD)
    pairs = choose_pairs(pi.mean(axis=0), prof.mean(axis=0), N_MOD, max_pairs=1000)
    out = assess_rows(codes, N_MOD, pi, prof, pairs, rng=0)
    x = one_hot(codes, N_MOD)
    offsets = profile_offsets(N_MOD)
    var = np.repeat(np.arange(len(N_MOD)), N_MOD)
    for e, (a, b) in enumerate(pairs):
        assert out["pair_observed"][e] == np.sum((x[:, a] == 1) & (x[:, b] == 1))
        both = (codes[:, var[a]] != MISSING) & (codes[:, var[b]] != MISSING)
        assert out["pair_n_observed"][e] == both.sum()
    assert offsets[-1] == x.shape[1]


def test_checks_are_calibrated_when_the_data_come_from_the_model():
    """Data simulated from theta, every draw equal to theta: the data are one more replicate, so the mean
    squared standardised residual of the replicates is 1 in expectation (binomial moments are exact) and
    the entries' ppp are spread over (0, 1)."""
    rng = np.random.default_rng(6)
    n_mod = (2,) * 6 + (3,) * 2
    pi, prof = _draws(rng, 1, 3, n_mod)
    codes = _simulate(rng, 1500, pi[0], prof[0], n_mod)
    r = 200
    pis, profs = np.repeat(pi, r, axis=0), np.repeat(prof, r, axis=0)
    pairs = choose_pairs(pi[0], prof[0], n_mod, max_pairs=500)
    req = AssessRequest(pi=pis, profiles=profs, pairs=pairs, seed_entropy=1, spawn_key=(2, 0))
    reply = AssessReply(**assess_rows(codes, n_mod, pis, profs, pairs, rng=7))
    ppc = combine_assessment({"A": reply}, {"A": req}, n_mod)["ppc"]
    for check in ("prevalence", "pairs"):
        assert 0.9 < ppc[check]["replicated_statistic"] < 1.1
        assert 0.01 < ppc[check]["p_value"] < 0.99
    ppp = np.array([row["ppp"] for row in ppc["pairs"]["table"] if row["silo"] == "pooled"])
    assert ppp.size == pairs.shape[0] == 6 * 5 // 2 + 6 * 2 * 3 + 9
    assert 0.25 < np.mean(ppp) < 0.75 and np.mean((ppp < 0.025) | (ppp > 0.975)) < 0.2


def test_an_independence_model_fails_the_co_occurrence_check():
    """Two well-separated clusters make the variables dependent; one cluster (independence) reproduces every
    prevalence but no co-occurrence."""
    rng = np.random.default_rng(8)
    n_mod = (2,) * 6
    pi_true = np.array([0.5, 0.5])
    prof_true = np.tile([[0.1, 0.9], [0.9, 0.1]], 6).reshape(2, 12)
    codes = _simulate(rng, 1000, pi_true, prof_true, n_mod)
    r = 100
    pis = np.ones((r, 1))
    profs = np.repeat((pi_true @ prof_true)[None, None], r, axis=0)
    pairs = choose_pairs(np.ones(1), profs[0], n_mod, 500)
    req = AssessRequest(pi=pis, profiles=profs, pairs=pairs, seed_entropy=1, spawn_key=(2, 0))
    reply = AssessReply(**assess_rows(codes, n_mod, pis, profs, pairs, rng=9))
    ppc = combine_assessment({"A": reply}, {"A": req}, n_mod)["ppc"]
    assert ppc["pairs"]["p_value"] == 0.0 and ppc["pairs"]["statistic"] > 20
    assert all(row["ppp"] == 0.0 for row in ppc["pairs"]["table"])   # far more co-occurrence than implied
    assert ppc["prevalence"]["p_value"] > 0.01


def test_occupancy_counts_clusters_receiving_rows_over_silos():
    rng = np.random.default_rng(10)
    n_mod = (2,) * 8
    prof = np.tile([[0.02, 0.98], [0.98, 0.02], [0.5, 0.5]], 8).reshape(3, 16)[None].repeat(5, axis=0)
    codes_a = _simulate(rng, 50, np.array([1.0, 0.0, 0.0]), prof[0], n_mod)
    codes_b = _simulate(rng, 50, np.array([0.0, 1.0, 0.0]), prof[0], n_mod)
    pi_a = np.tile([0.999, 0.001, 0.0], (5, 1))   # cluster 3 absent from both silos: never occupied
    pi_b = np.tile([0.001, 0.999, 0.0], (5, 1))
    none = np.zeros((0, 2), int)
    reqs = {n: AssessRequest(pi=p, profiles=prof, pairs=none, seed_entropy=1, spawn_key=(2, i))
            for i, (n, p) in enumerate((("A", pi_a), ("B", pi_b)))}
    replies = {"A": AssessReply(**assess_rows(codes_a, n_mod, pi_a, prof, none, rng=1)),
               "B": AssessReply(**assess_rows(codes_b, n_mod, pi_b, prof, none, rng=2))}
    out = combine_assessment(replies, reqs, n_mod)
    assert out["k_global"] == {"values": [2], "probabilities": [1.0]}
    assert out["k_global_per_silo"]["A"] == {"values": [1], "probabilities": [1.0]}
    np.testing.assert_array_equal(replies["A"].occupied, np.tile([1, 0, 0], (5, 1)))


def test_suppression_and_rounding_apply_to_observed_and_replicated_counts_alike():
    rng = np.random.default_rng(11)
    n_mod = (2, 3, 2)
    codes = np.stack([rng.choice(2, 300, p=[0.99, 0.01]), rng.integers(0, 3, 300), rng.integers(0, 2, 300)],
                     axis=1)
    pi, prof = _draws(rng, 20, 2, n_mod)
    prof[:, :, :2] = [0.99, 0.01]
    pairs = choose_pairs(pi.mean(axis=0), prof.mean(axis=0), n_mod, 100)
    privacy = PrivacyConfig(suppress_cells_below=8, round_to=5)
    out = assess_rows(codes, n_mod, pi, prof, pairs, rng=3, privacy=privacy)
    for key in ("observed", "replicated", "pair_observed", "pair_replicated", "n_observed", "pair_n_observed"):
        values = np.asarray(out[key])
        assert np.all(values % 5 == 0), key
        assert not np.any((values >= 1) & (values < 8)), key
    raw = assess_rows(codes, n_mod, pi, prof, pairs, rng=3)
    assert out["n_suppressed"] > 0 and raw["n_suppressed"] == 0
    assert out["lppd"] == raw["lppd"]        # sums of log densities are not counts: untouched


def test_same_seed_same_reply_other_seed_other_replicates():
    rng = np.random.default_rng(12)
    codes = np.stack([rng.integers(0, k, 100) for k in N_MOD], axis=1)
    pi, prof = _draws(rng, 10, 3, N_MOD)
    pairs = choose_pairs(pi.mean(axis=0), prof.mean(axis=0), N_MOD, 20)
    a = assess_rows(codes, N_MOD, pi, prof, pairs, rng=np.random.SeedSequence(5, spawn_key=(2, 1)))
    b = assess_rows(codes, N_MOD, pi, prof, pairs, rng=np.random.SeedSequence(5, spawn_key=(2, 1)))
    c = assess_rows(codes, N_MOD, pi, prof, pairs, rng=np.random.SeedSequence(5, spawn_key=(2, 2)))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["replicated"], c["replicated"])
    np.testing.assert_array_equal(a["observed"], c["observed"])


def _exact_moments(codes, n_mod, pi, prof, pairs):
    """Exact mean and covariance of the replicated count vector (every modality, then every pair) of one
    replicate at one parameter value, by the model's formula: rows are independent and a row's entries are
    indicators of sets of cells, ``E[prod_{j in S} 1{x_j}] = sum_c pi_c prod_{j in S} p_{j,c}`` (0 for two
    modalities of one variable), over the variables the row observes."""
    offsets = profile_offsets(n_mod)
    var = np.repeat(np.arange(len(n_mod)), n_mod)
    entries = [(j,) for j in range(int(offsets[-1]))] + [tuple(int(v) for v in e) for e in pairs]

    def expect(cols):
        cols = sorted(set(cols))
        vs = var[cols]
        if len(set(vs.tolist())) < len(cols):
            return 0.0
        return float(pi @ np.prod(prof[:, cols], axis=1))

    k = len(entries)
    mean, cov = np.zeros(k), np.zeros((k, k))
    for row in codes:
        seen = row != MISSING
        ok = np.array([all(seen[var[j]] for j in e) for e in entries])
        m = np.array([expect(e) if ok[a] else 0.0 for a, e in enumerate(entries)])
        joint = np.array([[expect(e + f) if ok[a] and ok[b] else 0.0 for b, f in enumerate(entries)]
                          for a, e in enumerate(entries)])
        mean += m
        cov += joint - np.outer(m, m)
    return mean, cov


def test_replicates_from_sufficient_statistics_have_the_exact_joint_moments_of_row_by_row_replicates():
    """The replicated counts are drawn without materialising rows (allocation counts per missingness
    pattern, multinomial modality counts, only paired cells placed); their mean and covariance over 4,000
    replicates at one parameter value match the exact moments of the row-by-row model, pair counts sharing
    a modality included (their covariance involves three-way co-occurrence, which per-pair draws would
    miss)."""
    rng = np.random.default_rng(11)
    n_mod = (2, 3, 2, 3)
    pi1, prof1 = _draws(rng, 1, 3, n_mod)
    codes = _simulate(rng, 50, pi1[0], prof1[0], n_mod, missing=0.15)
    pairs = choose_pairs(pi1[0], prof1[0], n_mod, 100)
    r = 4000
    out = assess_rows(codes, n_mod, np.repeat(pi1, r, axis=0), np.repeat(prof1, r, axis=0), pairs, rng=12,
                      privacy=PrivacyConfig(suppress_cells_below=0, round_to=1))
    y = np.concatenate([out["replicated"], out["pair_replicated"]], axis=1).astype(np.float64)
    mean, cov = _exact_moments(codes, n_mod, pi1[0], prof1[0], pairs)
    sd = np.sqrt(np.diag(cov))
    live = sd > 0
    z = (y.mean(axis=0)[live] - mean[live]) / (sd[live] / np.sqrt(r))
    assert np.abs(z).max() < 4.5
    emp = np.cov(y, rowvar=False)
    se = np.sqrt((np.outer(sd, sd) ** 2 + cov ** 2) / r)          # normal-theory standard error of a covariance
    both = np.outer(live, live)
    assert np.abs((emp - cov)[both] / se[both]).max() < 5.0
    p = int(profile_offsets(n_mod)[-1])
    share = [(a, b) for a in range(p, y.shape[1]) for b in range(a + 1, y.shape[1])
             if set(pairs[a - p]) & set(pairs[b - p]) and abs(cov[a, b]) > 3 * se[a, b]]
    assert len(share) >= 5                                        # dependence between pairs is tested
