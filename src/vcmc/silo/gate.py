"""The one gate at the silo boundary: every request is admitted by it and every reply released by it.

``LocalSilo.handle`` is the silo's only entry point: it calls ``Gate.admit`` on the request before any
endpoint answers it and ``Gate.release`` on the reply before it is returned (docs/federation.md, "Threat
model" and "Disclosure table"). The silo's operator sets the limits: the disclosure limits of
``PrivacyConfig`` (which the server can only tighten) and the operator-only ``SiloPolicy`` (which the server
cannot touch).

The gate holds the rules every request shares, read from the request's own declarations
(``vcmc.protocol.message.Request``): the allow-list, the run order (nothing but what may come without a
summary before the silo's own summary of the run), the per-run budget, the strategies the operator must
allow. Each request's own rules (shapes, probabilities, announced draws; the disclosure rules of each field of
its reply) are its endpoint's (``vcmc.silo.endpoints``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping

import numpy as np

from vcmc.config import PrivacyConfig
from vcmc.disclosure import protect_counts
from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.protocol import HelloRequest, Message, Request
from vcmc.silo.endpoints import ENDPOINTS
from vcmc.silo.policy import SiloPolicy, exposure
from vcmc.silo.state import RunState

silo_log = logging.getLogger("vcmc.silo")

ROW_FREE = (HelloRequest,)
"""The requests answered without reading the silo's rows (every other one counts the run in the operator's run
ledger, ``Gate.record_run``)."""


class Gate:
    """The silo boundary of one ``LocalSilo``: ``admit`` every request, ``release`` every reply.

    Parameters
    ----------
    silo : LocalSilo
        The silo it guards (read for its data shape, operator limits and local posterior).
    policy : SiloPolicy
    run_key : str or None
        The run's identity (Flower: the run id); keys the schema fingerprint. None in the analyst's own
        session (the fingerprint is sent as it is: nobody else receives it).
    """

    def __init__(self, silo, policy: SiloPolicy, *, run_key: str | None = None):
        self.silo = silo
        self.policy = policy
        self.run_key = run_key
        self.state = RunState()
        self.own_session = policy == SiloPolicy.own_data()
        """Whether this is the analyst's own session (``SiloPolicy.own_data``), not a deployment's silo."""

    # -- the two doors ------------------------------------------------------------------------------------

    def admit(self, request: Message) -> Message:
        """Validate ``request`` against the protocol and the operator's limits; returns the request to answer
        (server-chosen probabilities floored). Raises ``DisclosureError``, ``ConfigError`` or
        ``NotFittedError`` (their text holds names, shapes and limits only)."""
        kind = type(request)
        if not isinstance(request, Request) or kind not in ENDPOINTS:
            raise ConfigError(f"silo {self.silo.name!r} cannot answer a "
                              f"{getattr(request, 'KIND', kind.__name__)!r} message")
        name = kind.ACTION
        allowed = set(self.policy.allowed_strategies)
        if name not in self.policy.allowed_requests:
            raise DisclosureError(f"silo {self.silo.name!r}: its operator does not allow {name} requests")
        if kind.STRATEGIES and not allowed & set(kind.STRATEGIES):
            first = kind.STRATEGIES[0]
            raise DisclosureError(f"silo {self.silo.name!r}: its operator does not allow the "
                                  f"{' or '.join(map(repr, kind.STRATEGIES))} strategy: {name} requests belong to "
                                  f"it. Listing {first!r} in the node config's allow-strategies would expose "
                                  f"{exposure(first)} (docs/federation.md)")
        early = kind.WITHOUT_SUMMARY
        if not (early is True or (isinstance(early, tuple) and allowed & set(early))) and not self.state.summarized:
            raise NotFittedError(f"silo {self.silo.name!r} received a {name} request before a summarize request "
                                 "of this run (or lost its state); only hello and summarize requests come first")
        used = self.state.counts.get(name, 0) + 1
        limit = self.policy.budget_of(name)
        if limit is not None and used > limit:
            silo_log.warning("silo %r refused %s request number %d of this run (budget %d)", self.silo.name,
                             name, used, limit)
            raise DisclosureError(f"silo {self.silo.name!r}: the run's budget of {name} requests ({limit}) is "
                                  "spent")
        self.state.counts[name] = used
        silo_log.info("silo %r: %s request %d of this run (budget %s)", self.silo.name, name, used,
                      "unlimited" if limit is None else limit)
        request = ENDPOINTS[kind].admit(self, request)
        if kind not in ROW_FREE:
            self.record_run()
        return request

    def record_run(self) -> None:
        """Count this run in the operator's run ledger (``max-runs-per-day``) at its first request that touches
        the rows, whatever it is (a summarize, or a latent class analysis' first E-step, which has no summary);
        ``DisclosureError`` once the last 24 hours hold the operator's limit of runs."""
        if self.policy.max_runs_per_day is None or self.state.run_recorded:
            return
        from vcmc.silo.run_ledger import admit_run

        if self.run_key is None:
            raise ConfigError(f"silo {self.silo.name!r}: max-runs-per-day needs the run's identity (a deployment)")
        n_runs = admit_run(self.policy.budget_dir, self.run_key, self.policy.max_runs_per_day, silo=self.silo.name)
        self.state.run_recorded = True
        silo_log.info("silo %r: run %d of the last 24 hours (at most %d)", self.silo.name, n_runs,
                      self.policy.max_runs_per_day)

    def release(self, request: Message, reply: Message) -> Message:
        """The reply as it may leave the silo: every rule of the operator's limits applied."""
        expected = type(request).REPLY[0]
        if type(reply) is not expected:
            raise DisclosureError(f"silo {self.silo.name!r}: a {request.KIND!r} is answered by a "
                                  f"{expected.KIND!r}, not a {getattr(reply, 'KIND', type(reply).__name__)!r}")
        self.state.n_releases += 1
        return ENDPOINTS[type(request)].release(self, request, reply)

    # -- limits in force --------------------------------------------------------------------------------

    @property
    def privacy(self) -> PrivacyConfig:
        return self.silo.privacy_in_force

    @property
    def min_size(self) -> int:
        return max(int(self.privacy.min_cluster_size), 1)

    def noise_rng(self) -> np.random.Generator:
        """Stream of the noise of one release (used only with ``secure_noise=False``): a child of the
        summarize request's noise seed, one per release, so repeated releases get fresh noise."""
        seq = np.random.SeedSequence(int(self.state.noise_entropy),
                                     spawn_key=(*self.state.noise_key, 7, int(self.state.n_releases)))
        return np.random.default_rng(seq)

    def protect_table(self, counts: np.ndarray, privacy: PrivacyConfig, rng) -> tuple[np.ndarray, int]:
        """DP noise, suppression and rounding of the summary's cluster-by-modality table (``protect_counts``; its
        rows are every row of the silo, so its columns are complemented too: their sums are the silo's modality
        counts, which the assessment sends)."""
        if privacy.dp_epsilon is not None:
            from vcmc.silo.release import spent

            spent(self, 1, privacy.dp_epsilon)
        return protect_counts(counts, privacy, rng, n_modalities=self.silo.n_modalities,
                              secure=self.silo.secure_noise, columns=True)

    def cpu_guard(self, progress: Callable | None) -> Callable | None:
        """The sampler's progress callback, raising once the operator's CPU-time cap is passed."""
        cap = self.policy.max_cpu_seconds
        if cap is None:
            return progress
        start = time.process_time()

        def guarded(n):
            if time.process_time() - start > float(cap):
                raise DisclosureError(f"silo {self.silo.name!r}: the sampler passed its operator's CPU-time cap "
                                      f"({float(cap):g} s)")
            if progress is not None:
                progress(n)

        return guarded

    def fingerprint(self, plain: str) -> str:
        """The schema fingerprint as sent: plain in the analyst's session; in a deployment an HMAC keyed
        with the operators' shared secret and the run id (equal across the silos of one run, different
        from run to run, and not invertible offline without the secret)."""
        if self.run_key is None:
            return plain
        key = f"{self.policy.fingerprint_key}|{self.run_key}".encode()
        return "hmac-" + hmac.new(key, plain.encode(), hashlib.sha256).hexdigest()[:40]

    def may_write_out_dir(self, *, rounds: bool = False) -> bool:
        """True once per run: only the first assign of a run writes the silo's out-dir; with ``rounds``, the
        first finish of the global-informed rounds may write it once more (their labels replace the one-shot
        pass's; the round_finish budget is 1 per run)."""
        written = self.state.rounds_out_dir_written if rounds else self.state.out_dir_written
        if written:
            silo_log.warning("silo %r: a second %s request in this run; out-dir not written again",
                             self.silo.name, "round finish" if rounds else "assign")
            return False
        if rounds:
            self.state.rounds_out_dir_written = True
        else:
            self.state.out_dir_written = True
        return True

    # -- state ----------------------------------------------------------------------------------------------

    def export_state(self) -> dict[str, np.ndarray]:
        return {"gate.state": np.asarray([json.dumps(dataclasses.asdict(self.state))])}

    def restore_state(self, state: Mapping) -> None:
        if "gate.state" in state:
            self.state = RunState(**json.loads(str(np.asarray(state["gate.state"]).ravel()[0])))
