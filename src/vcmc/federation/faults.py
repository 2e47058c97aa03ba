"""Faults: silos that fail, time out or send malformed or inconsistent replies, and what the run does then.

``gather`` is the one place where the server collects replies: it checks each reply (type, NaN, shapes,
schema agreement) and applies the user's ``FaultPolicy``: continue on the remaining silos, with a
``SiloDroppedWarning`` naming each dropped silo and the stage, when at least ``min_silos`` remain;
otherwise stop with a ``SiloFailure`` naming the silo(s). ``save_summaries``/``load_summaries`` keep what
the samplers produced, so the server steps can be re-run without re-running them.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vcmc.atomic import atomic_path, atomic_write_text
from vcmc.exceptions import ConfigError, InconsistentSiloSummaries, SiloFailure
from vcmc.protocol import Message, Reply, SiloSummary, decode_message

MANIFEST = "manifest.json"


class SiloDroppedWarning(UserWarning):
    """A silo failed and the run continued without it (allowed by ``FaultPolicy.min_silos``)."""


@dataclass(frozen=True)
class FaultPolicy:
    """What the server does when silos fail.

    Attributes
    ----------
    min_silos : int or None
        Smallest number of silos the run may continue with. ``None`` (default): every silo is required and
        the first failure stops the run with a ``SiloFailure`` naming the silo.
    timeout : float or None
        Seconds to wait for the replies of one stage (default None: wait as long as it takes). A silo that
        has not answered by then counts as failed.
    """

    min_silos: int | None = None
    timeout: float | None = None

    def __post_init__(self):
        if self.min_silos is not None and (isinstance(self.min_silos, bool) or not isinstance(
                self.min_silos, int | np.integer) or self.min_silos < 1):
            raise ConfigError(f"The 'min_silos' parameter of FaultPolicy must be None or an int >= 1. "
                              f"Got {self.min_silos!r} instead.")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"The 'timeout' parameter of FaultPolicy must be None or a float in (0, inf). "
                              f"Got {self.timeout!r} instead.")

    def required(self, n_silos: int) -> int:
        """Silos needed to continue when ``n_silos`` were asked."""
        return n_silos if self.min_silos is None else int(self.min_silos)


def validate_reply(silo: str, request: Message, reply: Message) -> None:
    """Check a reply against its request: its type (the request's ``REPLY``), then the reply's own check
    (finiteness, shapes: ``Reply.check_reply``). Raises ``InconsistentSiloSummaries``.

    Schema agreement across silos is checked by ``gather`` (it needs every silo's summary).
    """
    expected = getattr(request, "REPLY", ())
    if expected and not isinstance(reply, expected):
        kinds = " or ".join(repr(t.KIND) for t in expected)
        Reply.refuse(request, silo, f"expected a {kinds} message, got {getattr(reply, 'KIND', type(reply).__name__)!r}")
    if isinstance(reply, Reply):
        reply.check_reply(request, silo)


def _schema_outliers(replies: Mapping[str, Message]) -> dict[str, str]:
    """Silos whose summary's schema (fingerprint, modalities) differs from the strict majority's."""
    keys = {n: (r.schema_fingerprint, r.n_modalities) for n, r in replies.items()
            if isinstance(r, SiloSummary)}
    if len(set(keys.values())) <= 1:
        return {}
    tally = Counter(keys.values())
    (top, top_n), *rest = tally.most_common()
    if rest and rest[0][1] == top_n:
        groups = {f"{fp[:12]}": [n for n, k in keys.items() if k[0] == fp] for fp, _ in tally}
        raise InconsistentSiloSummaries(
            f"silos disagree on the data schema and no schema is shared by a majority: {groups}. Give every "
            "silo the same schema file (variables and ordered modalities).")
    majority = [n for n, k in keys.items() if k == top]
    return {n: (f"its schema (fingerprint {k[0][:12]}, modalities {list(k[1])}) differs from that of silos "
                f"{majority} (fingerprint {top[0][:12]}, modalities {list(top[1])})")
            for n, k in keys.items() if k != top}


def gather(transport, requests: Mapping[str, Message], policy: FaultPolicy | None = None,
           stage: str = "request", *, optional: bool = False) -> tuple[dict[str, Message], list[SiloFailure]]:
    """Send ``requests`` through ``transport``, validate the replies and apply the fault policy.

    Parameters
    ----------
    transport : Transport
    requests : mapping of silo name to request message
    policy : FaultPolicy, optional
        Default ``FaultPolicy()``: every silo required.
    stage : str
        Name of the stage for messages and warnings ("summarize", "assign", ...).
    optional : bool
        A stage the run can do without (the model assessment): failed silos are returned, never raised nor
        warned about; the caller reports them with the result.

    Returns
    -------
    replies : dict of str to Message
        Valid replies, in the order of ``requests``.
    failures : list of SiloFailure
        Silos dropped at this stage (each also announced by a ``SiloDroppedWarning``); record them in the
        result.

    Raises
    ------
    SiloFailure
        When fewer than ``policy.min_silos`` (default: all) silos replied validly; names every failed silo
        and the reason.
    InconsistentSiloSummaries
        When silos disagree on the schema and no schema is shared by a strict majority.
    """
    policy = policy or FaultPolicy()
    raw = transport.call(requests, timeout=policy.timeout)
    replies: dict[str, Message] = {}
    failures: list[SiloFailure] = []
    for name in requests:
        reply = raw.get(name)
        if reply is None:
            failures.append(SiloFailure(name, f"no reply at stage {stage!r}"))
        elif isinstance(reply, SiloFailure):
            failures.append(reply)
        else:
            try:
                validate_reply(name, requests[name], reply)
            except InconsistentSiloSummaries as exc:
                failures.append(SiloFailure(name, f"malformed reply at stage {stage!r}: {exc}"))
                continue
            replies[name] = reply
    for name, reason in _schema_outliers(replies).items():
        del replies[name]
        failures.append(SiloFailure(name, f"inconsistent summary at stage {stage!r}: {reason}"))
    ledger = getattr(transport, "releases", None)
    if ledger is not None:
        ledger.record(replies)          # the noised releases received (the run's DP account)

    if optional:
        return replies, failures
    needed = policy.required(len(requests))
    if failures and len(replies) < needed:
        names = ", ".join(f.silo for f in failures)
        detail = "; ".join(f"{f.silo}: {f.reason}" for f in failures)
        allowed = ("every silo is required (FaultPolicy.min_silos is None)" if policy.min_silos is None
                   else f"at least {policy.min_silos} silos are required")
        err = SiloFailure(names, f"stage {stage!r} failed ({detail}); {len(replies)} of {len(requests)} "
                                 f"silos replied and {allowed}. Summaries already computed are kept if a "
                                 "save directory was given.")
        err.failures = failures
        raise err
    for f in failures:
        warnings.warn(f"silo {f.silo!r} dropped at stage {stage!r}: {f.reason}. Continuing with "
                      f"{len(replies)} silos ({', '.join(replies)}).", SiloDroppedWarning, stacklevel=2)
    return replies, failures


# --------------------------------------------------------------------------------------------------------
# Saving summaries


def save_summaries(summaries: Mapping[str, SiloSummary] | Sequence[SiloSummary], directory) -> Path:
    """Write one ``.npz`` per silo summary plus ``manifest.json`` (silo names, files, SHA-256, versions).

    The files hold exactly what the silos sent (plain arrays, no pickle), so they carry no more than the
    server already received. Returns the manifest path.
    """
    items = list(summaries.values()) if isinstance(summaries, Mapping) else list(summaries)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, summary in enumerate(items):
        file = f"summary-{i:03d}.npz"   # silo names are operator-chosen text: keep them out of paths
        arrays = {k: (np.asarray(v) if not isinstance(v, np.ndarray) else v)
                  for k, v in summary.to_arrays().items()}
        with atomic_path(directory / file) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        entries.append({"silo": summary.silo, "file": file, "kind": summary.KIND, "version": summary.VERSION,
                        "sha256": hashlib.sha256((directory / file).read_bytes()).hexdigest()})
    manifest = directory / MANIFEST
    atomic_write_text(manifest, json.dumps({"format": "vcmc-silo-summaries", "format_version": 1,
                                            "summaries": entries}, indent=2))
    return manifest


def load_summaries(directory) -> dict[str, SiloSummary]:
    """Read the summaries written by ``save_summaries``, in the saved order, checking their hashes.

    Raises
    ------
    InconsistentSiloSummaries
        If the manifest is missing or a file is missing, altered, of another kind or of another version.
    """
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        raise InconsistentSiloSummaries(f"no {MANIFEST} in {str(directory)!r}: not a directory written by "
                                        "save_summaries")
    manifest = json.loads(path.read_text())
    out: dict[str, SiloSummary] = {}
    for entry in manifest.get("summaries", []):
        file = directory / entry["file"]
        if not file.is_file():
            raise InconsistentSiloSummaries(f"summary of silo {entry['silo']!r}: file {str(file)!r} is "
                                            "missing")
        if hashlib.sha256(file.read_bytes()).hexdigest() != entry.get("sha256"):
            raise InconsistentSiloSummaries(f"summary of silo {entry['silo']!r}: file {str(file)!r} was "
                                            "modified after it was saved (SHA-256 differs)")
        with np.load(file, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        message = decode_message(arrays)
        if not isinstance(message, SiloSummary):
            raise InconsistentSiloSummaries(f"file {str(file)!r} holds a {message.KIND!r}, not a silo "
                                            "summary")
        out[message.silo] = message
    return out
