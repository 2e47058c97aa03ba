"""The method registry of the simulation study: every estimator behind one interface.

A ``StudyMethod`` turns one simulated dataset and a seed into a ``GlobalResult``::

    result = method.run(dataset, seed=seed, profile=profile, shared=shared)

Methods that share an apply step (every VCMC variant and the consensus baseline) name the same
``group``; the runner calls the group's ``prepare`` once per replicate (the local MCMC of every silo)
and hands its output to each member as ``shared``, so the local chains are never recomputed between
matchings . Entries import their implementation lazily, so the registry works while
some comparators are not installed yet; ``available()`` says which ones can run.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from vcmc._rng import spawn_generators
from vcmc.exceptions import ConfigError
from vcmc.methods import METHODS
from vcmc.methods import get as get_method
from vcmc.results import GlobalResult

__all__ = ["Registry", "StudyGroup", "StudyMethod", "VcmcApply", "default_registry", "oracle_matching"]


@dataclass(frozen=True)
class StudyGroup:
    """A step shared by several methods of one replicate (e.g. the silos' local MCMC).

    Attributes
    ----------
    name : str
    prepare : callable
        ``prepare(dataset, *, seed, profile) -> object`` handed to each member as ``shared``.
    """

    name: str
    prepare: Callable


@dataclass(frozen=True)
class StudyMethod:
    """One estimator of the study.

    Attributes
    ----------
    name : str
        Registry name (``vcmc-ball``, ``full-mcmc``, ...).
    label : str
        Column header in the tables.
    run : callable
        ``run(dataset, *, seed, profile, shared) -> GlobalResult``.
    group : str or None
        Name of the ``StudyGroup`` whose output this method reuses (None: stand-alone).
    matching : str or None
        For VCMC variants, the matching method: the runner then also evaluates the matching
        (Table 2, with estimated and with true local partitions).
    modules : tuple of str
        What the method needs, as ``"module"`` or ``"module:attribute"``; the method is available when
        all of them import.
    """

    name: str
    label: str
    run: Callable
    group: str | None = None
    matching: str | None = None
    modules: tuple[str, ...] = ()

    def is_available(self) -> bool:
        """Whether every module the method needs can be imported."""
        for spec in self.modules:
            mod, _, attr = spec.partition(":")
            try:
                m = importlib.import_module(mod)
            except ImportError:
                return False
            if attr and not hasattr(m, attr):
                return False
        return True


@dataclass
class Registry:
    """Name -> ``StudyMethod`` and group name -> ``StudyGroup``."""

    methods: dict[str, StudyMethod] = field(default_factory=dict)
    groups: dict[str, StudyGroup] = field(default_factory=dict)

    def add(self, method: StudyMethod) -> None:
        if method.group is not None and method.group not in self.groups:
            raise ConfigError(f"method {method.name!r} names the group {method.group!r}, which is not "
                              f"registered; known groups: {sorted(self.groups)}.")
        self.methods[method.name] = method

    def add_group(self, group: StudyGroup) -> None:
        self.groups[group.name] = group

    def get(self, name: str) -> StudyMethod:
        if name not in self.methods:
            raise ConfigError(f"The method {name!r} of vcmc study must be one of "
                              f"{', '.join(self.methods)}. Got {name!r} instead.")
        return self.methods[name]

    def names(self) -> list[str]:
        return list(self.methods)

    def available(self) -> list[str]:
        """Names of the methods whose implementation can be imported now."""
        return [n for n, m in self.methods.items() if m.is_available()]

    def check(self, names) -> list[StudyMethod]:
        """The methods for ``names``, raising a ``ConfigError`` naming any unknown or unavailable one."""
        out = [self.get(n) for n in names]
        missing = [m.name for m in out if not m.is_available()]
        if missing:
            raise ConfigError(f"the methods {missing} are registered but their implementation cannot be "
                              f"imported in this installation; available: {self.available()}.")
        return out

    def copy(self) -> Registry:
        return Registry(dict(self.methods), dict(self.groups))


# ---------------------------------------------------------------------------------------------------
# VCMC: one apply step per replicate, shared by every matching and by the consensus baseline
# ---------------------------------------------------------------------------------------------------

@dataclass
class VcmcApply:
    """Output of the shared apply step of one replicate.

    Attributes
    ----------
    transport : InProcessTransport
        Holds the silos (and, inside them, their local posteriors).
    silos : list of LocalSilo
    summaries : list of SiloSummary
    failures : list of SiloFailure
    seconds : float
        Wall time of the apply step, silos run one after the other in this process.
    seconds_parallel : float or None
        Longest single silo's apply time (the wall time when silos run concurrently, as in a
        federation), when the silos report it.
    seed : int
    """

    transport: object
    silos: list
    summaries: list
    failures: list
    seconds: float
    seconds_parallel: float | None
    seed: int

    def local_partitions(self) -> list[np.ndarray] | None:
        """Estimated local partition of every silo (labels of its local clusters), if the silos expose
        their local posterior (in-process silos do)."""
        out = []
        for silo in self.silos:
            local = getattr(silo, "local", None)
            if local is None:
                return None
            out.append(np.asarray(local.partition))
        return out


def _silo_seconds(summaries) -> float | None:
    secs = []
    for s in summaries:
        d = getattr(s, "diagnostics", {}) or {}
        for key in ("seconds_apply", "apply_seconds", "seconds"):
            if key in d:
                secs.append(float(d[key]))
                break
        else:
            return None
    return max(secs) if secs else None


def _vcmc_prepare(dataset, *, seed: int, profile) -> VcmcApply:
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import summarize_silos
    from vcmc.silo.local import LocalSilo

    config = profile.fit_config()
    silos = [LocalSilo(d, privacy=config.privacy) for d in dataset.silos]
    transport = InProcessTransport(silos)
    t0 = time.perf_counter()
    summaries, failures = summarize_silos(transport, config, rng=seed)
    seconds = time.perf_counter() - t0
    return VcmcApply(transport=transport, silos=silos, summaries=summaries, failures=failures,
                     seconds=seconds, seconds_parallel=_silo_seconds(summaries), seed=seed)


def _server(matching: str, method: str):
    def run(dataset, *, seed: int, profile, shared: VcmcApply) -> GlobalResult:
        from vcmc.pipeline import server_steps

        config = profile.fit_config(matching=matching)
        # ``server_steps`` sums every stage into "total": the shared apply step counts in full for every
        # variant (the time the variant would have taken alone).
        return server_steps(shared.summaries, shared.transport, config, rng=seed, method=method,
                            timings={"apply": shared.seconds}, failures=shared.failures)

    return run


# ---------------------------------------------------------------------------------------------------
# Stand-alone methods
# ---------------------------------------------------------------------------------------------------

def _codes(dataset):
    return [s.codes for s in dataset.silos], tuple(dataset.n_modalities), [s.name for s in dataset.silos]


def _true_n_clusters(dataset) -> int:
    return int(np.count_nonzero(np.asarray(dataset.global_weights) > 0))


def _comparator(name: str):
    """A comparator of the method registry (``vcmc.methods``), run as ``vcmc.fit`` runs it: the pooled gold
    standard without prior fractionation (docs/design.md §10), K-modes with the true number of clusters
    (the paper's section 5.4)."""
    method = get_method(name)

    def run(dataset, *, seed: int, profile, shared=None) -> GlobalResult:
        codes, n_mod, names = _codes(dataset)
        config = profile.fit_config(fractionate=method.federated)
        return method.run(codes, n_mod, config=config, rng=seed, jobs=1, silo_names=names,
                          n_clusters=_true_n_clusters(dataset) if name == "fed-kmodes" else None)

    return run


_EVAL = ("vcmc.metrics", "vcmc.research.simulate")
_VCMC_MODULES = ("vcmc.pipeline:server_steps", "vcmc.federation.transport:InProcessTransport",
                 "vcmc.silo.local:LocalSilo", "vcmc.matching:match",
                 "vcmc.research.study.evaluate:evaluate_matching",
                 "vcmc.aggregation:aggregate", "vcmc.aggregation:consensus", *_EVAL)


def default_registry() -> Registry:
    """The study's methods: VCMC with each matching, consensus, full-data MCMC and the comparators."""
    reg = Registry()
    reg.add_group(StudyGroup("vcmc-apply", _vcmc_prepare))
    for matching, name, label in (("calibrated", "vcmc-calibrated", "VCMC (calibrated, default)"),
                                  ("ball", "vcmc-ball", "VCMC (Ball, paper radius)"),
                                  ("hungarian", "vcmc-hungarian", "VCMC (Hungarian)"),
                                  ("min-divergence", "vcmc-min-divergence", "VCMC (min-divergence)")):
        reg.add(StudyMethod(name=name, label=label, run=_server(matching, "vcmc"), group="vcmc-apply",
                            matching=matching, modules=_VCMC_MODULES))
    reg.add(StudyMethod(name="consensus", label=get_method("consensus").label,
                        run=_server("calibrated", "consensus"), group="vcmc-apply", modules=_VCMC_MODULES))
    # the comparators: every method of the one registry that runs through an adapter
    for method in METHODS.values():
        if method.adapter is not None:
            reg.add(StudyMethod(name=method.name, label=method.label, run=_comparator(method.name),
                                modules=(method.adapter, *_EVAL)))
    return reg


# ---------------------------------------------------------------------------------------------------
# Table 2, Appendix A: matching of the true local partitions
# ---------------------------------------------------------------------------------------------------

def oracle_matching(dataset, matching: str, *, seed: int, profile) -> dict:
    """Match the silos' TRUE local partitions (the paper's Appendix A) and score the matching.

    Each silo's summary is the exact conjugate posterior given its true partition
    (``vcmc.research.study.evaluate.appendix_a_silos``); the matching algorithm then runs on these summaries as
    in a real federation (minimum divergence asks the oracle silos for its cost matrices).

    Returns
    -------
    dict
        ``correct`` (bool, docs/design.md §9.1), ``ari`` (pooled ARI of the partition the matching induces),
        ``n_global`` (global clusters found).
    """
    from vcmc.matching import match
    from vcmc.research.study.evaluate import appendix_a_silos, evaluate_matching, in_process_divergence

    config = profile.fit_config(matching=matching)
    data_rng, match_rng = spawn_generators(seed, 2)
    codes = [s.codes for s in dataset.silos]
    summaries, locals_, local_labels = appendix_a_silos(
        codes, list(dataset.labels), dataset.n_modalities, prior=config.prior, n_draws=profile.oracle_draws,
        names=[s.name for s in dataset.silos], rng=data_rng)
    divergence = in_process_divergence(list(zip(codes, locals_, strict=True)), dataset.n_modalities,
                                       encode=False)
    m = match(summaries, config.matching, divergence=divergence, rng=match_rng)
    ev = evaluate_matching(m, local_labels, list(dataset.labels))
    return {"correct": bool(ev["correct"]), "ari": float(ev["ari"]), "n_global": int(ev["n_global"])}
