"""Every message that crosses the silo boundary: typed, versioned, plain-array encoded, never row-level."""

import dataclasses

import numpy as np
import pytest

from vcmc.data import SiloData
from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.federation.transport import InProcessTransport
from vcmc.protocol import (
    AnnounceRequest,
    AssessRequest,
    AssignRequest,
    CountsRequest,
    DivergenceRequest,
    ErrorReply,
    HelloReply,
    HelloRequest,
    Message,
    decode_message,
    registry,
)
from vcmc.silo.local import LocalSilo

N_ROWS = 137
ID_PREFIX = "patient-"


@pytest.fixture(scope="module")
def exchanged(small_sim, tiny_config, summarize_request):
    """Every request and reply of a real run on small simulated silos, as they travel (encoded)."""
    silos = []
    for s, d in enumerate(small_sim.silos):
        ids = np.array([f"{ID_PREFIX}{s}-{i:05d}" for i in range(d.n_rows)])
        silos.append(LocalSilo(SiloData(d.name, d.codes, d.schema, row_ids=ids),
                               auxiliary=_auxiliary(d.n_rows, s)))
    names = [s.name for s in silos]
    tr = InProcessTransport(silos)
    log: list[Message] = []

    def call(requests):
        log.extend(requests.values())
        replies = tr.call(requests)
        for r in replies.values():
            assert not isinstance(r, Exception), r
            log.append(r)
        return replies

    call({n: HelloRequest() for n in names})
    summaries = call({n: summarize_request(tiny_config, i) for i, n in enumerate(names)})
    ref = summaries[names[0]]
    call({n: DivergenceRequest(reference_pi=ref.pi_estimate / ref.pi_estimate.sum(),
                               reference_profiles=ref.profile_estimate, rule="penalised") for n in names})
    m = 7
    pi = np.tile(ref.pi_estimate / ref.pi_estimate.sum(), (m, 1))
    prof = np.tile(ref.profile_estimate, (m, 1, 1))
    call({n: CountsRequest(mode="soft", pi=pi, profiles=prof, n_global=ref.n_clusters) for n in names})
    assignment = {n: np.zeros(summaries[n].n_clusters, dtype=int) for n in names}
    call({n: CountsRequest(mode="hard", assignment=assignment[n], n_global=1) for n in names})
    call({n: AssignRequest(assignment=assignment[n], n_global=1) for n in names})
    call({n: _assess_request(ref, i) for i, n in enumerate(names)})
    # the global draws announced (the matching of every silo's clusters into one): each silo's own weights
    # mapped through it and, as the profile, the silo's own size-weighted mean profile
    announce = {}
    for n in names:
        local = tr.silo(n).local
        own = (local.cluster_sizes[:, None] * local.profile_draws.mean(axis=0)).sum(axis=0) / local.cluster_sizes.sum()
        pi = local.pi_draws.sum(axis=1, keepdims=True)
        announce[n] = AnnounceRequest(assignment=assignment[n], n_global=1, pi=pi, profiles=np.tile(own, (2, 1, 1)))
    call(announce)
    _lca_rounds(call, names, silos)
    _global_rounds(call, names, silos, announce)
    # an error reply, as a silo sends it
    log.append(ErrorReply(error_type="NotFittedError", reason="no summarize yet"))
    return log, silos


def _auxiliary(n_rows, index):
    """Covariate and distal columns of a silo (kept out of the clustering, inside the silo)."""
    import pandas as pd

    rng = np.random.default_rng(100 + index)
    return pd.DataFrame({"age": np.round(rng.normal(50, 10, n_rows) / 5) * 5,
                         "sex": rng.choice(["f", "m"], n_rows),
                         "death": np.where(rng.random(n_rows) < 0.1, np.nan, rng.integers(0, 2, n_rows)),
                         "score": np.round(rng.normal(0, 1, n_rows), 1)})


