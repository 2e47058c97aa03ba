"""Every option defined once: the table of options, and everything derived from it (flags, run-config keys,
the Flower app's defaults, the estimator's parameters), agree with the config dataclasses."""

import dataclasses
import tomllib
from pathlib import Path

import pytest

from vcmc.cli import build_parser
from vcmc.config import FitConfig, SamplerConfig, config_from_mapping, config_to_mapping
from vcmc.config.mapping import flatten_mapping
from vcmc.config.schema import SECTIONS, app_config_lines, flags, option, options
from vcmc.exceptions import ConfigError
from vcmc.flower.server import SERVER_KEYS as SERVER_APP_KEYS

APP = Path(__file__).resolve().parents[2] / "flower_app" / "pyproject.toml"
# the ServerApp's own keys, which are not FitConfig options
SERVER_KEYS = set(SERVER_APP_KEYS)


def _app_config() -> dict:
    table = tomllib.loads(APP.read_text(encoding="utf-8"))["tool"]["flwr"]["app"]["config"]
    return flatten_mapping(table)


def app_config_problems(flat: dict) -> list[str]:
    """What is wrong with a Flower app's run config, key by key, against the table of options."""
    problems = []
    keys = {k.replace("_", "-") for k in flat}
    for opt in options():
        if opt.key not in keys:
            problems.append(f"missing {opt.key}")
        elif flat[opt.key] != opt.toml_default():
            problems.append(f"{opt.key} = {flat[opt.key]!r}, the library's default is {opt.toml_default()!r}")
    problems += [f"unknown key {k}" for k in sorted(keys - {o.key for o in options()} - SERVER_KEYS)]
    return problems


def test_every_field_of_every_section_is_one_option_with_help():
    fields = [(name, f.name) for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
    assert [(o.section, o.name) for o in options()] == fields
    assert len({o.key for o in options()}) == len(options())
    missing = [o.key for o in options() if len(o.help) < 10]
    assert missing == [], f"options without help in their class docstring: {missing}"
    assert option("sampler.n_iter") is option("sampler.n-iter")


def test_defaults_of_the_table_build_the_default_config():
    mapping = {o.key: o.toml_default() for o in options()}
    assert config_from_mapping(mapping) == FitConfig()
    # and every key config_to_mapping writes is an option of the table
    assert set(config_to_mapping(FitConfig())) == {o.key for o in options()}


def test_flower_app_config_has_every_key_with_the_library_default():
    assert app_config_problems(_app_config()) == []


def test_the_app_check_notices_a_missing_key_and_a_wrong_default():
    flat = _app_config()
    del flat["postprocess.summary-draws"]
    flat["sampler.thin"] = 7
    flat["sampler.typo"] = 1
    assert app_config_problems(flat) == ["sampler.thin = 7, the library's default is 5",
                                         "missing postprocess.summary-draws", "unknown key sampler.typo"]


def test_the_app_lines_generated_from_the_table_parse_to_the_defaults():
    flat = tomllib.loads("\n".join(app_config_lines()))
    assert config_from_mapping(flatten_mapping(flat)) == FitConfig()
    assert len(app_config_lines()) == len(options())


def test_burn_in_none_is_half_of_the_iterations_inside_the_config():
    assert SamplerConfig(n_iter=2000).burn_in == 1000
    assert SamplerConfig(n_iter=20_000, stop="converged").burn_in == 5000
    assert SamplerConfig(n_iter=6000, stop="converged").burn_in == 3000
    assert SamplerConfig(n_iter=2000, burn_in=100).burn_in == 100
    with pytest.raises(ConfigError, match="burn_in"):
        SamplerConfig(n_iter=2000, burn_in=2000)


def test_run_config_override_of_n_iter_alone_works_as_flower_gives_it():
    """``flwr run . --run-config 'sampler.n-iter=2000'``: Flower merges the override into the app's table."""
    flat = {**_app_config(), "sampler.n-iter": 2000}
    config = config_from_mapping(flat, ignore=SERVER_KEYS)
    assert (config.sampler.n_iter, config.sampler.burn_in) == (2000, 1000)
    # an explicit burn-in is kept, and a derived one follows a new n_iter from a base config
    assert config_from_mapping({"sampler.n-iter": 4000}, base=config).sampler.burn_in == 2000
    explicit = config_from_mapping({"sampler.burn-in": 300})
    assert config_from_mapping({"sampler.n-iter": 4000}, base=explicit).sampler.burn_in == 300


def test_every_flag_of_the_table_is_a_flag_of_vcmc_fit():
    parser = build_parser(only="fit")
    fit = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["fit"]
    typed = {s for a in fit._actions for s in a.option_strings}
    assert set(flags().values()) <= typed
    assert len(set(flags().values())) == len(flags())


@pytest.mark.parametrize("opt", [o for o in options() if o.flag], ids=lambda o: o.key)
def test_each_flag_sets_its_option(opt, tmp_path):
    from vcmc.cli.fit import config_from_args

    parser = build_parser(only="fit")
    value = {"sampler.n-iter": "3000", "sampler.burn-in": "100", "matching.method": "ball",
             "aggregation.strategy": "design", "matching.level": "0.99", "postprocess.min-cluster-fraction": "0.01",
             "prior.alpha": "0.2", "prior.beta": "0.7"}.get(opt.key, "7")
    argv = ["fit", "x.csv", "--out", str(tmp_path), opt.flag] + ([] if opt.negate else [value])
    config = config_from_args(parser.parse_args(argv))
    got = getattr(getattr(config, opt.section), opt.name)
    expected = False if opt.negate else opt.scalar_type(value)
    assert got == expected
