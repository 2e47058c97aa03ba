"""``vcmc.fit``: the functional entry point over every method (VCMC and its comparators)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from vcmc._rng import RngLike, as_seed_sequence, root_entropy
from vcmc.config import FitConfig
from vcmc.exceptions import ConfigError, SchemaError
from vcmc.methods import get as get_method
from vcmc.methods import names as method_names
from vcmc.progress import progress_bar
from vcmc.results import GlobalResult

METHODS = method_names()
"""The methods ``fit`` runs (from the one registry, ``vcmc.methods``)."""


def as_silos(silos) -> list:
    """The silos of a fit, checked once here for every entry point (``vcmc.fit``, the estimator): a
    ``SimulatedData``'s silos or a sequence of ``SiloData``, at least one, unique names, one schema; returned
    in the canonical order of ``vcmc.federation.order`` (the result lists the silos in that order)."""
    if hasattr(silos, "silos") and not isinstance(silos, Sequence):
        silos = silos.silos
    silos = list(silos)
    if not silos:
        raise ConfigError("vcmc.fit needs at least one silo; got an empty list.")
    names = [s.name for s in silos]
    if len(set(names)) != len(names):
        raise ConfigError(f"silo names must be unique; got {names}.")
    ref = silos[0].schema
    for s in silos[1:]:
        if s.schema != ref:
            raise SchemaError(f"silo {s.name!r} uses a different schema from silo {silos[0].name!r} "
                              f"(fingerprints {s.schema.fingerprint()} vs {ref.fingerprint()}); all silos "
                              "must encode their data with the same schema file.")
    # one canonical order, whatever order the silos came in (vcmc.federation.order; docs/design.md §12.1)
    from vcmc.federation.order import silo_sort_key

    return sorted(silos, key=lambda s: silo_sort_key(s.name))


def make_transport(silos, config: FitConfig, *, jobs: int = 1, kind: str = "auto", progress=None,
                   state_dir=None, silo_policy=None):
    """In-process silos (``kind="inprocess"``) or ``jobs`` worker processes hosting the silos (``"process"``).

    ``"auto"`` uses processes when ``jobs > 1`` and there is more than one silo; never more than ``jobs``
    processes, whatever the number of silos. ``progress`` is called
    with Gibbs iterations done (any silo) while the silos run their chains; with ``state_dir`` each silo
    saves its finished apply step there and an identical later run reuses it.
    """
    from vcmc.federation.transport import InProcessTransport, ProcessPoolTransport
    from vcmc.silo.local import LocalSilo

    if silo_policy is not None:
        # a deployment preview: the silos as SuperNodes build them, in this process (vcmc.flower.preview)
        from vcmc.flower.preview import deployment_silos

        return InProcessTransport(deployment_silos(silos, silo_policy, progress=progress))
    if kind == "auto":
        kind = "process" if jobs > 1 and len(silos) > 1 else "inprocess"
    if kind == "inprocess":
        return InProcessTransport([LocalSilo(d, privacy=config.privacy, progress=progress, state_dir=state_dir)
                                   for d in silos])
    if kind == "process":
        return ProcessPoolTransport(silos, privacy=config.privacy, state_dir=state_dir, max_workers=jobs,
                                    progress=None if progress is None else (lambda _silo, n: progress(n)))
    raise ConfigError(f"The 'transport' parameter of vcmc.fit must be one of 'auto', 'inprocess', "
                      f"'process'. Got {kind!r} instead.")


def fit(silos, *, config: FitConfig | None = None, method: str = "vcmc", rng: RngLike = None,
        jobs: int = 1, transport: str = "auto", policy=None, save_dir=None,
        n_clusters: int | None = None, show_progress: bool | None = None, state_dir=None,
        silo_policy=None) -> GlobalResult:
    """Cluster the silos' rows jointly without pooling them.

    Parameters
    ----------
    silos : sequence of vcmc.data.SiloData, or vcmc.research.simulate.SimulatedData
        One entry per silo, all encoded with the same schema.
    config : FitConfig, optional
        Priors, sampler, post-processing, privacy, matching and aggregation options (defaults: the
        paper's protocol, Ball matching, contingency strategy).
    method : {"vcmc", "consensus", "full-mcmc", "fed-kmodes", "fedmerdel", "discgs"}
        "full-mcmc" pools the rows (a gold-standard comparator, not federated); the others are federated.
    rng : int, Generator or None
        Root seed; stored in the result. Same seed, same result, whatever ``jobs``.
    jobs : int
        Worker processes (silos and chains in parallel).
    transport : {"auto", "inprocess", "process"}
    policy : vcmc.federation.faults.FaultPolicy, optional
        How many silos may fail before the run stops (default: none may fail).
    save_dir : path, optional
        Save the silo summaries there as they arrive (server steps can be re-run from them).
    n_clusters : int, optional
        Number of clusters for "fed-kmodes" (required there: K-modes does not infer it).
    show_progress : bool, optional
        Progress bar with ETA of the silos' sampling (default: on a terminal, off in CI).
    state_dir : path, optional
        Each silo saves its finished apply step there (row-level state: on the silos' machine); running
        the same fit again resumes from it instead of re-running the samplers.
    silo_policy : path or mapping, optional
        A deployment preview (``vcmc.flower.preview``): the silos' node-config keys (a TOML or JSON file,
        or its table: the keys for every silo at the top level, a silo's own under ``silos.<name>``); every
        silo is then built as a SuperNode's node config builds it, with the rounds' keys generated for the run,
        and runs in this process (``jobs`` is not used for the silos). ``result.diagnostics
        ["deployment_preview"]`` records it. VCMC and consensus only.

    Returns
    -------
    GlobalResult
    """
    spec = get_method(method)
    if not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"The 'jobs' parameter of vcmc.fit must be an int >= 1. Got {jobs!r} instead.")
    config = config or FitConfig()
    data = as_silos(silos)
    rng = as_seed_sequence(rng) if rng is None else rng
    seed = root_entropy(rng)
    n_mod = data[0].schema.n_modalities
    codes = [d.codes for d in data]
    names = [d.name for d in data]
    t0 = time.perf_counter()

    preview = None
    if silo_policy is not None:
        from vcmc.flower.preview import describe, parse_silo_policy, read_silo_policy

        if spec.adapter is not None:
            raise ConfigError(f"a deployment preview (silo_policy, --silo-policy) runs the federated pipeline; the "
                              f"method {method!r} pools the rows or runs its own protocol")
        preview = read_silo_policy(silo_policy) if isinstance(silo_policy, (str, Path)) \
            else parse_silo_policy(silo_policy)
    if spec.adapter is None:           # VCMC and consensus: the pipeline
        from vcmc.pipeline import run_vcmc

        total = len(data) * config.sampler.n_iter * config.sampler.n_chains
        with progress_bar(total, "Gibbs sampling in the silos", enabled=show_progress) as bar, \
                make_transport(data, config, jobs=jobs, kind=transport, progress=bar.update,
                               state_dir=None if preview is not None else state_dir, silo_policy=preview) as tr:
            result = run_vcmc(tr, config, rng=rng, method=method, policy=policy, save_dir=save_dir,
                              show_progress=show_progress)
        if preview is not None:
            result.diagnostics["deployment_preview"] = describe(preview, names)
        return result
    if spec.pooled_sampler:
        total = config.sampler.n_iter * config.sampler.n_chains
        with progress_bar(total, "Gibbs sampling (pooled data)", enabled=show_progress) as bar:
            res = spec.run(codes, n_mod, config=config, rng=rng, jobs=jobs, silo_names=names,
                           n_clusters=n_clusters, progress=bar.update)
    else:
        res = spec.run(codes, n_mod, config=config, rng=rng, jobs=jobs, silo_names=names, n_clusters=n_clusters)
    timings = dict(res.timings)
    timings.setdefault("total", time.perf_counter() - t0)
    import dataclasses

    return dataclasses.replace(res, timings=timings, seed=res.seed if res.seed is not None else seed)