def _lca_rounds(call, names, silos):
    """Every message of the latent class analysis, as the server sends them (docs/design.md §15)."""
    from vcmc.lca.analysis import infer_spec
    from vcmc.protocol.lca import LcaClassifyRequest, LcaEStepRequest, LcaStructuralRequest

    n_mod = silos[0].n_modalities
    rng = np.random.default_rng(3)
    pi = np.array([0.6, 0.4])
    prof = np.hstack([rng.dirichlet(np.ones(m), size=2) for m in n_mod])
    call({n: LcaEStepRequest(pi=pi, profiles=prof) for n in names})
    call({n: LcaClassifyRequest(pi=pi, profiles=prof) for n in names})
    frames = {s.name: s.auxiliary for s in silos}
    log_e = np.log(np.array([[0.9, 0.1], [0.2, 0.8]]))
    cov = infer_spec(frames, [("age", None), ("sex", None)], "--covariates")
    dis = infer_spec(frames, [("death", None), ("score", None)], "--distal")
    call({n: LcaStructuralRequest(model="covariate", spec_json=cov.to_json(), pi=pi, profiles=prof,
                                  log_error=log_e, params=np.zeros(3)) for n in names})
    call({n: LcaStructuralRequest(model="distal", spec_json=dis.to_json(), pi=pi, profiles=prof,
                                  log_error=log_e, params=np.zeros(1 + 2 + 4)) for n in names})


def _global_rounds(call, names, silos, announce):
    """Every message of the global-informed rounds (docs/design.md §16), as the relay sends them: the rows
    labelled with the announced draws (one cluster), the start from every silo's clusters (all in component 0,
    two free components, births allowed), the sweeps until the chain's last checkpoint (each carrying every
    participant's vector), finish, the pooled chain's answer and the assessment at its stored draws."""
    from vcmc.protocol.rounds import (
        RoundAssessRequest,
        RoundFinishRequest,
        RoundResultRequest,
        RoundStartRequest,
        RoundSweepRequest,
    )

    call({n: AssignRequest(assignment=announce[n].assignment, n_global=1, pi=announce[n].pi[:2],
                           profiles=announce[n].profiles) for n in names})
    width = max(s.local.n_clusters for s in silos)
    start = np.full((len(names), width), -1, dtype=np.int64)
    for i, s in enumerate(silos):
        start[i, :s.local.n_clusters] = 0
    request = RoundStartRequest(names=tuple(names), start=start, n_components=3, alpha=0.01,
                                beta=np.full(silos[0].n_columns, 0.5), checkpoints=np.array([6]), stop=False,
                                n_chains=1, anneal=1.0, anneal_until=1, max_stored=50, min_size=5, birth_share=0.05,
                                birth_budget=1, silo_weight_prior=0.0, secure=False, seed_entropy=5, spawn_key=(3,))
    replies, r = call(dict.fromkeys(names, request)), -1
    while not all(replies[n].stop for n in names):
        vectors = np.stack([np.asarray(replies[n].vector, dtype=np.uint64) for n in names])
        replies = call(dict.fromkeys(names, RoundSweepRequest(round=r, vectors=vectors,
                                                              tags=np.zeros(0, dtype=np.uint8))))
        r += 1
    call(dict.fromkeys(names, RoundFinishRequest()))
    call(dict.fromkeys(names, RoundResultRequest()))
    call(dict.fromkeys(names, RoundAssessRequest(n_replicates=3, max_pairs=10)))


N_REPLICATES = 9     # 9 x (26 columns, 40 pairs, C clusters): no size is a multiple of 137


def _assess_request(ref, index):
    """The model-assessment request of the pipeline, built from one silo's draws (the server's choice of
    pairs; 40 of the 213 candidate pairs of the nested design)."""
    from vcmc.assessment import choose_pairs

    pi = ref.pi_draws[:N_REPLICATES]
    prof = ref.profile_draws[:N_REPLICATES]
    pairs = choose_pairs(pi.mean(axis=0), prof.mean(axis=0), ref.n_modalities, max_pairs=40)
    return AssessRequest(pi=pi, profiles=prof, pairs=pairs, seed_entropy=2024, spawn_key=(2, index))


