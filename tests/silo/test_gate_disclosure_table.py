"""docs/federation.md's disclosure table names every field of every reply a silo sends, with its rule."""

import dataclasses
import re
from pathlib import Path

from vcmc.protocol import registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "federation.md"


def _field_table() -> dict[tuple[str, str], str]:
    text = DOC.read_text()
    start = text.index("**Every field of every reply.**")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        reply, field = (re.fullmatch(r"`(\w+)`", c) for c in cells[:2])
        assert reply and field, line
        assert cells[3], f"no rule for {cells[0]}.{cells[1]}"
        rows[(reply.group(1), field.group(1))] = cells[3]
    return rows


def _replies() -> list[type]:
    return list(registry.reply_types())


def test_every_field_of_every_reply_has_its_rule_in_the_disclosure_table():
    table = _field_table()
    replies = _replies()
    expected = {(r.__name__, f.name) for r in replies for f in dataclasses.fields(r)}
    missing = sorted(expected - set(table))
    extra = sorted(set(table) - expected)
    assert not missing, f"fields of replies missing from docs/federation.md's disclosure table: {missing}"
    assert not extra, f"the disclosure table names fields no reply has: {extra}"
