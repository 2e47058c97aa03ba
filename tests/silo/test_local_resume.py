"""A silo with a state folder answers a repeated summarize request without re-running its sampler."""


import numpy as np
import pytest

import vcmc.mcmc.apply as apply_mod
from vcmc.config import FitConfig, SamplerConfig
from vcmc.protocol import AssignRequest, SiloConfig, SummarizeRequest
from vcmc.research.simulate import simulate_design
from vcmc.silo.local import LocalSilo


@pytest.fixture(scope="module")
def silo_data():
    return simulate_design("nested", "easy", rng=4, n_per_silo=300).silos[0]


def request(seed=1):
    cfg = FitConfig(sampler=SamplerConfig(n_iter=400, burn_in=200))
    return SummarizeRequest(config=SiloConfig.from_fit_config(cfg), n_silos=4, seed_entropy=seed, spawn_key=(0, 0))


def test_repeated_request_is_served_from_the_state_folder(tmp_path, silo_data, monkeypatch):
    first = LocalSilo(silo_data, state_dir=tmp_path)
    s1 = first.summarize(request())
    assert len(list(tmp_path.glob("*.npz"))) == 1

    def boom(*a, **k):
        raise AssertionError("the sampler must not run again")

    monkeypatch.setattr(apply_mod, "run_apply_step", boom)
    again = LocalSilo(silo_data, state_dir=tmp_path)
    s2 = again.summarize(request())
    np.testing.assert_array_equal(s1.pi_draws, s2.pi_draws)
    np.testing.assert_array_equal(s1.counts, s2.counts)
    # the restored silo can answer the later requests (its local partition came back too)
    reply = again.assign(AssignRequest(assignment=np.arange(s2.n_clusters), n_global=s2.n_clusters))
    np.testing.assert_array_equal(reply.counts, s2.cluster_sizes)
    # another seed is another request: not served from the folder
    with pytest.raises(AssertionError, match="must not run again"):
        again.summarize(request(seed=2))


def test_damaged_state_file_is_recomputed(tmp_path, silo_data):
    silo = LocalSilo(silo_data, state_dir=tmp_path)
    s1 = silo.summarize(request())
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not an npz")
    s2 = LocalSilo(silo_data, state_dir=tmp_path).summarize(request())
    np.testing.assert_array_equal(s1.pi_draws, s2.pi_draws)


def test_a_state_file_of_another_seed_renamed_into_place_is_refused_with_the_reason(tmp_path, silo_data):
    """The file's own key is checked, not only its name: a state written under seed 2 and renamed to the
    name of the seed-1 state is refused, naming the file, both seeds and the fix."""
    LocalSilo(silo_data, state_dir=tmp_path / "a").summarize(request(seed=1))
    LocalSilo(silo_data, state_dir=tmp_path / "b").summarize(request(seed=2))
    (right,) = (tmp_path / "a").glob("*.npz")
    (other,) = (tmp_path / "b").glob("*.npz")
    other.replace(right)
    from vcmc.exceptions import StateCacheError

    with pytest.raises(StateCacheError, match=r"saved state .*\.npz was written for another run or silo "
                                              r"\(seed '2' \(this run: '1'\)\).*Remove it, or run with "
                                              r"--no-resume"):
        LocalSilo(silo_data, state_dir=tmp_path / "a").summarize(request(seed=1))


def test_a_state_file_of_another_silo_is_refused_naming_both_silos(tmp_path, silo_data):
    import dataclasses

    twin = dataclasses.replace(silo_data, name="other")
    LocalSilo(twin, state_dir=tmp_path / "b").summarize(request())
    mine = LocalSilo(silo_data, state_dir=tmp_path / "a")
    from vcmc.silo.summary_cache import path_of

    target = path_of(mine, request())
    target.parent.mkdir()
    (other,) = (tmp_path / "b").glob("*.npz")
    other.replace(target)
    from vcmc.exceptions import StateCacheError

    with pytest.raises(StateCacheError, match=r"silo 'silo_1'.*silo 'other' \(this run: 'silo_1'\)"):
        mine.summarize(request())


def test_a_state_file_changed_after_it_was_written_fails_its_digest_and_is_recomputed(tmp_path, silo_data,
                                                                                     caplog):
    s1 = LocalSilo(silo_data, state_dir=tmp_path).summarize(request())
    (path,) = tmp_path.glob("*.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["summary.pi_draws"] = arrays["summary.pi_draws"][::-1].copy()   # shuffled draws, same key
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    with caplog.at_level("WARNING", logger="vcmc.silo"):
        s2 = LocalSilo(silo_data, state_dir=tmp_path).summarize(request())
    assert "does not match its digest" in caplog.text
    np.testing.assert_array_equal(s1.pi_draws, s2.pi_draws)


def test_a_failed_state_write_is_a_warning_not_a_lost_summary(tmp_path, silo_data, caplog):
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state folder should be")
    with caplog.at_level("WARNING", logger="vcmc.silo"):
        summary = LocalSilo(silo_data, state_dir=blocker).summarize(request())
    assert summary.n_clusters >= 1 and "could not save its state" in caplog.text
