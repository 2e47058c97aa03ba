"""A ClientApp's node state keeps a silo's continuous values beside its codes (docs/design.md §17.2): the run's
later messages rebuild the same SiloData."""

from __future__ import annotations

import types

import numpy as np
import pytest

pytest.importorskip("flwr")


def test_later_messages_rebuild_the_values(tmp_path):
    from flwr.app import RecordDict

    from vcmc.flower.node_data import cached_silo_data
    from vcmc.research.simulate_mixed import simulate_mixed

    silo = simulate_mixed([40], [0.5, 0.5], np.zeros((2, 2)), np.ones((2, 2)), missing=0.1, rng=1)[0][0]
    (tmp_path / "silo.csv").write_text("x")
    context = types.SimpleNamespace(state=RecordDict(), node_config={"data-path": str(tmp_path / "silo.csv")})
    first = cached_silo_data(context, lambda: silo)
    again = cached_silo_data(context, lambda: pytest.fail("the files were read again"))
    assert first is silo
    assert np.array_equal(again.values, silo.values, equal_nan=True) and np.array_equal(again.codes, silo.codes)
