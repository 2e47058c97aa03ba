"""Online pivot relabelling: artificial label switching must be undone exactly."""

from types import SimpleNamespace

import numpy as np
import pytest

from vcmc.exceptions import ConfigError
from vcmc.mcmc.relabel import (
    PivotRelabeller,
    align_chains,
    best_permutations,
    confusion_matrices,
)

C = 6
P = 5


def _truth(rng, n=300, k_true=4):
    z0 = rng.integers(0, k_true, size=n)
    pi0 = np.r_[rng.dirichlet(np.ones(k_true)), np.zeros(C - k_true)] * 0.99 + 0.01 / C
    prof0 = rng.dirichlet(np.ones(P), size=C)
    return z0, pi0, prof0


def _switched_blocks(rng, z0, pi0, prof0, n_blocks=3, m=40, noise=0.05):
    """Blocks of draws equal to the truth under a random permutation per draw (plus a few flipped rows).

    Returns the blocks and, per draw, the permutation applied (old true label -> label in the draw).
    """
    blocks, perms = [], []
    n = z0.size
    for b in range(n_blocks):
        zs, pis, profs, lps = [], [], [], []
        for _ in range(m):
            sigma = rng.permutation(C)
            z = z0.copy()
            flip = rng.random(n) < noise
            z[flip] = rng.integers(0, C, size=flip.sum())
            zs.append(sigma[z])
            pi = np.empty(C)
            pi[sigma] = pi0
            prof = np.empty((C, P))
            prof[sigma] = prof0
            pis.append(pi)
            profs.append(prof)
            lps.append(-float(flip.sum()) + rng.random() * 0.1)   # cleanest draws have the highest lp
            perms.append(sigma)
        blocks.append(SimpleNamespace(start=b * m, z=np.array(zs, dtype=np.int16), pi=np.array(pis),
                                      profiles=np.array(profs), n_occupied=np.full(m, 4),
                                      log_posterior=np.array(lps)))
    return blocks, np.array(perms)


def test_confusion_matrices_match_a_direct_count():
    rng = np.random.default_rng(1)
    z = rng.integers(0, C, size=(7, 50))
    ref = rng.integers(0, C, size=50)
    got = confusion_matrices(z, ref, C)
    for t in range(7):
        for c in range(C):
            for k in range(C):
                assert got[t, c, k] == np.sum((z[t] == c) & (ref == k))


def test_best_permutation_recovers_a_known_permutation():
    rng = np.random.default_rng(2)
    ref = rng.integers(0, C, size=200)
    sigma = rng.permutation(C)
    conf = confusion_matrices(sigma[ref][None, :], ref, C)
    perm = best_permutations(conf)[0]
    # old label sigma[k] must go back to k
    assert np.array_equal(perm[sigma], np.arange(C))
    assert np.array_equal(perm[sigma[ref]], ref)                 # the relabelled allocation is the reference


@pytest.mark.parametrize(("noise", "k_true"), [(0.0, C), (0.05, C), (0.0, 4), (0.05, 4)])
def test_relabeller_undoes_artificial_label_switching_exactly(noise, k_true):
    rng = np.random.default_rng(3)
    z0, pi0, prof0 = _truth(rng, k_true=k_true)
    blocks, perms = _switched_blocks(rng, z0, pi0, prof0, noise=noise)
    relab = PivotRelabeller(z0.size, C)
    for b in blocks:
        relab(b)
    out = relab.result()
    # The pivot is the first block's highest-lp draw; every draw must come back to the pivot's labelling.
    first = blocks[0]
    t_piv = int(np.argmax(first.log_posterior))
    sigma_piv = perms[t_piv]
    assert np.array_equal(out.pivot, first.z[t_piv])
    expected_pi = np.empty(C)
    expected_pi[sigma_piv] = pi0
    expected_prof = np.empty((C, P))
    expected_prof[sigma_piv] = prof0
    T = len(blocks) * first.z.shape[0]
    assert out.pi.shape == (T, C) and out.profiles.shape == (T, C, P)
    # Components empty in the truth have no rows to anchor them: only occupied ones are identified.
    occ = sigma_piv[:k_true]
    np.testing.assert_array_equal(out.pi[:, occ], np.broadcast_to(expected_pi[occ], (T, k_true)))
    np.testing.assert_array_equal(out.profiles[:, occ], np.broadcast_to(expected_prof[occ], (T, k_true, P)))
    # Counts: each row's modal relabelled allocation is its true label under the pivot's labelling.
    assert out.counts.shape == (z0.size, C)
    assert np.all(out.counts.sum(axis=1) == T)
    assert np.array_equal(np.argmax(out.counts, axis=1), sigma_piv[z0])
    assert np.all(out.sizes.sum(axis=1) == z0.size)
    if noise == 0.0:
        assert np.all(out.counts[np.arange(z0.size), sigma_piv[z0]] == T)
        np.testing.assert_array_equal(out.sizes, np.broadcast_to(np.bincount(sigma_piv[z0], minlength=C),
                                                                 (T, C)))


