"""Property-based tests (hypothesis) of the invariants the method and its plumbing rest on.

* the simplex projection (docs/design.md §6.6): its output is on the floored simplex, and it is THE
  Euclidean projection (the KKT conditions of Duchi et al. 2008 hold), idempotent and shift-invariant;
* matching (docs/design.md §5): the partition of local clusters into global ones does not depend on the
  order of the silos nor on their local labels;
* every boundary message survives its plain-array encoding and the Flower record encoding unchanged;
* the readers give back any label set they were given (with the schema that lists it).
"""

from __future__ import annotations

import dataclasses
import string
import unicodedata

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from vcmc.aggregation.weights import project_simplex  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


# -- simplex projection ------------------------------------------------------------------------------------------
@SETTINGS
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 7)), elements=finite))
def test_projection_satisfies_the_kkt_conditions_of_the_euclidean_projection(v):
    """w = argmin ||w - v|| on the simplex iff there is tau with w_i = max(v_i - tau, 0) for every i."""
    w = project_simplex(v)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-9)
    assert (w >= 0).all()
    for row_v, row_w in zip(v, w, strict=True):
        support = row_w > 1e-12
        tau = np.mean(row_v[support] - row_w[support])
        np.testing.assert_allclose(row_v[support] - row_w[support], tau, atol=1e-8 * (1 + np.abs(row_v).max()))
        assert (row_v[~support] <= tau + 1e-8 * (1 + np.abs(row_v).max())).all()


@SETTINGS
@given(hnp.arrays(np.float64, st.integers(1, 8), elements=finite), finite)
def test_projection_is_idempotent_and_shift_invariant(v, shift):
    w = project_simplex(v)
    np.testing.assert_allclose(project_simplex(w), w, atol=1e-12)
    np.testing.assert_allclose(project_simplex(v + shift), w, atol=1e-9 * (1 + abs(shift) + np.abs(v).max()))


@SETTINGS
@given(st.integers(1, 6).flatmap(lambda s: st.tuples(
    hnp.arrays(np.float64, s, elements=finite), hnp.arrays(np.bool_, s), st.floats(0, 0.9 / s))))
def test_floored_projection_over_a_mask_stays_on_the_floored_simplex(args):
    v, mask, floor = args
    mask = mask.copy()
    mask[0] = True                      # a block always has at least one silo
    w = project_simplex(v, mask=mask, floor=floor)
    assert (w[~mask] == 0).all()
    assert (w[mask] >= floor - 1e-12).all()
    np.testing.assert_allclose(w[mask].sum(), 1.0, atol=1e-9)
    # the floored projection is floor + the projection of v - floor onto the simplex of total z = 1 - k floor,
    # i.e. z times the unit projection of (v - floor) / z (the projection commutes with scaling)
    z = 1 - mask.sum() * floor
    np.testing.assert_allclose(w[mask] - floor, z * project_simplex((v[mask] - floor) / z),
                               atol=1e-8 * (1 + np.abs(v).max() / z))


# -- matching ------------------------------------------------------------------------------------------------------
POOL = np.array([[0.9, 0.8, 0.1], [0.1, 0.2, 0.9], [0.5, 0.9, 0.5], [0.2, 0.5, 0.1]])   # binary coordinates


def _summary(name, pool_rows, sizes, rng, n_draws=30):
    from vcmc.protocol import SiloSummary

    k, d = len(pool_rows), POOL.shape[1]
    n = int(sum(sizes))
    draws = np.empty((n_draws, k, 2 * d))
    for j, (r, size) in enumerate(zip(pool_rows, sizes, strict=True)):
        p = rng.beta(POOL[r] * size + 1, (1 - POOL[r]) * size + 1, size=(n_draws, d))
        draws[:, j, 0::2], draws[:, j, 1::2] = p, 1 - p
    pi = rng.dirichlet(np.asarray(sizes, dtype=float) + 1, size=n_draws)
    return SiloSummary(silo=name, n_rows=n, n_modalities=(2,) * d, schema_fingerprint="f",
                       cluster_sizes=np.asarray(sizes), pi_draws=pi, profile_draws=draws,
                       pi_estimate=np.median(pi, axis=0), profile_estimate=np.median(draws, axis=0),
                       n_clusters_posterior=np.eye(6)[k])


