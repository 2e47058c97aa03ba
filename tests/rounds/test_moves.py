"""The rounds' split-merge move (vcmc.rounds.moves, docs/design.md §16) leaves the pooled posterior invariant:
on data small enough to enumerate every allocation, allocations drawn from the exact posterior keep their law
after one move (server proposal, silos' sums over their rows through the real messages and gate)."""

import itertools

import numpy as np
import pytest

from vcmc.config import FitConfig, PrivacyConfig, SamplerConfig
from vcmc.federation.faults import FaultPolicy
from vcmc.federation.transport import InProcessTransport
from vcmc.mcmc.sampler.round_kernels import counts
from vcmc.model import beta_per_column, profile_offsets
from vcmc.protocol import SiloConfig, SummarizeRequest
from vcmc.protocol.rounds import RoundStartRequest
from vcmc.research.simulate import simulate
from vcmc.rounds.moves import component_log_marginal
from vcmc.rounds.stage import _split_merge
from vcmc.silo.local import LocalSilo

ALPHA, BETA, C = 1.0, 1.0, 4
N_MOD = [2, 2, 2]


@pytest.fixture(scope="module")
def tiny():
    data = simulate(n_per_silo=[4, 4], weights=np.array([[0.5, 0.5], [0.5, 0.5]]), n_modalities=N_MOD,
                    concentration=0.3, rng=3, exact=True)
    codes = np.concatenate([s.codes for s in data.silos])
    off = profile_offsets(N_MOD)
    beta = beta_per_column(BETA, N_MOD)
    onehot = np.zeros((codes.shape[0], int(off[-1])))
    for q in range(len(N_MOD)):
        onehot[np.arange(codes.shape[0]), off[q] + codes[:, q]] = 1
    states = np.asarray(list(itertools.product(range(C), repeat=codes.shape[0])))
    logp = np.array([sum(component_log_marginal(np.sum(z == c), onehot[z == c].sum(axis=0), alpha=ALPHA,
                                                beta_cols=beta, offsets=off) for c in range(C) if np.any(z == c))
                     for z in states])
    p = np.exp(logp - logp.max())
    return data, states, p / p.sum(), beta, off


def _silos(data):
    silos = []
    for s in data.silos:
        silo = LocalSilo(s, run_key="run-1", privacy=PrivacyConfig(min_cluster_size=1))
        cfg = FitConfig(sampler=SamplerConfig(n_iter=40, burn_in=20, thin=1), privacy=PrivacyConfig(min_cluster_size=1))
        silo.handle(SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=2, seed_entropy=1, spawn_key=(0,)))
        silo.assignments = np.zeros(s.n_rows, dtype=np.int64)     # the rounds start from one-shot labels
        silo.handle(RoundStartRequest(start=np.array([0]), n_components=C))
        silos.append(silo)
    return silos


def _k(cluster):
    return int(np.count_nonzero(np.asarray(cluster) > 0))


def _pair(before, after, kind):
    """(a, b) of an accepted move from the counts: b is emptied by a merge and filled by a split."""
    before, after = np.asarray(before), np.asarray(after)
    grew, shrank = np.flatnonzero(after > before), np.flatnonzero(after < before)
    if kind == "merge":
        return int(grew[0]), int(shrank[0])
    return int(shrank[0]), int(grew[0])


def test_moves_keep_the_exact_posterior_of_the_number_of_clusters(tiny):
    # chains of moves alone (no sweeps), each started from an exact posterior draw: a kernel that leaves the
    # posterior invariant keeps the law of K at every step; a wrong acceptance ratio drifts away from it
    data, states, p, beta, off = tiny
    silos = _silos(data)
    transport = InProcessTransport(silos)
    names = transport.silos
    rng = np.random.default_rng(7)
    root = np.random.SeedSequence(11)
    n_chains, n_moves = 400, 15
    k_exact = np.bincount([_k(np.bincount(z, minlength=C)) for z in states], weights=p, minlength=C + 1)
    split = np.cumsum([s.n_rows for s in data.silos])[:-1]
    k_start, k_end, accepted = [], [], 0
    for t in range(n_chains):
        z = states[rng.choice(len(states), p=p)]
        cluster = np.zeros(C)
        modality = np.zeros((C, int(off[-1])))
        for silo, zs in zip(silos, np.split(z, split), strict=True):
            silo.rounds.z = zs.astype(silo.rounds.z.dtype)
            nc, ct = counts(*silo.rounds.kernel_layout(), silo.rounds.z, int(off[-1]), C)
            cluster += nc
            modality += ct
        k_start.append(_k(cluster))
        for m in range(n_moves):
            # the silos answer for the allocation the accepted moves reached (merges relabel b as a, splits move
            # the rows their silos drew)
            prev = cluster
            kind, ok, cluster, modality, _ = _split_merge(transport, names, FaultPolicy(min_silos=None), cluster,
                                                          modality, 2 + t * n_moves + m, root, rng, alpha=ALPHA,
                                                          beta_cols=beta, offsets=off)
            accepted += ok
            if ok:   # what the next sweep's draw would start from: the accepted allocation
                a, b = _pair(prev, cluster, kind)
                for silo in silos:
                    zs = silo.rounds.z
                    if kind == "merge":
                        zs[zs == b] = a
                    else:
                        zs[silo.rounds.last_split] = b
        k_end.append(_k(cluster))
    assert accepted >= 300, "the test needs moves that are accepted"
    sd = np.sqrt(k_exact * (1 - k_exact) / n_chains)
    for got in (k_start, k_end):    # the start checks the test itself
        freq = np.bincount(got, minlength=C + 1) / n_chains
        assert np.all(np.abs(freq - k_exact) <= 4 * sd + 1e-12), (freq, k_exact)
