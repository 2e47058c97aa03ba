"""Transports: in-process and process pool give the same replies; failures become sanitised SiloFailures."""

import functools
import os
import pathlib

import numpy as np

from vcmc.exceptions import DataError, SiloFailure
from vcmc.federation.transport import InProcessTransport, ProcessPoolTransport, Transport
from vcmc.protocol import AssignRequest, HelloReply
from vcmc.silo.local import LocalSilo


def _alive(pid):
    return pid is not None and pathlib.Path(f"/proc/{pid}").exists() and \
        "zombie" not in pathlib.Path(f"/proc/{pid}/status").read_text().lower()


def _comparable(summary):
    """Everything a silo sends except wall-clock timings."""
    return {k: v for k, v in summary.to_arrays().items() if "seconds" not in k and "rss" not in k}


def test_process_pool_gives_the_in_process_replies_and_leaves_no_process(small_sim, tiny_config,
                                                                          summarize_request):
    silos = small_sim.silos[:2]     # 2 cores in CI: one worker per core
    names = [d.name for d in silos]
    requests = {n: summarize_request(tiny_config, i) for i, n in enumerate(names)}
    with InProcessTransport([LocalSilo(d) for d in silos]) as tr:
        assert isinstance(tr, Transport)
        ref = tr.call(requests)
        ref_assign = tr.call({n: AssignRequest(assignment=np.zeros(ref[n].n_clusters, int), n_global=1)
                              for n in names})
    with ProcessPoolTransport(silos) as pool:
        assert isinstance(pool, Transport) and pool.silos == tuple(names)
        assert all(isinstance(h, HelloReply) for h in pool.hello.values())
        pids = pool.pids()
        assert all(_alive(p) for p in pids.values())
        got = pool.call(requests)
        got_assign = pool.call({n: AssignRequest(assignment=np.zeros(got[n].n_clusters, int), n_global=1)
                                for n in names})
        labels = pool.local_assignments()
    for n in names:
        a, b = _comparable(ref[n]), _comparable(got[n])
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=f"{n}.{key}")
        np.testing.assert_array_equal(ref_assign[n].counts, got_assign[n].counts)
        assert labels[n].shape == (small_sim.silos[0].n_rows,)
    assert not any(_alive(p) for p in pids.values())


class _Raising:
    """A silo whose request fails with an error quoting a data value."""

    def __init__(self, name):
        self.name = name

    def handle(self, request):
        raise DataError("column 'diagnosis' has unexpected value 'HIV-positive'")


def test_in_process_failure_is_sanitised_but_keeps_the_local_traceback(small_sim):
    tr = InProcessTransport([_Raising("A"), LocalSilo(small_sim.silos[0])])
    out = tr.call({"A": AssignRequest(assignment=np.zeros(1, int), n_global=1)})
    failure = out["A"]
    assert isinstance(failure, SiloFailure) and failure.silo == "A"
    assert "DataError" in str(failure) and "HIV" not in str(failure) and "diagnosis" not in str(failure)
    assert "HIV" in str(failure.__cause__)      # the local user still sees what happened


def test_pool_worker_failing_at_startup_is_reported_sanitised():
    loader = functools.partial(pathlib.Path.read_text, pathlib.Path("/nonexistent/patient-4711.csv"))
    with ProcessPoolTransport({"A": loader}) as pool:
        out = pool.call({"A": AssignRequest(assignment=np.zeros(1, int), n_global=1)})
    assert isinstance(out["A"], SiloFailure)
    assert "FileNotFoundError" in str(out["A"]) and "4711" not in str(out["A"])


def test_pool_timeout_and_killed_worker_are_reported_by_name(small_sim, tiny_config, summarize_request):
    import dataclasses

    long = dataclasses.replace(tiny_config, sampler=dataclasses.replace(tiny_config.sampler, n_iter=200_000,
                                                                        burn_in=100_000))
    silos = small_sim.silos[:2]
    with ProcessPoolTransport(silos) as pool:
        a, b = (d.name for d in silos)
        pid_a = pool.pids()[a]
        out = pool.call({a: summarize_request(long, 0)}, timeout=1.0)
        assert isinstance(out[a], SiloFailure) and "within 1 s" in out[a].reason
        assert not _alive(pid_a)                          # the stuck worker was stopped
        pool.kill(b)
        out = pool.call({a: AssignRequest(assignment=np.zeros(1, int), n_global=1),
                         b: AssignRequest(assignment=np.zeros(1, int), n_global=1)})
        assert isinstance(out[a], SiloFailure) and isinstance(out[b], SiloFailure)
        assert out[b].silo == b and "died" in out[b].reason
    assert os.getpid()  # the pool closed cleanly after failures


def test_pool_with_fewer_workers_than_silos_gives_the_same_replies(small_sim, tiny_config, summarize_request):
    """--jobs J caps the worker processes at J whatever the number of silos; replies do not change."""
    silos = small_sim.silos
    names = [d.name for d in silos]
    requests = {n: summarize_request(tiny_config, i) for i, n in enumerate(names)}
    with InProcessTransport([LocalSilo(d) for d in silos]) as tr:
        ref = tr.call(requests)
    with ProcessPoolTransport(silos, max_workers=2) as pool:
        pids = pool.pids()
        assert len(set(pids.values())) == 2 and set(pool.hello) == set(names)
        got = pool.call(requests)
        assign = pool.call({n: AssignRequest(assignment=np.zeros(got[n].n_clusters, int), n_global=1)
                            for n in names})
        assert set(pool.local_assignments()) == set(names)
        for n in names:
            a, b = _comparable(ref[n]), _comparable(got[n])
            for key in a:
                np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=f"{n}.{key}")
            assert assign[n].counts.sum() == silos[0].n_rows
        # killing a worker fails exactly the silos it hosts
        victim = names[0]
        shared = {n for n in names if pids[n] == pids[victim]}
        pool.kill(victim)
        out = pool.call({n: AssignRequest(assignment=np.zeros(got[n].n_clusters, int), n_global=1)
                         for n in names})
        assert {n for n, r in out.items() if isinstance(r, SiloFailure)} == shared
    assert not any(_alive(p) for p in pids.values())


def test_pool_worker_hosting_several_silos_times_out_every_queued_request(small_sim, tiny_config,
                                                                          summarize_request):
    """A worker gets all its silos' requests at once: a timeout fails each of them by name, the one being
    computed and the ones still queued behind it, and the pool still closes cleanly."""
    import dataclasses

    long = dataclasses.replace(tiny_config, sampler=dataclasses.replace(tiny_config.sampler, n_iter=200_000,
                                                                        burn_in=100_000))
    silos = small_sim.silos[:2]
    names = [d.name for d in silos]
    with ProcessPoolTransport(silos, max_workers=1) as pool:
        (pid,) = set(pool.pids().values())
        out = pool.call({n: summarize_request(long, i) for i, n in enumerate(names)}, timeout=1.0)
        assert all(isinstance(out[n], SiloFailure) and out[n].silo == n and "within 1 s" in out[n].reason
                   for n in names)
        assert not _alive(pid)
