"""A silo's saved apply steps (``LocalSilo(state_dir=...)``): each finished summarize request's local posterior
and the summary sent, keyed by the request, the data and the disclosure limits, so that a later identical
request (an interrupted run started again) is answered without re-running the sampler. The files hold
row-level state and stay on the silo's host."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np

from vcmc.atomic import atomic_path
from vcmc.disclosure import effective_privacy
from vcmc.exceptions import StateCacheError
from vcmc.protocol import SiloSummary, SummarizeRequest

_STATE_FORMAT = 2     # 2: the file holds its key and a digest of its arrays
silo_log = logging.getLogger("vcmc.silo")


def _config_text(config) -> bytes:
    """The request's options as canonical text (the state file's key): their wire encoding, keys sorted."""
    plain = {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in config.to_arrays().items()}
    return json.dumps(plain, sort_keys=True).encode()


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
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


def _key(silo, request: SummarizeRequest) -> dict[str, str]:
    # Everything that determines the answer: the request (config, seed, number of silos), the data and this
    # silo's own disclosure limits; DP noise drawn from the OS is not reproducible, so a summary with secure
    # noise is cached as sent (re-sending it spends no new privacy budget). Kept part by part inside the
    # file, so that a file of another silo or seed renamed into place is recognised and the difference said.
    def digest(b: bytes) -> str:
        return hashlib.sha256(b).hexdigest()[:20]

    return {"format": str(_STATE_FORMAT), "silo": silo.name, "seed": str(int(request.seed_entropy)),
            "spawn_key": ",".join(str(int(k)) for k in request.spawn_key), "n_silos": str(int(request.n_silos)),
            "config": digest(_config_text(request.config)), "privacy": digest(repr(silo.privacy).encode()),
            "secure_noise": str(bool(silo.secure_noise)),
            "data": digest(silo.data.schema.fingerprint().encode() + np.ascontiguousarray(silo.codes).tobytes())}


def path_of(silo, request: SummarizeRequest) -> Path:
    """The file in which the silo's state for this request is saved (whether or not it exists)."""
    return _path(silo, _key(silo, request))


def _path(silo, key: dict[str, str]) -> Path:
    h = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in silo.name)
    return silo.state_dir / f"{safe}-{h[:20]}.npz"


def load(silo, request: SummarizeRequest) -> SiloSummary | None:
    """The summary saved for this request, the silo's state restored from it; None if there is none."""
    if silo.state_dir is None:
        return None
    key = _key(silo, request)
    path = _path(silo, key)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        stored_key = json.loads(str(arrays.pop("meta.key")))
        stored_digest = str(arrays.pop("meta.digest"))
    except Exception:  # noqa: BLE001 - a damaged or pre-digest file is recomputed, never trusted
        silo_log.warning("silo %r: the saved state %s cannot be read or has no digest; sampling again",
                         silo.name, path)
        return None
    if arrays_digest(arrays) != stored_digest:
        silo_log.warning("silo %r: the saved state %s does not match its digest (changed after it was "
                         "written); sampling again", silo.name, path)
        return None
    if stored_key != key:
        raise StateCacheError(_explain_key_mismatch(path, stored_key, key))
    try:
        summary = SiloSummary.from_arrays({k[len("summary."):]: v for k, v in arrays.items()
                                           if k.startswith("summary.")})
        silo.restore_state({k[len("state."):]: v for k, v in arrays.items() if k.startswith("state.")})
    except Exception:  # noqa: BLE001 - an older layout is recomputed, never trusted
        silo_log.warning("silo %r: the saved state %s has another layout; sampling again", silo.name, path)
        return None
    silo.assignments = silo.memberships = None
    silo.rounds = silo.round_session = silo.chain = None
    silo.privacy_in_force = effective_privacy(silo.privacy, request.config.privacy)
    return summary


def save(silo, request: SummarizeRequest, summary: SiloSummary) -> None:
    """Save the silo's state and the summary it sent (a failure to save is logged: the summary is sent)."""
    if silo.state_dir is None:
        return
    key = _key(silo, request)
    path = _path(silo, key)
    arrays = {f"summary.{k}": np.asarray(v) for k, v in summary.to_arrays().items()}
    arrays.update({f"state.{k}": v for k, v in silo.export_state().items()
                   if k not in ("assignments", "memberships") and not k.startswith("gate.")})
    arrays["meta.digest"] = np.asarray(arrays_digest(arrays))
    arrays["meta.key"] = np.asarray(json.dumps(key, sort_keys=True))
    try:
        silo.state_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    except OSError as err:
        # the state only saves time on a later run: the summary is sent all the same
        silo_log.warning("silo %r: could not save its state in %s (%s); a later run samples again",
                         silo.name, silo.state_dir, err.strerror or err)
