"""parallel_map: input order, identical results for any number of processes, failing item named."""

import math
import operator

import numpy as np
import pytest

from vcmc._rng import as_generator, as_seed_sequence
from vcmc.exceptions import ConfigError
from vcmc.parallel import parallel_map, resolve_jobs


def test_serial_preserves_order_and_handles_empty():
    assert parallel_map(math.factorial, [5, 0, 3]) == [120, 1, 6]
    assert parallel_map(math.factorial, []) == []


def test_processes_give_the_same_results_as_serial():
    # all randomness comes from the items: one spawned SeedSequence each
    # (module-level library functions only: the workers are spawned and import them by name)
    items = as_seed_sequence(99).spawn(5)
    serial = [g.random(3) for g in parallel_map(as_generator, items, jobs=1)]
    pooled = [g.random(3) for g in parallel_map(as_generator, items, jobs=2, progress_desc="test")]
    for a, b in zip(serial, pooled, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("jobs", [1, 2])
def test_failure_names_the_item(jobs):
    with pytest.raises(ValueError, match="math domain error") as err:
        parallel_map(math.sqrt, [4.0, 9.0, -1.0], jobs=jobs)
    assert any("item 2 of 3" in note for note in err.value.__notes__)


def test_jobs_validation():
    assert resolve_jobs(8, 3) == 3
    assert resolve_jobs(-1, 1) == 1
    with pytest.raises(ConfigError, match="jobs"):
        resolve_jobs(0, 3)
    with pytest.raises(ConfigError, match="jobs"):
        parallel_map(operator.neg, [1], jobs=0)
