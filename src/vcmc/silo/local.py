"""``LocalSilo``: the silo side of the boundary, living where the data are.

It answers the requests of ``vcmc.protocol`` and nothing else: ``handle`` is the only entry point (the
public methods call it). Every request passes ``Gate.admit``, is answered by its endpoint
(``vcmc.silo.endpoints``: one module per request family) and its reply passes ``Gate.release``
(``vcmc.silo.gate``: the operator's limits). Everything row-level (codes, the local partition, membership
probabilities, the global labels) stays in this object. The same class runs in-process, inside a worker
process of the process pool and inside a Flower ClientApp.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np

from vcmc.config import PrivacyConfig
from vcmc.disclosure import effective_privacy
from vcmc.exceptions import ConfigError, NotFittedError
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.protocol import (
    AnnounceReply,
    AnnounceRequest,
    AssessReply,
    AssessRequest,
    AssignReply,
    AssignRequest,
    CountsReply,
    CountsRequest,
    DivergenceReply,
    DivergenceRequest,
    HelloReply,
    HelloRequest,
    Message,
    SiloSummary,
    SummarizeRequest,
)
from vcmc.silo.endpoints import endpoint_of
from vcmc.silo.gate import Gate
from vcmc.silo.policy import SiloPolicy

_STATE_FIELDS = ("partition", "membership", "pi_draws", "profile_draws", "n_occupied", "log_posterior")


class LocalSilo:
    """One silo: its data, its operator's disclosure limits and the state of the current run.

    Parameters
    ----------
    data : vcmc.data.SiloData
        The silo's encoded data (name, codes, schema).
    privacy : PrivacyConfig, optional
        Disclosure limits set by the silo's operator (default ``PrivacyConfig()``). The server's
        ``FitConfig.privacy`` can only tighten them (``vcmc.disclosure.effective_privacy``).
    jobs : int
        Processes for the silo's chains (passed to the apply step; the result does not depend on it).
    progress : callable, optional
        Called with numbers of Gibbs iterations done (progress bars).
    secure_noise : bool
        Differential-privacy noise from OpenDP's OS-seeded sampler (default). False draws it from the
        run's seed instead: reproducible, for simulation studies only, never in a deployment.
    policy : SiloPolicy, optional
        The operator-only limits of the boundary (``vcmc.silo.gate``). Default ``SiloPolicy.own_data()``:
        a silo built in the analyst's own session; a deployment builds it from the node config.
    run_key : str, optional
        The run's identity in a deployment (Flower's run id): keys the schema fingerprint sent.
    state_dir : path, optional
        A folder on the silo's own host where each finished apply step is saved (the local posterior and
        the summary sent), keyed by the request, the data and the disclosure limits. A later identical
        ``summarize`` request (an interrupted run started again) is answered from it without re-running
        the sampler (``vcmc.silo.summary_cache``). It holds row-level state: keep it with the data.
    out_dir : path, optional
        A folder on the silo's own host where the silo writes its rows' memberships and labels
        (memberships.csv, assignments.csv) after the run's assign and after the rounds (a deployment's node
        config ``out-dir``; the analyst's own session writes them with the result instead).
    allowed_auxiliary : mapping of str to tuple of str, optional
        The columns the operator allows as covariates (``"covariate"``) and distal outcomes (``"distal"``) of
        the latent class analysis (a deployment's node config); None: any column of ``auxiliary``.
    rounds_key : str, optional
        The silo's static private key of the rounds' secure sums (hex; a deployment's node config
        ``rounds-key``), and ``rounds_peers`` the other silos' public keys by name (``rounds-peers``), pinned by
        its operator (``vcmc.silo.secure_sum``). A deployment's silo answers the rounds only with them.

    Attributes
    ----------
    name : str
    local : LocalPosterior or None
        The post-processed, disclosure-controlled local posterior of the last ``summarize``.
    assignments : ndarray of shape (n_rows,) or None
        Global cluster of each row after ``assign``; stays in the silo.
    memberships : ndarray of shape (n_rows, C) or None
        Posterior probability of each row belonging to each global cluster after ``assign``; stays in
        the silo.
    """

    def __init__(self, data, *, privacy: PrivacyConfig | None = None, jobs: int = 1, progress=None,
                 secure_noise: bool = True, state_dir=None, auxiliary=None, policy: SiloPolicy | None = None,
                 run_key: str | None = None, out_dir=None, allowed_auxiliary=None, rounds_key: str | None = None,
                 rounds_peers=None):
        privacy = PrivacyConfig() if privacy is None else privacy
        if not isinstance(privacy, PrivacyConfig):
            raise ConfigError(f"The 'privacy' parameter of LocalSilo must be a PrivacyConfig. Got "
                              f"{type(privacy).__name__} instead.")
        self.data = data
        self.name = str(data.name)
        self.privacy = privacy
        self.jobs = int(jobs)
        self.progress = progress
        self.secure_noise = secure_noise
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.local: LocalPosterior | None = None
        self.assignments: np.ndarray | None = None
        self.memberships: np.ndarray | None = None
        self.rounds = None          # vcmc.rows.rounds.RoundState of the global-informed rounds (row-level)
        self.round_session = None   # vcmc.silo.round_session.RoundSession: the rounds' plan and secrets
        self.chain = None           # vcmc.pooled.chain.PooledChain, the pooled chain this silo runs
        # the operator's limits tightened by the server's privacy section of the last summarize request
        self.privacy_in_force: PrivacyConfig = privacy
        policy = SiloPolicy.own_data() if policy is None else policy
        if not isinstance(policy, SiloPolicy):
            raise ConfigError(f"The 'policy' parameter of LocalSilo must be a SiloPolicy. Got "
                              f"{type(policy).__name__} instead.")
        self.gate = Gate(self, policy, run_key=run_key)
        self.own_session = policy == SiloPolicy.own_data()
        """Whether this silo is the analyst's own (``SiloPolicy.own_data``), not a deployment's."""
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.allowed_auxiliary = allowed_auxiliary
        self.rounds_key = rounds_key
        self.rounds_peers = dict(rounds_peers or {})
        # columns of the silo's file kept out of the clustering (covariates, distal outcomes of the latent
        # class analysis, docs/design.md §15): a row-aligned DataFrame that never leaves the silo
        self.auxiliary = auxiliary

    # -- the one entry point ---------------------------------------------------------------------------

    def handle(self, request: Message) -> Message:
        """Answer one request: admitted by the gate, answered by its endpoint, released by the gate.

        Exceptions propagate; transports sanitise them.
        """
        request = self.gate.admit(request)
        endpoint = endpoint_of(request)
        reply = self.gate.release(request, endpoint.answer(self, request))
        if endpoint.after is not None:
            endpoint.after(self, request)
        return reply

    @functools.cached_property
    def n_columns(self) -> int:
        return int(np.sum(self.n_modalities))

    def local_table(self) -> np.ndarray:
        """The cluster-by-modality table of the local partition (row-level sums; stays in the silo)."""
        from vcmc.family import CATEGORICAL

        local = self.require_local("summary")
        return CATEGORICAL.sufficient_statistics(self.codes, local.partition, local.n_clusters, self.n_modalities)

    # -- requests ----------------------------------------------------------------------------------------

    @property
    def codes(self) -> np.ndarray:
        return self.data.codes

    @functools.cached_property
    def values(self) -> np.ndarray | None:
        """The Gaussian items on the model's standardised scale (docs/design.md §17.2); None when there are none."""
        from vcmc.data.continuous import standardised

        return standardised(getattr(self.data, "values", None), self.data.schema.continuous)

    @functools.cached_property
    def n_modalities(self) -> tuple[int, ...]:
        # cached: the gate asks for it on every round's request (a silo's data never change in a run)
        return tuple(int(k) for k in self.data.schema.n_modalities)

    def hello(self, request: HelloRequest | None = None) -> HelloReply:
        """Name, schema fingerprint and modality counts, vcmc version."""
        return self.handle(HelloRequest() if request is None else request)

    def summarize(self, request: SummarizeRequest) -> SiloSummary:
        """Apply step, then disclosure control, then the summary (docs/design.md §4.3)."""
        return self.handle(request)

    def membership_divergence(self, request: DivergenceRequest) -> DivergenceReply:
        """Cost of matching each local cluster to each reference cluster (minimum-divergence matching)."""
        return self.handle(request)

    def counts(self, request: CountsRequest) -> CountsReply:
        """Counts at parameters chosen by the server (federated-gradient and design strategies)."""
        return self.handle(request)

    def announce(self, request: AnnounceRequest) -> AnnounceReply:
        """Record the run's global draws (checked against what this silo sent) for assign and assess."""
        return self.handle(request)

    def assign(self, request: AssignRequest) -> AssignReply:
        """Memberships of every row in the global clusters and its label (both kept in the silo)."""
        return self.handle(request)

    def assess(self, request: AssessRequest) -> AssessReply:
        """Predictive checks, WAIC sums and sampled occupancy under the global draws (docs/design.md §14)."""
        return self.handle(request)

    def require_local(self, what: str) -> LocalPosterior:
        """The local posterior of this run's summary; ``NotFittedError`` before one."""
        if self.local is None:
            raise NotFittedError(f"silo {self.name!r} received a {what} request before a summarize request "
                                 "(or lost its state); run the summarize step first")
        return self.local

    def check_assignment(self, assignment, n_global: int, what: str) -> np.ndarray:
        """A matching of the silo's local clusters to ``n_global`` global clusters, checked."""
        local = self.require_local(what)
        a = np.asarray(assignment, dtype=np.int64).ravel()
        if a.shape != (local.n_clusters,) or (a.size and (a.min() < 0 or a.max() >= int(n_global))):
            raise ConfigError(f"{what}: the assignment must map the silo's {local.n_clusters} local clusters "
                              f"to global clusters in [0, {int(n_global)}); got shape {a.shape}")
        return a

    def write_labels(self, *, rounds: bool = False) -> None:
        """Write the silo's memberships and labels into its operator's ``out_dir`` (if set), atomically; only the
        first assign of a run writes it, and the first finish of the rounds once more
        (``Gate.may_write_out_dir``)."""
        if self.out_dir is None or self.assignments is None or not self.gate.may_write_out_dir(rounds=rounds):
            return
        from vcmc.rows.memberships import write_membership_files

        write_membership_files(self.out_dir, [(self.name, self.memberships, self.assignments)])

    # -- state that must survive between messages (Flower starts a fresh process per message) -------------

    def export_state(self) -> dict[str, np.ndarray]:
        """Arrays of the run's state (row-level: they must stay on the silo's host), for ``restore_state``."""
        out: dict[str, np.ndarray] = {}
        if self.local is not None:
            for f in _STATE_FIELDS:
                out[f"local.{f}"] = np.asarray(getattr(self.local, f))
            out["local.n_modalities"] = np.asarray(self.local.n_modalities, dtype=np.int64)
            out["local.meta"] = np.asarray([self.local.n_components, self.local.n_reallocated],
                                           dtype=np.int64)
            keys = sorted(self.local.diagnostics)
            out["local.diag_keys"] = np.asarray(keys, dtype=np.str_)
            out["local.diag_values"] = np.asarray([self.local.diagnostics[k] for k in keys], dtype=np.float64)
        if self.assignments is not None:
            out["assignments"] = self.assignments
        if self.memberships is not None:
            out["memberships"] = self.memberships
        if self.rounds is not None:
            out.update(self.rounds.export())
        if self.round_session is not None:
            out.update(self.round_session.export())
        if self.chain is not None:
            out.update(self.chain.export())
        out["privacy_in_force"] = np.asarray([json.dumps(dataclasses.asdict(self.privacy_in_force))])
        out.update(self.gate.export_state())
        return out

    def restore_state(self, state) -> None:
        """Restore what ``export_state`` returned (a mapping of name to array)."""
        state = dict(state)
        if "local.partition" in state:
            meta = np.asarray(state["local.meta"])
            diag = dict(zip(np.asarray(state["local.diag_keys"]).tolist(),
                            np.asarray(state["local.diag_values"], dtype=float).tolist(), strict=True))
            self.local = LocalPosterior(
                **{f: np.asarray(state[f"local.{f}"]) for f in _STATE_FIELDS},
                n_modalities=tuple(int(k) for k in np.asarray(state["local.n_modalities"])),
                n_components=int(meta[0]), n_reallocated=int(meta[1]), diagnostics=diag)
        else:
            self.local = None
        self.assignments = np.asarray(state["assignments"]) if "assignments" in state else None
        self.memberships = np.asarray(state["memberships"]) if "memberships" in state else None
        from vcmc.rows.rounds import RoundState
        from vcmc.silo.round_session import RoundSession

        self.rounds = RoundState.restore(state)
        self.round_session = RoundSession.restore(state)
        self.chain = None
        if self.round_session is not None and "chain.meta" in state:
            from vcmc.pooled.chain import PooledChain

            self.chain = PooledChain.restore(self.round_session.chain_plan(), self.round_session.seeds(), state)
        if "privacy_in_force" in state:
            saved = PrivacyConfig(**json.loads(str(np.asarray(state["privacy_in_force"]).ravel()[0])))
            # never looser than this operator's own limits, whatever the stored state says
            self.privacy_in_force = effective_privacy(self.privacy, saved)
        self.gate.restore_state(state)
