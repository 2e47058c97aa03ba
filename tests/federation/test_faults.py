"""Faults: failing, slow, malformed or inconsistent silos are named; the policy decides whether to go on."""

import dataclasses

import numpy as np
import pytest

from vcmc.config import FitConfig
from vcmc.exceptions import ConfigError, InconsistentSiloSummaries, SiloFailure
from vcmc.federation.faults import FaultPolicy, SiloDroppedWarning, gather, load_summaries, save_summaries
from vcmc.federation.transport import InProcessTransport
from vcmc.protocol import SiloConfig, SiloSummary, SummarizeRequest

N_MOD = (2, 3)


def make_summary(silo, seed=0, **over):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet([5, 5], size=10)
    prof = np.concatenate([rng.dirichlet([1, 1], size=(10, 2)), rng.dirichlet([1, 1, 1], size=(10, 2))],
                          axis=2)
    kw = dict(silo=silo, n_rows=100, n_modalities=N_MOD, schema_fingerprint="fp-shared",
              cluster_sizes=np.array([60, 40]), pi_draws=pi, profile_draws=prof,
              pi_estimate=np.median(pi, 0), profile_estimate=np.median(prof, 0),
              n_clusters_posterior=np.array([0, 0, 1.0]), counts=np.full((2, 5), 20),
              diagnostics={"rhat": 1.0})
    kw.update(over)
    return SiloSummary(**kw)


@dataclasses.dataclass(frozen=True)
class FutureSummary(SiloSummary):
    VERSION = 2


class Replay:
    """A test double of a silo that answers every request with a fixed reply (or raises it)."""

    def __init__(self, name, reply):
        self.name = name
        self.reply = reply

    def handle(self, request):
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def nan_summary(silo):
    s = make_summary(silo)
    bad = s.pi_draws.copy()
    bad[3, 1] = np.nan
    object.__setattr__(s, "pi_draws", bad)  # bypass validation, as a buggy or hostile silo would
    return s


REQ = SummarizeRequest(config=SiloConfig.from_fit_config(FitConfig()), n_silos=4, seed_entropy=1, spawn_key=(0, 0))


def transport(*silos):
    return InProcessTransport(list(silos))


def reqs(tr):
    return {n: REQ for n in tr.silos}


@pytest.mark.parametrize(("bad", "match"), [
    (lambda n: nan_summary(n), "pi_draws contains NaN"),
    (lambda n: FutureSummary(**{f.name: getattr(make_summary(n), f.name)
                                for f in dataclasses.fields(SiloSummary)}), "has version 2"),
    (lambda n: make_summary(n, schema_fingerprint="fp-other"), "schema .* differs"),
    (lambda n: make_summary("somebody-else"), "comes from silo 'somebody-else'"),
    (lambda n: RuntimeError("disk full"), "RuntimeError raised inside the silo"),
])
def test_bad_silo_is_named_and_stops_the_run_by_default(bad, match):
    tr = transport(*(Replay(n, make_summary(n)) for n in ("A", "B", "C")), Replay("D", bad("D")))
    with pytest.raises(SiloFailure, match=rf"silo 'D'.*{match}") as info:
        gather(tr, reqs(tr), FaultPolicy(), stage="summarize")
    assert "0 of 4" not in str(info.value) and "3 of 4 silos replied" in str(info.value)


def test_bad_silo_is_dropped_with_a_warning_when_policy_allows():
    tr = transport(*(Replay(n, make_summary(n)) for n in ("A", "B", "C")), Replay("D", nan_summary("D")))
    with pytest.warns(SiloDroppedWarning, match="silo 'D' dropped at stage 'summarize'.*Continuing with 3"):
        replies, failures = gather(tr, reqs(tr), FaultPolicy(min_silos=3), stage="summarize")
    assert list(replies) == ["A", "B", "C"]
    assert [f.silo for f in failures] == ["D"]


def test_too_few_silos_left_names_all_failed_ones():
    tr = transport(Replay("A", make_summary("A")), Replay("B", make_summary("B")),
                   Replay("C", RuntimeError("x")), Replay("D", nan_summary("D")))
    with pytest.raises(SiloFailure, match=r"'C, D'.*at least 3 silos are required"):
        gather(tr, reqs(tr), FaultPolicy(min_silos=3), stage="summarize")