def test_relabelling_does_not_depend_on_block_sizes():
    rng = np.random.default_rng(4)
    z0, pi0, prof0 = _truth(rng, n=120)
    blocks, _ = _switched_blocks(rng, z0, pi0, prof0, n_blocks=1, m=60)
    whole = PivotRelabeller(120, C)
    whole(blocks[0])
    split = PivotRelabeller(120, C)
    b = blocks[0]
    for s in (slice(0, 60), slice(60, 60)):   # an empty block is ignored
        split(SimpleNamespace(z=b.z[s], pi=b.pi[s], profiles=b.profiles[s], n_occupied=b.n_occupied[s],
                              log_posterior=b.log_posterior[s]))
    a, c = whole.result(), split.result()
    np.testing.assert_array_equal(a.counts, c.counts)
    np.testing.assert_array_equal(a.pi, c.pi)


def test_align_chains_undoes_a_chain_level_permutation():
    rng = np.random.default_rng(5)
    z0, pi0, prof0 = _truth(rng)
    blocks, _ = _switched_blocks(rng, z0, pi0, prof0, n_blocks=1)
    relab = PivotRelabeller(z0.size, C)
    relab(blocks[0])
    ch1 = relab.result()
    sigma = rng.permutation(C)
    ch2 = ch1.permuted(sigma)
    assert not np.array_equal(ch2.counts, ch1.counts)
    a1, a2 = align_chains([ch1, ch2])
    np.testing.assert_array_equal(a2.counts, ch1.counts)
    np.testing.assert_array_equal(a2.pi, ch1.pi)
    np.testing.assert_array_equal(a2.profiles, ch1.profiles)
    assert a1 is ch1


def test_psm_accumulation_matches_the_definition():
    rng = np.random.default_rng(6)
    n, m = 40, 25
    z = rng.integers(0, C, size=(m, n)).astype(np.int16)
    block = SimpleNamespace(z=z, pi=rng.dirichlet(np.ones(C), size=m), profiles=np.ones((m, C, P)) / P,
                            n_occupied=np.full(m, C), log_posterior=rng.normal(size=m))
    relab = PivotRelabeller(n, C, accumulate_psm=True)
    relab(block)
    expected = (z[:, :, None] == z[:, None, :]).sum(axis=0)
    np.testing.assert_array_equal(relab.result().psm, expected)


def test_psm_is_refused_for_large_silos():
    with pytest.raises(ConfigError, match="5000 rows"):
        PivotRelabeller(5001, C, accumulate_psm=True)


def test_result_without_draws_is_a_clear_error():
    with pytest.raises(ValueError, match="no kept draw"):
        PivotRelabeller(10, C).result()


def test_relabelling_in_the_chains_storage_equals_relabelling_into_buffers_of_its_own():
    """The apply step relabels the draws where the sampler stored them (``storage``); the relabelled chain is
    the one the copying path gives, and the blocks may come in any sizes."""
    rng = np.random.default_rng(6)
    z0, pi0, prof0 = _truth(rng, n=150)
    blocks, _ = _switched_blocks(rng, z0, pi0, prof0, n_blocks=3, m=25)
    copied = PivotRelabeller(150, C)
    pi_store = np.concatenate([b.pi for b in blocks])
    prof_store = np.concatenate([b.profiles for b in blocks])
    in_place = PivotRelabeller(150, C, storage=(pi_store, prof_store))
    start = 0
    for b in blocks:
        copied(b)
        in_place(SimpleNamespace(start=start, z=b.z, pi=b.pi, profiles=b.profiles, n_occupied=b.n_occupied,
                                 log_posterior=b.log_posterior))
        start += b.z.shape[0]
    a, c = copied.result(), in_place.result()
    assert np.shares_memory(c.profiles, prof_store)          # no copy of the draws
    for field in ("pi", "profiles", "counts", "sizes", "n_occupied", "log_posterior", "pivot"):
        np.testing.assert_array_equal(getattr(a, field), getattr(c, field))
    with pytest.raises(ValueError, match="came after"):
        in_place(SimpleNamespace(start=0, z=blocks[0].z, pi=None, profiles=None, n_occupied=None,
                                 log_posterior=blocks[0].log_posterior))