def test_every_message_type_is_exercised(exchanged):
    log, _ = exchanged
    assert {type(m) for m in log} == set(registry.message_types())


def test_no_message_field_is_row_level(exchanged):
    log, silos = exchanged
    assert all(s.data.n_rows == N_ROWS for s in silos)
    for message in log:
        arrays = message.to_arrays()
        assert arrays["__kind__"] == message.KIND and arrays["__version__"] == message.VERSION
        for key, value in arrays.items():
            where = f"{message.KIND}.{key}"
            if isinstance(value, np.ndarray):
                # plain numeric arrays, or the participants' names (no object arrays, no row identifiers)
                assert value.dtype.kind in "biufU", where
                if value.dtype.kind == "U":
                    assert set(value.tolist()) <= {s.name for s in silos}, where
                assert N_ROWS not in value.shape, where
                # 137 is prime: a flattened row-level array would have a size that is a multiple of it
                assert value.size % N_ROWS != 0 or value.size == 0, where
            else:
                assert isinstance(value, bool | int | float | str), where
                if isinstance(value, str):
                    assert ID_PREFIX not in value, where


def test_replies_carry_no_raw_values(exchanged):
    """No reply contains a silo's rows: no array equals or contains a column of any silo's codes."""
    log, silos = exchanged
    columns = [s.codes[:, q].astype(float) for s in silos for q in range(s.codes.shape[1])]
    columns += [s.auxiliary[c].to_numpy(dtype=float) for s in silos for c in ("age", "score", "death")]
    for message in log:
        for value in message.to_arrays().values():
            if isinstance(value, np.ndarray) and value.size >= N_ROWS:
                flat = value.astype(float).ravel()
                windows = np.lib.stride_tricks.sliding_window_view(flat, N_ROWS)
                for col in columns:
                    assert not np.any(np.all(windows == col, axis=1))


def test_encoding_round_trips_every_message(exchanged):
    log, _ = exchanged
    for message in log:
        back = decode_message(message.to_arrays())
        assert type(back) is type(message)
        for f in dataclasses.fields(message):
            a, b = getattr(message, f.name), getattr(back, f.name)
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
            else:
                assert a == b or (a != a and b != b), f.name      # nan (one chain's R-hat) is nan


def test_decode_reports_unknown_kind_and_wrong_version():
    arrays = HelloReply(silo="A", schema_fingerprint="f", n_modalities=(2, 3), vcmc_version="0").to_arrays()
    with pytest.raises(InconsistentSiloSummaries, match="version 7"):
        decode_message({**arrays, "__version__": 7})
    with pytest.raises(InconsistentSiloSummaries, match="unknown message kind 'tensor'"):
        decode_message({**arrays, "__kind__": "tensor"})
    with pytest.raises(InconsistentSiloSummaries, match="malformed 'hello_reply'"):
        decode_message({"__kind__": "hello_reply", "__version__": 1, "silo": "A"})


def test_assessment_sums_do_not_depend_on_the_order_of_rows(exchanged, small_sim):
    """What the assessment reply computes from the data (observed counts, WAIC sums) is a symmetric
    function of the rows: permuting them leaves it unchanged, so no field is indexed by row."""
    from vcmc.rows.ppc import assess_rows

    log, silos = exchanged
    request = next(m for m in log if isinstance(m, AssessRequest))
    codes = silos[0].codes
    perm = np.random.default_rng(0).permutation(codes.shape[0])
    args = (silos[0].n_modalities, request.pi, request.profiles, request.pairs)
    a = assess_rows(codes, *args, rng=1)
    b = assess_rows(codes[perm], *args, rng=1)
    for key in ("n_observed", "observed", "pair_n_observed", "pair_observed"):
        np.testing.assert_array_equal(a[key], b[key])
    for key in ("lppd", "p_waic", "elpd", "elpd_m2"):
        assert a[key] == pytest.approx(b[key], rel=1e-12)
    assert a["n_rows"] == N_ROWS and a["occupied"].shape == (N_REPLICATES, request.pi.shape[1])
    assert set(np.unique(a["occupied"])) <= {0, 1}
