"""docs/reliability.md lists every case of the catalogue with its behaviour, and its counts are right."""

import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


def test_the_document_lists_every_case_with_its_behaviour_and_the_counts():
    text = DOC.read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (\w+) \|", text, flags=re.M))
    assert listed == {c.id: c.behaviour for c in cases.ALL_CASES}
    counts = collections.Counter(c.behaviour for c in cases.ALL_CASES)
    assert set(counts) <= set(cases.BEHAVIOURS)
    assert (f"**{len(cases.ALL_CASES)} cases**: {counts['error']} errors, {counts['refusal']} refusals with the "
            f"fix, {counts['warning']} warnings, {counts['recorded']} recorded") in " ".join(text.split())
    assert f"{counts['handled']} handled" in text
    assert len(cases.ALL_CASES) >= 40 and len({c.id for c in cases.ALL_CASES}) == len(cases.ALL_CASES)


def test_every_case_has_exactly_one_test():
    import test_catalogue_cli as cli
    import test_catalogue_workflow as workflow

    functions = {n.removeprefix("test_").replace("_", "-") for mod in (cli, workflow) for n in dir(mod)
                 if n.startswith("test_") and getattr(getattr(mod, n), "__module__", mod.__name__) == mod.__name__}
    failing = {c.id for c in cli.FAILING}          # one parametrized test each
    for c in cases.ALL_CASES:
        assert (c.id in failing) != (c.id in functions), c.id