def test_schema_split_without_majority_is_an_error():
    tr = transport(Replay("A", make_summary("A")), Replay("B", make_summary("B", schema_fingerprint="x")))
    with pytest.raises(InconsistentSiloSummaries, match="no schema is shared by a majority"):
        gather(tr, reqs(tr), FaultPolicy(min_silos=1))


def test_policy_validation():
    with pytest.raises(ConfigError, match="'min_silos' parameter of FaultPolicy"):
        FaultPolicy(min_silos=0)
    with pytest.raises(ConfigError, match="'timeout' parameter of FaultPolicy"):
        FaultPolicy(timeout=-1)


def test_saved_summaries_reload_identically_and_tampering_is_detected(tmp_path):
    summaries = [make_summary("site/A", seed=1), make_summary("B", seed=2, counts=None)]
    save_summaries(summaries, tmp_path)
    back = load_summaries(tmp_path)
    assert list(back) == ["site/A", "B"]
    for s in summaries:
        b = back[s.silo]
        for key, value in s.to_arrays().items():
            np.testing.assert_array_equal(np.asarray(b.to_arrays()[key]), np.asarray(value))
    assert back["B"].counts is None
    target = tmp_path / "summary-000.npz"
    target.write_bytes(target.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(InconsistentSiloSummaries, match="'site/A'.*modified after it was saved"):
        load_summaries(tmp_path)
    with pytest.raises(InconsistentSiloSummaries, match="no manifest.json"):
        load_summaries(tmp_path / "nowhere")


class KillDuringSummarize:
    """Wraps a process pool and kills one silo's worker while the summarize round is running."""

    def __init__(self, pool, victim, delay=0.5):
        self.pool, self.victim, self.delay = pool, victim, delay
        self.silos = pool.silos

    def call(self, requests, *, timeout=None):
        import threading

        if any(isinstance(r, SummarizeRequest) for r in requests.values()):
            timer = threading.Timer(self.delay, self.pool.kill, args=(self.victim,))
            timer.start()
            try:
                return self.pool.call(requests, timeout=timeout)
            finally:
                timer.cancel()
        return self.pool.call(requests, timeout=timeout)

    def close(self):
        self.pool.close()


@pytest.mark.slow
@pytest.mark.parametrize("min_silos", [3, None])
def test_one_of_four_silos_killed_mid_run(small_sim, tiny_config, min_silos, tmp_path):
    from vcmc.config import AggregationConfig
    from vcmc.federation.transport import ProcessPoolTransport
    from vcmc.pipeline import run_vcmc

    cfg = dataclasses.replace(tiny_config, sampler=dataclasses.replace(tiny_config.sampler, n_iter=2000,
                                                                       burn_in=1500),
                              aggregation=AggregationConfig(max_iter=50))
    victim = small_sim.silos[1].name
    with ProcessPoolTransport(small_sim.silos) as pool:
        pids = pool.pids()
        tr = KillDuringSummarize(pool, victim)
        if min_silos is None:
            with pytest.raises(SiloFailure, match=rf"silo '{victim}'.*died"):
                run_vcmc(tr, cfg, rng=4, policy=FaultPolicy(min_silos=None), save_dir=tmp_path)
        else:
            with pytest.warns(UserWarning, match=rf"silo '{victim}'") as record:
                result = run_vcmc(tr, cfg, rng=4, policy=FaultPolicy(min_silos=3), save_dir=tmp_path)
            assert any(issubclass(w.category, SiloDroppedWarning) for w in record)
            others = tuple(s.name for s in small_sim.silos if s.name != victim)
            assert result.silos == others
            assert result.partition_counts.shape[0] == 3
            np.testing.assert_array_equal(result.partition_counts.sum(axis=1),
                                          [small_sim.silos[0].n_rows] * 3)
            assert any(victim in w for w in result.diagnostics["warnings"])
            # what was computed is kept: the three summaries were saved and reload
            assert tuple(load_summaries(tmp_path)) == others
    import pathlib

    assert not any(pathlib.Path(f"/proc/{p}").exists() and "zombie" not in
                   pathlib.Path(f"/proc/{p}/status").read_text().lower() for p in pids.values())
