"""The option tables of the README and docs/design.md, generated from the one table of options.

Each document holds its table between two marker lines; ``python -m vcmc.config.tables flags --write
README.md`` and ``python -m vcmc.config.tables all --write docs/design.md`` rewrite it, and
``tests/config/test_tables.py`` fails when a document's table differs from the generated one (an option
added, renamed or given a new default or help without the documents following).
"""

from __future__ import annotations

from vcmc.config.schema import describe_default, options

TABLE_START = ("<!-- option table ({what}): generated from src/vcmc/config/options.py by "
               "`python -m vcmc.config.tables {what} --write FILE`; edit the options, not this table -->")
TABLE_END = "<!-- end of the option table -->"
TABLES = {"flags": "the options `vcmc fit` has a flag for", "all": "every option"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def options_markdown(which: str = "all") -> str:
    """The markdown table of the options (``which = "flags"``: those with a ``vcmc fit`` flag), one row each:
    the run-config key (``--set``, ``--config``, the Flower run config), the flag, the default and the help."""
    if which not in TABLES:
        raise ValueError(f"which must be one of {sorted(TABLES)}; got {which!r}")
    rows = ["| option (`--set`, `--config`, run config) | `vcmc fit` flag | default | what it sets |",
            "| --- | --- | --- | --- |"]
    for opt in options():
        if which == "flags" and not opt.flag:
            continue
        flag = f"`{opt.flag}`" if opt.flag else ""
        text = opt.help + ("." if opt.help and not opt.help.endswith(".") else "")
        if opt.choices:
            text += " One of " + ", ".join(f"`{c}`" for c in opt.choices) + "."
        rows.append(f"| `{opt.key}` | {flag} | `{_cell(describe_default(opt))}` | {_cell(text)} |")
    return "\n".join(rows) + "\n"


def with_option_table(document: str, which: str) -> str:
    """``document`` with the text between its option-table markers replaced by ``options_markdown(which)``."""
    start = TABLE_START.format(what=which)
    if document.count(start) != 1 or document.count(TABLE_END) < 1:
        raise ValueError(f"the document needs one {start!r} line and a {TABLE_END!r} line after it")
    head, rest = document.split(start, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{start}\n{options_markdown(which)}{TABLE_END}{tail}"


def option_table_of(document: str, which: str) -> str | None:
    """The text between the document's option-table markers (None without them)."""
    start = TABLE_START.format(what=which)
    if start not in document:
        return None
    return document.split(start, 1)[1].split(TABLE_END, 1)[0].lstrip("\n")


def _main(argv=None) -> int:
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m vcmc.config.tables",
                                description="Print the option table, or rewrite it in the documents that hold "
                                            "its markers (the README: flags; docs/design.md: all).")
    p.add_argument("which", choices=sorted(TABLES))
    p.add_argument("--write", nargs="+", metavar="FILE", help="documents whose table to rewrite in place")
    args = p.parse_args(argv)
    if not args.write:
        print(options_markdown(args.which), end="")  # noqa: T201
        return 0
    from vcmc.atomic import atomic_write_text

    for path in map(Path, args.write):
        atomic_write_text(path, with_option_table(path.read_text(encoding="utf-8"), args.which))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
