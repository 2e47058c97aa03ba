"""The README's and docs/design.md's option tables are the ones generated from the table of options."""

from pathlib import Path

import pytest

from vcmc.config.schema import options
from vcmc.config.tables import option_table_of, options_markdown, with_option_table

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [("README.md", "flags"), ("docs/design.md", "all")]


@pytest.mark.parametrize(("document", "which"), DOCUMENTS)
def test_the_documents_table_is_the_generated_one(document, which):
    text = (ROOT / document).read_text(encoding="utf-8")
    table = option_table_of(text, which)
    assert table is not None, f"{document} has no option table ({which}) markers"
    assert table == options_markdown(which), (
        f"{document}'s option table differs from the options: run python -m vcmc.config.tables {which} "
        f"--write {document}")


def test_every_option_has_a_row_and_every_flag_is_in_the_readme():
    everything = options_markdown("all")
    flagged = options_markdown("flags")
    for opt in options():
        assert f"| `{opt.key}` |" in everything
        assert (f"| `{opt.key}` | `{opt.flag}` |" in flagged) == bool(opt.flag)


def test_an_undocumented_option_is_noticed():
    """A document written before an option existed no longer equals the generated table."""
    text = (ROOT / "docs/design.md").read_text(encoding="utf-8")
    table = option_table_of(text, "all")
    stale = text.replace(next(line for line in table.splitlines() if "`sampler.thin`" in line) + "\n", "")
    assert option_table_of(stale, "all") != options_markdown("all")
    assert option_table_of(with_option_table(stale, "all"), "all") == options_markdown("all")
    # what surrounds the table is kept
    assert with_option_table(text, "all") == text