@st.composite
def federations(draw):
    n_silos = draw(st.integers(2, 4))
    silos = []
    for s in range(n_silos):
        rows = draw(st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=3, unique=True))
        sizes = draw(st.lists(st.integers(40, 400), min_size=len(rows), max_size=len(rows)))
        silos.append((f"silo{s}", rows, sizes))
    seed = draw(st.integers(0, 2**32 - 1))
    order = draw(st.permutations(range(n_silos)))
    relabel = [draw(st.permutations(range(len(rows)))) for _, rows, _ in silos]
    return silos, seed, order, relabel


def _groups(matching, summaries, labels):
    """Global clusters as sets of (silo, original local cluster)."""
    out: dict[int, set] = {}
    for s, a in zip(summaries, matching.assignment, strict=True):
        for local, g in enumerate(a):
            out.setdefault(int(g), set()).add((s.silo, labels[s.silo][local]))
    return {frozenset(v) for v in out.values()}


@SETTINGS
@pytest.mark.parametrize("method", ["calibrated", "ball", "hungarian"])
@given(fed=federations())
def test_matching_does_not_depend_on_silo_order_or_local_labels(method, fed):
    from vcmc.config import MatchingConfig
    from vcmc.matching import match

    silos, seed, order, relabel = fed
    rng = np.random.default_rng(seed)
    summaries = [_summary(name, rows, sizes, rng) for name, rows, sizes in silos]
    identity = {s.silo: list(range(s.n_clusters)) for s in summaries}
    permuted, labels = [], {}
    for i in order:
        s, perm = summaries[i], np.asarray(relabel[i])
        permuted.append(s.with_changes(cluster_sizes=s.cluster_sizes[perm], pi_draws=s.pi_draws[:, perm],
                                       profile_draws=s.profile_draws[:, perm], pi_estimate=s.pi_estimate[perm],
                                       profile_estimate=s.profile_estimate[perm]))
        labels[s.silo] = perm.tolist()       # new local cluster j is old cluster perm[j]
    config = MatchingConfig(method=method)
    a = match(summaries, config)
    b = match(permuted, config)
    assert a.n_global == b.n_global
    assert _groups(a, summaries, identity) == _groups(b, permuted, labels)


# -- messages ---------------------------------------------------------------------------------------------------------
def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape
                    and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=False)):
                return False
        elif x != y:
            return False
    return True


def _f64(shape):
    return hnp.arrays(np.float64, shape, elements=st.floats(0, 1e6, allow_nan=False, allow_infinity=False))


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@st.composite
def silo_configs(draw):
    """Typed configurations: the sampler, prior and disclosure limits drawn over their valid ranges."""
    from vcmc.config import AggregationConfig, FitConfig, PriorConfig, PrivacyConfig, SamplerConfig
    from vcmc.protocol import SiloConfig

    n_iter = draw(st.integers(2, 10**6))
    beta = draw(st.floats(1e-3, 1e3) | st.tuples(st.floats(1e-3, 1e3), st.floats(1e-3, 1e3)))
    return SiloConfig.from_fit_config(FitConfig(
        prior=PriorConfig(n_components=draw(st.integers(1, 50)), beta=beta),
        sampler=SamplerConfig(n_iter=n_iter, burn_in=draw(st.none() | st.integers(0, n_iter - 1)), thin=1),
        privacy=PrivacyConfig(min_cluster_size=draw(st.integers(0, 100)),
                              dp_epsilon=draw(st.none() | st.floats(1e-3, 10))),
        aggregation=AggregationConfig(strategy=draw(st.sampled_from(["contingency", "federated-gradient",
                                                                     "design"])))))


