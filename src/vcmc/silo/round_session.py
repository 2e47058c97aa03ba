"""What a silo keeps of the rounds between messages besides its rows' allocations (``vcmc.rows.rounds``) and the
pooled chain (``vcmc.pooled.chain``): the participants, its place among them, the run's context digest, the
secrets of the secure sums, the chain's plan and its seeds, the births and the next round it answers. Kept on
the silo's host with its state (a SuperNode's ``context.state``); never sent."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # the pooled chain imports numba: loaded when a round is answered, not for a hello
    from vcmc.pooled.chain import ChainPlan, Seeds


@dataclasses.dataclass
class RoundSession:
    """One run's rounds in one silo."""

    names: list[str]
    index: int
    context: str                    # hex digest of the run's identity and the start request (vcmc.silo.secure_sum)
    secure: bool
    plan: dict                      # ChainPlan's fields
    start_row: list[int]            # this silo's local clusters -> components
    used: int                       # components the start map uses (births take the next ones)
    birth_share: float
    birth_budget: int
    silo_weight_prior: float = 0.0  # > 0: the rows' memberships under the silo's own weights
    seed_entropy: str = "0"         # the streams (vcmc.pooled.chain.Seeds); str: a 256-bit integer in JSON
    seed_prefix: list[int] = dataclasses.field(default_factory=list)
    secrets: list[str] = dataclasses.field(default_factory=list)    # pair secrets (hex; "" at its own index)
    own_share: str = ""
    group: str = ""                 # the group secret (hex), once every share arrived
    next_round: int = -1            # the round whose vectors the next sweep request must carry
    births: dict = dataclasses.field(default_factory=lambda: {"columns": [], "rows": [], "components": []})

    def chain_plan(self) -> ChainPlan:
        from vcmc.pooled.chain import ChainPlan

        p = dict(self.plan)
        return ChainPlan(**{**p, "beta_cols": tuple(p["beta_cols"]), "n_modalities": tuple(p["n_modalities"]),
                            "checkpoints": tuple(p["checkpoints"])})

    def seeds(self) -> Seeds:
        from vcmc.pooled.chain import Seeds

        return Seeds(int(self.seed_entropy), tuple(self.seed_prefix))

    def export(self) -> dict[str, np.ndarray]:
        return {"round_session": np.asarray([json.dumps(dataclasses.asdict(self))])}

    @classmethod
    def restore(cls, state) -> RoundSession | None:
        if "round_session" not in state:
            return None
        return cls(**json.loads(str(np.asarray(state["round_session"]).ravel()[0])))
