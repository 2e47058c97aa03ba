"""``LocalSilo``: the silo side of the boundary, living where the data are.

It answers the requests of ``vcmc.protocol`` and nothing else: ``handle`` is the only entry point (the
public methods call it). Every request passes ``Gate.admit`` and every reply ``Gate.release``
(``vcmc.silo.gate``: the operator's limits, one place). Everything row-level (codes, the local partition,
membership probabilities, the global labels) stays in this object. The same class runs in-process, inside a
worker process of the process pool and inside a Flower ClientApp.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from vcmc.atomic import atomic_path
from vcmc.config import PrivacyConfig
from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError, StateCacheError
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
from vcmc.protocol.lca import LCA_REPLY_TYPE
from vcmc.protocol.rounds import (
    RoundAssessRequest,
    RoundBirthRequest,
    RoundFinishRequest,
    RoundKeyRequest,
    RoundMoveRequest,
    RoundStartRequest,
    RoundSweepRequest,
)
from vcmc.silo.disclosure import apply_min_cluster_size, effective_privacy
from vcmc.silo.gate import Gate, SiloPolicy
from vcmc.silo.posterior import LocalPosterior

_STATE_FIELDS = ("partition", "membership", "pi_draws", "profile_draws", "n_occupied", "log_posterior")
_STATE_FORMAT = 2     # 2: the file holds its key and a digest of its arrays
silo_log = logging.getLogger("vcmc.silo")
LCA_REQUEST_TYPES = tuple(LCA_REPLY_TYPE)


def _config_text(config) -> bytes:
    """The request's options as canonical text (the state file's key): their wire encoding, keys sorted."""
    plain = {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in config.to_arrays().items()}
    return json.dumps(plain, sort_keys=True).encode()


def _arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the arrays' names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


_KEY_WORDS = {"silo": "silo", "seed": "seed", "spawn_key": "position among the silos",
              "n_silos": "number of silos", "config": "options", "privacy": "disclosure limits",
              "data": "data", "secure_noise": "noise source", "format": "vcmc state format"}


def _explain_key_mismatch(path: Path, stored: dict, expected: dict) -> str:
    """Which parts of the key differ, in words (names, seeds and digests only: no data value)."""
    diffs = []
    for part in ("silo", "seed", "spawn_key", "n_silos", "config", "privacy", "data", "secure_noise", "format"):
        if stored.get(part) != expected.get(part):
            if part in ("silo", "seed", "n_silos"):
                diffs.append(f"{_KEY_WORDS[part]} {stored.get(part)!r} (this run: {expected.get(part)!r})")
            else:
                diffs.append(f"other {_KEY_WORDS[part]}")
    return (f"silo {expected['silo']!r}: the saved state {path} was written for another run or silo ("
            + ", ".join(diffs) + "), so it was not used: a state file was renamed or copied into place. Remove "
            "it, or run with --no-resume, to sample again.")


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB): a machine figure, reported for benchmarks."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak / 2**20 if sys.platform == "darwin" else peak / 2**10)   # bytes on macOS, KiB on Linux


def _vcmc_version() -> str:
    try:
        return version("vcmc")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class LocalSilo:
    """One silo: its data, its operator's disclosure limits and the state of the current run.

    Parameters
    ----------
    data : vcmc.data.SiloData
        The silo's encoded data (name, codes, schema).
    privacy : PrivacyConfig, optional
        Disclosure limits set by the silo's operator (default ``PrivacyConfig()``). The server's
        ``FitConfig.privacy`` can only tighten them (``vcmc.silo.disclosure.effective_privacy``).
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
        the sampler. It holds row-level state: keep it with the data.

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
                 run_key: str | None = None):
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
        self.rounds = None          # vcmc.silo.rounds.RoundState of the global-informed rounds (row-level)
        # (K, P) mean of the global profile draws the rows were labelled with (the assign request's; None
        # when the labels came from the matching alone or from the rounds): the births' reference
        self.label_profiles: np.ndarray | None = None
        # the operator's limits tightened by the server's privacy section of the last summarize request
        self.privacy_in_force: PrivacyConfig = privacy
        policy = SiloPolicy.own_data() if policy is None else policy
        if not isinstance(policy, SiloPolicy):
            raise ConfigError(f"The 'policy' parameter of LocalSilo must be a SiloPolicy. Got "
                              f"{type(policy).__name__} instead.")
        self.gate = Gate(self, policy, run_key=run_key)
        # columns of the silo's file kept out of the clustering (covariates, distal outcomes of the latent
        # class analysis, docs/design.md §15): a row-aligned DataFrame that never leaves the silo
        self.auxiliary = auxiliary

    @property
    def own_session(self) -> bool:
        """Whether this silo is the analyst's own (``SiloPolicy.own_data``), not a deployment's."""
        return self.gate.policy == SiloPolicy.own_data()

    # -- the one entry point ---------------------------------------------------------------------------

    def handle(self, request: Message) -> Message:
        """Answer one request: admitted by the gate, dispatched by type, released by the gate.

        Exceptions propagate; transports sanitise them.
        """
        request = self.gate.admit(request)
        answer = self._HANDLERS.get(type(request))
        if answer is None:     # the gate admits only known request types; defensive
            raise ConfigError(f"silo {self.name!r} cannot answer a {request.KIND!r} message")
        return self.gate.release(request, answer(self, request))

    @functools.cached_property
    def n_columns(self) -> int:
        return int(np.sum(self.n_modalities))

    def local_table(self) -> np.ndarray:
        """The cluster-by-modality table of the local partition (row-level sums; stays in the silo)."""
        from vcmc.model import one_hot_counts

        local = self._require_local("summary")
        return one_hot_counts(self.codes, local.partition, local.n_clusters, self.n_modalities)

    # -- requests ----------------------------------------------------------------------------------------

    @property
    def codes(self) -> np.ndarray:
        return self.data.codes

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

    # -- the handlers (called by ``handle`` only, between the gate's two doors) ----------------------------

    def _answer_hello(self, request: HelloRequest) -> HelloReply:
        return HelloReply(silo=self.name, schema_fingerprint=self.data.schema.fingerprint(),
                          n_modalities=self.n_modalities, vcmc_version=_vcmc_version())

    def _answer_summarize(self, request: SummarizeRequest) -> SiloSummary:
        """Apply step, then disclosure control, then the summary (docs/design.md §4.3).

        Order: the Gibbs sampler and post-processing (``run_apply_step``); the minimum cluster size
        (``max(privacy.min_cluster_size, postprocess threshold)``); ``build_summary``; then suppression,
        rounding and DP noise of the counts. Counts are left out when either privacy config forbids them
        or the strategy is "federated-gradient" (which never needs a fixed table).
        """
        cached = self._load_cached(request)
        if cached is not None:
            return cached
        summary = self._summarize(request)
        self._save_cached(request, summary)
        return summary

    def _cache_key(self, request: SummarizeRequest) -> dict[str, str]:
        # Everything that determines the answer: the request (config, seed, number of silos), the data
        # and this silo's own disclosure limits; DP noise drawn from the OS is not reproducible, so a
        # summary with secure noise is cached as sent (re-sending it spends no new privacy budget). Kept
        # part by part inside the file, so that a file of another silo or seed renamed into place is
        # recognised and the difference said.
        def digest(b: bytes) -> str:
            return hashlib.sha256(b).hexdigest()[:20]

        return {"format": str(_STATE_FORMAT), "silo": self.name, "seed": str(int(request.seed_entropy)),
                "spawn_key": ",".join(str(int(k)) for k in request.spawn_key), "n_silos": str(int(request.n_silos)),
                "config": digest(_config_text(request.config)), "privacy": digest(repr(self.privacy).encode()),
                "secure_noise": str(bool(self.secure_noise)),
                "data": digest(self.data.schema.fingerprint().encode() + np.ascontiguousarray(self.codes).tobytes())}

    def _cache_path(self, key: dict[str, str]) -> Path:
        h = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in self.name)
        return self.state_dir / f"{safe}-{h[:20]}.npz"

    def _load_cached(self, request: SummarizeRequest) -> SiloSummary | None:
        if self.state_dir is None:
            return None
        key = self._cache_key(request)
        path = self._cache_path(key)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            stored_key = json.loads(str(arrays.pop("meta.key")))
            stored_digest = str(arrays.pop("meta.digest"))
        except Exception:  # noqa: BLE001 - a damaged or pre-digest file is recomputed, never trusted
            silo_log.warning("silo %r: the saved state %s cannot be read or has no digest; sampling again",
                             self.name, path)
            return None
        if _arrays_digest(arrays) != stored_digest:
            silo_log.warning("silo %r: the saved state %s does not match its digest (changed after it was "
                             "written); sampling again", self.name, path)
            return None
        if stored_key != key:
            raise StateCacheError(_explain_key_mismatch(path, stored_key, key))
        try:
            summary = SiloSummary.from_arrays({k[len("summary."):]: v for k, v in arrays.items()
                                               if k.startswith("summary.")})
            self.restore_state({k[len("state."):]: v for k, v in arrays.items() if k.startswith("state.")})
        except Exception:  # noqa: BLE001 - an older layout is recomputed, never trusted
            silo_log.warning("silo %r: the saved state %s has another layout; sampling again", self.name, path)
            return None
        self.assignments = self.memberships = self.label_profiles = None
        self.rounds = None
        self.privacy_in_force = effective_privacy(self.privacy, request.config.privacy)
        return summary

    def _save_cached(self, request: SummarizeRequest, summary: SiloSummary) -> None:
        if self.state_dir is None:
            return
        key = self._cache_key(request)
        path = self._cache_path(key)
        arrays = {f"summary.{k}": np.asarray(v) for k, v in summary.to_arrays().items()}
        arrays.update({f"state.{k}": v for k, v in self.export_state().items()
                       if k not in ("assignments", "memberships") and not k.startswith("gate.")})
        arrays["meta.digest"] = np.asarray(_arrays_digest(arrays))
        arrays["meta.key"] = np.asarray(json.dumps(key, sort_keys=True))
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
        except OSError as err:
            # the state only saves time on a later run: the summary is sent all the same
            silo_log.warning("silo %r: could not save its state in %s (%s); a later run samples again",
                             self.name, self.state_dir, err.strerror or err)

    def _summarize(self, request: SummarizeRequest) -> SiloSummary:
        from vcmc.silo.apply import run_apply_step
        from vcmc.silo.build_summary import build_summary

        config = request.config
        privacy = effective_privacy(self.privacy, config.privacy)
        seed = np.random.SeedSequence(int(request.seed_entropy), spawn_key=tuple(int(k) for k in
                                                                                 request.spawn_key))
        sampler_seed, noise_seed = seed.spawn(2)
        local = run_apply_step(self.codes, self.n_modalities, prior=config.prior, sampler=config.sampler,
                               postprocess=config.postprocess, n_silos=int(request.n_silos), rng=sampler_seed,
                               jobs=self.jobs, progress=self.gate.cpu_guard(self.progress))
        local, n_merged = apply_min_cluster_size(local, self.codes, privacy,
                                                 floor=config.postprocess.threshold(self.data.n_rows))
        include_counts = privacy.share_counts and config.strategy != "federated-gradient"
        summary = build_summary(local, self.codes, silo=self.name,
                                schema_fingerprint=self.data.schema.fingerprint(),
                                n_modalities=self.n_modalities, include_counts=include_counts,
                                summary_draws=config.postprocess.summary_draws)
        n_suppressed = 0
        counts = summary.counts
        if counts is not None:
            counts, n_suppressed = self.gate.protect_table(counts, privacy, np.random.default_rng(noise_seed))
        # from here on the silo needs only what it sent (min-divergence matching reads these draws): the
        # other kept draws are dropped, so a process serving many silos holds 1,000 draws of each
        self.local = local.thinned(config.postprocess.summary_draws)
        self.privacy_in_force = privacy
        self.assignments = self.memberships = self.label_profiles = None
        self.rounds = None
        diagnostics = {**summary.diagnostics, "process_peak_rss_mb": _peak_rss_mb()}
        return summary.with_changes(counts=counts, n_withheld=int(n_merged), counts_suppressed=n_suppressed,
                                    diagnostics=diagnostics)

    def _require_local(self, what: str) -> LocalPosterior:
        if self.local is None:
            raise NotFittedError(f"silo {self.name!r} received a {what} request before a summarize request "
                                 "(or lost its state); run the summarize step first")
        return self.local

    def _check_assignment(self, assignment, n_global: int, what: str) -> np.ndarray:
        local = self._require_local(what)
        a = np.asarray(assignment, dtype=np.int64).ravel()
        if a.shape != (local.n_clusters,) or (a.size and (a.min() < 0 or a.max() >= int(n_global))):
            raise ConfigError(f"{what}: the assignment must map the silo's {local.n_clusters} local clusters "
                              f"to global clusters in [0, {int(n_global)}); got shape {a.shape}")
        return a

    def _answer_divergence(self, request: DivergenceRequest) -> DivergenceReply:
        from vcmc.silo.divergence import divergence_cost

        local = self._require_local("divergence")
        cost = divergence_cost(self.codes, self.n_modalities, local, np.asarray(request.reference_pi),
                               np.asarray(request.reference_profiles), rule=request.rule,
                               penalty_multiplier=float(request.penalty_multiplier))
        return DivergenceReply(cost=np.asarray(cost, dtype=np.float64))

    def _answer_counts(self, request: CountsRequest) -> CountsReply:
        """Counts at parameters chosen by the server (federated-gradient strategy).

        Soft mode: cluster (M, C), modality (M, C, P), loglik (M,). Hard mode (the local partition
        propagated through ``assignment``): cluster (C,), modality (C, P), loglik of shape (0,) (not
        defined without parameters). The gate withholds clusters under the minimum size, suppresses, rounds
        and noises the counts (with the limits in force) when it releases the reply.
        """
        from vcmc.silo.counts import hard_counts, soft_counts

        if request.mode == "soft":
            if request.pi is None or request.profiles is None:
                raise ConfigError("a soft counts request needs pi (M, C) and profiles (M, C, P)")
            cluster, modality, loglik = soft_counts(self.codes, self.n_modalities, np.asarray(request.pi),
                                                    np.asarray(request.profiles))
            return CountsReply(cluster=np.asarray(cluster, dtype=np.float64),
                               modality=np.asarray(modality, dtype=np.float64),
                               loglik=np.asarray(loglik, dtype=np.float64))
        if request.mode != "hard":
            raise ConfigError(f"counts request mode must be 'soft' or 'hard'; got {request.mode!r}")
        a = self._check_assignment(request.assignment, request.n_global, "hard counts")
        labels = a[self._require_local("hard counts").partition]
        cluster, modality = hard_counts(self.codes, self.n_modalities, labels, int(request.n_global))
        return CountsReply(cluster=np.asarray(cluster, dtype=np.float64),
                           modality=np.asarray(modality, dtype=np.float64), loglik=np.zeros(0))

    def _answer_announce(self, request: AnnounceRequest) -> AnnounceReply:
        # the gate checked and recorded the draws on admission; nothing of the data is involved
        return AnnounceReply(n_pi_draws=int(np.asarray(request.pi).shape[0]),
                             n_profile_draws=int(np.asarray(request.profiles).shape[0]))

    def _answer_assign(self, request: AssignRequest) -> AssignReply:
        """Memberships of every row in the global clusters and its label (both kept in the silo).

        Without parameters the local posterior is propagated through ``assignment``: a row's membership of
        a global cluster is its share of kept iterations in the local clusters mapped to it. With ``pi`` and
        ``profiles`` (draws) it is the allocation probability averaged over the draws
        (``vcmc.silo.memberships``). The label is the most probable cluster; only cluster-level sums leave.
        """
        from vcmc.silo.memberships import membership_summary, memberships_to_target

        n_global = int(request.n_global)
        if request.pi is not None and request.profiles is not None:
            pi = np.atleast_2d(np.asarray(request.pi, dtype=np.float64))
            profiles = np.asarray(request.profiles, dtype=np.float64)
            if profiles.ndim == 2:
                profiles = profiles[None]
            p = int(np.sum(self.n_modalities))
            if pi.shape[1] != n_global or profiles.shape[1:] != (n_global, p) or pi.shape[0] != profiles.shape[0]:
                raise ConfigError(f"assign: pi and profiles must be draws of {n_global} clusters over {p} "
                                  f"modality columns; got shapes {pi.shape} and {profiles.shape}")
            memberships, monte_carlo = memberships_to_target(self.codes, self.n_modalities, pi, profiles)
            labels = np.argmax(memberships, axis=1)
            self.label_profiles = profiles.mean(axis=0)
        else:
            self.label_profiles = None
            a = self._check_assignment(request.assignment, n_global, "assign")
            onehot = np.zeros((a.size, n_global))
            onehot[np.arange(a.size), a] = 1.0
            memberships = self.local.membership @ onehot
            # the propagated local partition, unless another global cluster is strictly more probable
            # (several local clusters mapped to one); a tie keeps the local label
            labels = a[self.local.partition]
            best = np.argmax(memberships, axis=1)
            rows = np.arange(labels.size)
            labels = np.where(memberships[rows, best] > memberships[rows, labels] + 1e-12, best, labels)
            monte_carlo = None
        self.assignments = labels.astype(np.int64)
        self.memberships = memberships
        return AssignReply(**membership_summary(memberships, self.assignments, monte_carlo))

    def _answer_round_assess(self, request: RoundAssessRequest) -> AssessReply:
        """The assessment after the rounds: an assess request at the kept rounds' profile draws restricted to
        the result's clusters (``requests_check.kept_profiles``) with the request's weights."""
        from vcmc.silo import requests_check as rc

        prof = rc.kept_profiles(request.log_profiles, request.keep, self.n_modalities,
                                floor=self.gate.policy.profile_floor)
        return self._answer_assess(AssessRequest(pi=np.asarray(request.pi, dtype=np.float64), profiles=prof,
                                                 pairs=request.pairs, seed_entropy=request.seed_entropy,
                                                 spawn_key=request.spawn_key))

    def _answer_assess(self, request: AssessRequest) -> AssessReply:
        """Predictive checks, WAIC sums and sampled occupancy under the global draws (docs/design.md §14).

        Everything returned is a sum over the silo's rows (``vcmc.silo.ppc``), after the suppression and
        rounding in force; a silo whose operator set ``share_assessment = False`` refuses the request.
        """
        from vcmc.silo.ppc import assess_rows

        privacy = self.privacy_in_force
        if not privacy.share_assessment:
            raise DisclosureError(f"silo {self.name!r} does not take part in model assessment: its operator "
                                  "set share-assessment = false")
        pi = np.asarray(request.pi, dtype=np.float64)
        profiles = np.asarray(request.profiles, dtype=np.float64)
        pairs = np.asarray(request.pairs, dtype=np.int64).reshape(-1, 2)
        p = int(np.sum(self.n_modalities))
        if pi.ndim != 2 or profiles.shape != (*pi.shape, p):
            raise ConfigError(f"assess: pi must be (R, C) draws and profiles (R, C, {p}) draws of the same "
                              f"clusters; got shapes {pi.shape} and {profiles.shape}")
        if pi.shape[0] < 1 or pi.shape[1] < 1:
            raise ConfigError(f"assess: at least one draw of at least one cluster is needed; got {pi.shape}")
        var = np.repeat(np.arange(len(self.n_modalities)), self.n_modalities)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= p or np.any(var[pairs[:, 0]] == var[pairs[:, 1]])):
            raise ConfigError(f"assess: pairs must be columns in [0, {p}) of two different variables")
        seed = np.random.SeedSequence(int(request.seed_entropy),
                                      spawn_key=tuple(int(k) for k in request.spawn_key))
        return AssessReply(**assess_rows(self.codes, self.n_modalities, pi, profiles, pairs, rng=seed,
                                         privacy=privacy))

    def _answer_round(self, request):
        from vcmc.silo import rounds

        return {RoundStartRequest: rounds.start, RoundSweepRequest: rounds.sweep, RoundFinishRequest: rounds.finish,
                RoundMoveRequest: rounds.move, RoundKeyRequest: rounds.key,
                RoundBirthRequest: rounds.birth}[type(request)](self, request)

    def _answer_lca(self, request):
        from vcmc.silo.lca import answer

        return answer(self, request)

    _HANDLERS = {**dict.fromkeys(LCA_REQUEST_TYPES, _answer_lca), HelloRequest: _answer_hello,
                 SummarizeRequest: _answer_summarize,
                 DivergenceRequest: _answer_divergence, CountsRequest: _answer_counts,
                 AnnounceRequest: _answer_announce, AssignRequest: _answer_assign, AssessRequest: _answer_assess,
                 **dict.fromkeys((RoundStartRequest, RoundSweepRequest, RoundFinishRequest, RoundMoveRequest,
                                  RoundKeyRequest, RoundBirthRequest), _answer_round),
                 RoundAssessRequest: _answer_round_assess}

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
        if self.label_profiles is not None:
            out["label_profiles"] = self.label_profiles
        if self.rounds is not None:
            out.update(self.rounds.export())
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
        self.label_profiles = np.asarray(state["label_profiles"]) if "label_profiles" in state else None
        from vcmc.silo.rounds import RoundState

        self.rounds = RoundState.restore(state)
        if "privacy_in_force" in state:
            saved = PrivacyConfig(**json.loads(str(np.asarray(state["privacy_in_force"]).ravel()[0])))
            # never looser than this operator's own limits, whatever the stored state says
            self.privacy_in_force = effective_privacy(self.privacy, saved)
        self.gate.restore_state(state)