@st.composite
def messages(draw):
    from vcmc.protocol import (
        AssignReply,
        AssignRequest,
        CountsReply,
        CountsRequest,
        DivergenceReply,
        DivergenceRequest,
        ErrorReply,
        HelloReply,
        HelloRequest,
        SiloSummary,
        SummarizeRequest,
    )

    c, p, m = draw(st.integers(1, 4)), draw(st.integers(2, 6)), draw(st.integers(1, 3))
    kind = draw(st.sampled_from(range(11)))
    if kind == 0:
        return SummarizeRequest(config=draw(silo_configs()), n_silos=draw(st.integers(1, 10**6)),
                                seed_entropy=draw(st.integers(0, 2**128 - 1)),
                                spawn_key=tuple(draw(st.lists(st.integers(0, 2**31), max_size=3))))
    if kind == 1:
        return DivergenceRequest(reference_pi=draw(_f64(c)), reference_profiles=draw(_f64((c, p))),
                                 rule=draw(st.sampled_from(["penalised", "augmented"])),
                                 penalty_multiplier=draw(st.floats(0, 10)))
    if kind == 2:
        return DivergenceReply(cost=draw(_f64((c, c + 2))))
    if kind == 3:
        return CountsRequest(mode="soft", pi=draw(_f64((m, c))), profiles=draw(_f64((m, c, p))), n_global=c)
    if kind == 4:
        return CountsReply(cluster=draw(_f64((m, c))), modality=draw(_f64((m, c, p))), loglik=draw(_f64(m)))
    if kind == 5:
        return AssignRequest(assignment=np.arange(c, dtype=np.int64), n_global=c,
                             pi=draw(st.none() | _f64((m, c))), profiles=None)
    if kind == 6:
        return AssignReply(counts=draw(_f64(c)), expected=draw(st.none() | _f64(c)), entropy=draw(st.floats(0, 9)))
    if kind == 7:
        return HelloRequest()
    if kind == 8:
        return HelloReply(silo=draw(text.filter(bool)), schema_fingerprint="0" * 16,
                          n_modalities=tuple(draw(st.lists(st.integers(2, 9), min_size=1, max_size=5))),
                          vcmc_version=draw(text))
    if kind == 9:
        return ErrorReply(error_type=draw(text.filter(bool)), reason=draw(text))
    sizes = np.asarray(draw(st.lists(st.integers(10, 500), min_size=c, max_size=c)), dtype=np.int64)
    q = p // 2
    t = draw(st.integers(1, 4))
    raw = np.asarray(draw(hnp.arrays(np.float64, (t, c, q), elements=st.floats(0.01, 0.99))))
    profiles = np.concatenate([raw, 1 - raw], axis=-1)[..., np.argsort(np.tile(np.arange(q), 2), kind="stable")]
    pi = np.full((t, c), 1.0 / c)
    return SiloSummary(silo=draw(text.filter(bool)), n_rows=int(sizes.sum()), n_modalities=(2,) * q,
                       schema_fingerprint="0" * 16, cluster_sizes=sizes, pi_draws=pi, profile_draws=profiles,
                       pi_estimate=pi[0], profile_estimate=profiles[0], n_clusters_posterior=np.eye(c + 1)[c],
                       diagnostics={"rhat": draw(st.floats(1, 2))})


@SETTINGS
@given(messages())
def test_every_message_survives_its_plain_array_encoding(message):
    from vcmc.protocol import decode_message

    back = decode_message(message.to_arrays())
    assert _same(back, message)


@SETTINGS
@given(messages())
def test_every_message_survives_the_flower_record_encoding(message):
    pytest.importorskip("flwr")
    from vcmc.flower.records import decode_record, encode_record

    assert _same(decode_record(encode_record(message)), message)


# -- readers ----------------------------------------------------------------------------------------------------------
# any text a CSV cell can hold: separators, quotes, line breaks, white space, missing-value spellings, unicode
LABEL = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(list(',"\n\t ')),
                min_size=1, max_size=12) | st.sampled_from(["NA", "null", "None", " 1 ", "1"])


