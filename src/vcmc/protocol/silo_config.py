"""``SiloConfig``: the options the server sends a silo with its summarize request, typed and versioned.

A silo acts on the prior, the sampler, the post-processing, the disclosure limits the server asks for (the
silo keeps the stricter of them and its operator's, ``vcmc.disclosure.effective_privacy``), the
aggregation strategy (whether a count table is wanted) and the rounds that will follow the summary (how many,
and whether under secure aggregation: a silo whose operator does not allow them refuses the run before
sampling, not at the first round); nothing else of ``FitConfig`` crosses the boundary.
The fields are the config sections themselves, so an option added to one of them (``vcmc.config.options``)
travels without a change here. The encoding walks the one table of options (``vcmc.config.schema``): one
key per option, spelt as the run config spells it (``sampler.n-iter``), its value a scalar, or an array for
a tuple (``prior.beta`` per variable); an option set to None is left out. Decoding refuses a key that is
not an option of these sections and a value of the wrong type, and the config dataclasses check the ranges,
so a silo never acts on a setting it did not understand.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

import numpy as np

from vcmc.config.options import (
    FitConfig,
    PostprocessConfig,
    PriorConfig,
    PrivacyConfig,
    SamplerConfig,
    Strategy,
)
from vcmc.config.schema import Option, options
from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.protocol.message import Message

SILO_SECTIONS = ("prior", "sampler", "postprocess", "privacy")
"""The sections of ``FitConfig`` a silo receives whole."""

STRATEGY_KEY = "aggregation.strategy"
"""The aggregation option that decides whether a count table is built (only when it is wanted)."""

AGGREGATION_FIELDS = {STRATEGY_KEY: "strategy", "aggregation.rounds": "rounds"}
"""The options of the aggregation section a silo receives, by key, with their field of ``SiloConfig``."""


def silo_options() -> tuple[Option, ...]:
    """The options a ``SiloConfig`` carries, in the order of the table of options."""
    return tuple(o for o in options() if o.section in SILO_SECTIONS or o.key in AGGREGATION_FIELDS)


@dataclass(frozen=True)
class SiloConfig(Message):
    """The server's options for one silo's apply step (``SummarizeRequest.config``).

    Attributes
    ----------
    prior, sampler, postprocess, privacy : the sections of ``FitConfig`` of the same names
    strategy : str
        ``AggregationConfig.strategy``.
    rounds : int
        ``AggregationConfig.rounds``: R > 1 (or 0, auto) announces the global-informed rounds after the summary.
    """

    KIND = "silo_config"
    VERSION = 3  # 2: the rounds announced (rounds, round_secure_sum); 3: without round_secure_sum

    prior: PriorConfig
    sampler: SamplerConfig
    postprocess: PostprocessConfig
    privacy: PrivacyConfig
    strategy: Strategy
    rounds: int = 1

    def __post_init__(self):
        for name in SILO_SECTIONS:
            want = type(getattr(FitConfig(), name))
            if not isinstance(getattr(self, name), want):
                raise ConfigError(f"SiloConfig.{name} must be a {want.__name__}; got "
                                  f"{type(getattr(self, name)).__name__}")
        # the same checks and messages as AggregationConfig's own
        dataclasses.replace(FitConfig().aggregation, strategy=self.strategy, rounds=self.rounds)

    @classmethod
    def from_fit_config(cls, config: FitConfig) -> SiloConfig:
        agg = config.aggregation
        return cls(prior=config.prior, sampler=config.sampler, postprocess=config.postprocess,
                   privacy=config.privacy, strategy=agg.strategy, rounds=agg.rounds)

    def value(self, opt: Option):
        if opt.key in AGGREGATION_FIELDS:
            return getattr(self, AGGREGATION_FIELDS[opt.key])
        return getattr(getattr(self, opt.section), opt.name)

    def to_arrays(self) -> dict[str, object]:
        out: dict[str, object] = {"__kind__": self.KIND, "__version__": int(self.VERSION)}
        for opt in silo_options():
            value = self.value(opt)
            if value is None:
                continue
            out[opt.key] = np.asarray(value, dtype=np.float64) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_arrays(cls, arrays: typing.Mapping[str, object]) -> SiloConfig:
        header = {k: _scalar(v) for k, v in arrays.items() if k in ("__kind__", "__version__")}
        if header.get("__kind__") != cls.KIND:
            raise InconsistentSiloSummaries(f"expected a {cls.KIND!r} message, got kind {header.get('__kind__')!r}")
        version = header.get("__version__")
        if version is None or int(version) != cls.VERSION:
            raise InconsistentSiloSummaries(
                f"{cls.KIND!r} message has version {version!r}; this vcmc understands version {cls.VERSION}. "
                "Upgrade the silo and the server to the same vcmc release.")
        known = {o.key: o for o in silo_options()}
        unknown = sorted(str(k) for k in arrays if k not in known and k not in ("__kind__", "__version__"))
        if unknown:
            raise InconsistentSiloSummaries(
                f"the summarize request's configuration has options this vcmc does not know: "
                f"{', '.join(map(repr, unknown))}. Upgrade the silo and the server to the same vcmc release.")
        sections: dict[str, dict[str, object]] = {name: {} for name in SILO_SECTIONS}
        aggregation: dict[str, object] = {}
        for key, opt in known.items():
            if key not in arrays:
                if not opt.optional:
                    raise InconsistentSiloSummaries(f"the summarize request's configuration has no {key!r}")
                value = None
            else:
                value = _typed(opt, arrays[key])
            if key in AGGREGATION_FIELDS:
                aggregation[AGGREGATION_FIELDS[key]] = value
            else:
                sections[opt.section][opt.name] = value
        built = {name: type(getattr(FitConfig(), name))(**kwargs) for name, kwargs in sections.items()}
        return cls(**built, **aggregation)


def _scalar(value):
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _typed(opt: Option, value):
    """The value of one option as its type hint wants it; the error names the option and the type only."""
    value = _scalar(value)
    if isinstance(value, np.generic):
        value = value.item()
    alts = [a for a in opt.alternatives if a is not type(None)]
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and value.dtype.kind in "iuf" and any(typing.get_origin(a) is tuple for a in alts):
            return tuple(float(v) for v in value.tolist())
    elif isinstance(value, bool):
        if bool in alts:
            return value
    elif isinstance(value, int):
        if int in alts:
            return value
        if float in alts:
            return float(value)
    elif isinstance(value, float):
        if float in alts:
            return value
    elif isinstance(value, str) and (str in alts or any(typing.get_origin(a) is typing.Literal for a in alts)):
        return value
    expected = " or ".join(getattr(a, "__name__", None) or str(a) for a in alts)
    raise InconsistentSiloSummaries(f"the summarize request's configuration option {opt.key!r} must be "
                                    f"{expected}; got a {type(value).__name__}")