@st.composite
def labelled_frames(draw):
    n_var = draw(st.integers(1, 3))
    names = draw(st.lists(st.text(string.ascii_letters, min_size=1, max_size=6), min_size=n_var, max_size=n_var,
                          unique=True))
    mods = [draw(st.lists(LABEL, min_size=2, max_size=5, unique=True)) for _ in names]
    n = draw(st.integers(2, 25))
    codes = np.array([[draw(st.integers(-1, len(m) - 1)) for m in mods] for _ in range(n)], dtype=np.int16)
    for q in range(n_var):               # every column observed at least once
        codes[0, q] = max(codes[0, q], 0)
    return names, mods, codes


@SETTINGS
@given(labelled_frames())
def test_csv_round_trip_of_any_label_set_with_its_schema(tmp_path_factory, frame):
    from vcmc.data import Schema, Variable, read_csv

    names, mods, codes = frame
    schema = Schema(tuple(Variable(n, tuple(m)) for n, m in zip(names, mods, strict=True)))
    labels = schema.decode(codes)
    path = tmp_path_factory.mktemp("rt") / "silo.csv"
    labels.to_csv(path, index=False)               # pandas quotes what needs quoting; None -> empty cell
    back = read_csv(path, schema=schema)
    np.testing.assert_array_equal(back.codes, codes)
    # and through the schema's own JSON
    back_json = read_csv(path, schema=Schema.from_json(schema.to_json()))
    np.testing.assert_array_equal(back_json.codes, codes)


@SETTINGS
@given(labelled_frames())
def test_dataframe_round_trip_and_inference_either_agrees_or_refuses(frame):
    from vcmc.data import Schema, Variable, from_dataframe
    from vcmc.exceptions import SchemaError

    names, mods, codes = frame
    schema = Schema(tuple(Variable(n, tuple(m)) for n, m in zip(names, mods, strict=True)))
    labels = schema.decode(codes)
    np.testing.assert_array_equal(from_dataframe(labels, schema=schema).codes, codes)
    try:
        inferred = from_dataframe(labels)
    except SchemaError as err:
        # refused only for what it must not guess: variants, missing-value spellings, a single label
        assert any(w in str(err) for w in ("differ only by", "spelling of a missing value", "single modality",
                                           "distinct values", "spellings of one number")), str(err)
        return
    decoded = inferred.schema.decode(inferred.codes)
    # labels are composed to Unicode NFC when read (vcmc.data.normalise, recorded under data.normalised)
    nfc = labels.map(lambda v: unicodedata.normalize("NFC", v) if isinstance(v, str) else v)
    pd.testing.assert_frame_equal(decoded, nfc.astype(object).where(nfc.notna(), None))


@SETTINGS
@given(st.integers(0, 5).flatmap(lambda n: st.tuples(
    hnp.arrays(np.int16, st.tuples(st.just(n), st.integers(1, 4)), elements=st.integers(-1, 2)),
    hnp.arrays(np.int64, st.just(n), elements=st.integers(-1, 2)))))
def test_one_hot_counts_counts_every_labelled_present_cell_once(args):
    """The contingency table equals a cell-by-cell count (missing cells and unlabelled rows add nothing),
    also when the rows span several of its blocks."""
    import vcmc.model as model

    codes, labels = args
    n_mod = [3] * codes.shape[1]
    expected = np.zeros((3, 3 * codes.shape[1]), dtype=np.int64)
    for i, q in np.ndindex(codes.shape):
        if labels[i] >= 0 and codes[i, q] >= 0:
            expected[labels[i], 3 * q + codes[i, q]] += 1
    np.testing.assert_array_equal(model.one_hot_counts(codes, labels, 3, n_mod), expected)
    block = model._COUNT_BLOCK
    try:
        model._COUNT_BLOCK = 2
        np.testing.assert_array_equal(model.one_hot_counts(codes, labels, 3, n_mod), expected)
    finally:
        model._COUNT_BLOCK = block
