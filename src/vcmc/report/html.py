"""HTML building blocks of the report: one self-contained page (inline CSS, figures as base64 PNG, no
script, no network request: even the favicon is an empty data URL)."""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass

CSS = """
:root { --fail-bg: #f8d7da; --fail-fg: #842029; --ok: #0f5132; --muted: #666; --line: #d0d0d0; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; font-size: 15px;
       line-height: 1.45; color: #1a1a1a; margin: 0 auto; padding: 1.5em 2em 4em; max-width: 1500px; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 2px solid #4c72b0; padding-bottom: 0.2em; margin-top: 2.2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
p, ul, ol, .note, .rule { max-width: 62em; }
nav ol { columns: 2; max-width: 40em; }
table { border-collapse: collapse; font-size: 13px; margin: 0.6em 0 1em; }
th, td { border: 1px solid var(--line); padding: 0.25em 0.55em; vertical-align: top; }
th { background: #eef2f8; position: sticky; top: 0; text-align: left; }
tbody tr:nth-child(even) { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.fail { background: var(--fail-bg); color: var(--fail-fg); font-weight: 600; }
td.items { max-width: 38em; }
.scroll { overflow-x: auto; max-width: 100%; }
.tall { max-height: 38em; overflow-y: auto; }
.note { background: #f4f4f4; border-left: 4px solid #999; padding: 0.5em 0.9em; margin: 0.8em 0; }
.warn { background: #fff3cd; border-left: 4px solid #c9a227; padding: 0.5em 0.9em; margin: 0.5em 0; }
.rule { background: #eef6ee; border-left: 4px solid #55a868; padding: 0.5em 0.9em; margin: 0.8em 0; }
.muted { color: var(--muted); }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: var(--muted); max-width: 62em; }
dl.kv { display: grid; grid-template-columns: max-content auto; gap: 0.15em 1.2em; }
dl.kv dt { font-weight: 600; }
dl.kv dd { margin: 0; }
code { font-size: 0.92em; background: #f2f2f2; padding: 0 0.2em; }
.groups { display: flex; flex-wrap: wrap; gap: 0 1.5em; align-items: flex-start; }
details > summary { cursor: pointer; color: #4c72b0; margin: 0.4em 0; }
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class Cell:
    """A table cell: its text (escaped unless ``raw``), a CSS class and a tooltip."""

    text: object
    cls: str | None = None
    title: str | None = None
    raw: bool = False

    def render(self, tag: str = "td") -> str:
        attrs = ""
        if self.cls:
            attrs += f' class="{esc(self.cls)}"'
        if self.title:
            attrs += f' title="{esc(self.title)}"'
        body = str(self.text) if self.raw else esc(self.text)
        return f"<{tag}{attrs}>{body}</{tag}>"


def _cell(value) -> Cell:
    if isinstance(value, Cell):
        return value
    if isinstance(value, bool) or value is None:
        return Cell("" if value is None else str(value))
    if isinstance(value, int):
        return Cell(f"{value:,}", "num")
    if isinstance(value, float):
        return Cell(fmt(value), "num")
    return Cell(value)


def fmt(value, digits: int = 3) -> str:
    """A number for a table: fixed decimals for moderate values, scientific for tiny or huge ones."""
    if value is None:
        return "–"
    v = float(value)
    if not math.isfinite(v):
        return "–"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        if abs(v) < 1000:
            return f"{v:.{digits}f}"
        return f"{v:,.{digits}f}" if digits <= 1 else f"{v:,.0f}"
    return f"{v:.{digits - 1}e}"


def fmt_prob(value) -> str:
    """A probability for a table: three decimals, and '<0.001' / '>0.999' beyond them (a weight interval reads
    [<0.001, 0.206], not [9.12e-87, 0.206])."""
    if value is None or not math.isfinite(float(value)):
        return "–"
    v = float(value)
    if 0 < v < 0.0005:
        return "<0.001"
    if 0.9995 < v < 1:
        return ">0.999"
    return f"{v:.3f}"


def fmt_ratio(value) -> str:
    """A ratio with two significant digits (0.0034, 0.52, 3.1, 48, 1,200)."""
    if value is None or not math.isfinite(float(value)):
        return "–"
    v = float(value)
    if v >= 10:
        return f"{v:,.0f}"
    if v >= 1:
        return f"{v:.1f}"
    return f"{v:.2g}"


def pct(value) -> str:
    """A proportion as a percentage with two significant digits below 1%."""
    v = 100.0 * float(value)
    if v == 0:
        return "0%"
    if abs(v) < 1:
        return f"{v:.2g}%"
    return f"{v:.0f}%" if abs(v) >= 10 else f"{v:.1f}%"


def table(headers: list, rows: list[list], *, scroll: bool = True, tall: bool = False) -> str:
    head = "".join(_cell(h).render("th") for h in headers)
    body = "\n".join("<tr>" + "".join(_cell(v).render() for v in row) + "</tr>" for row in rows)
    out = f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"
    if tall:
        out = f'<div class="tall">{out}</div>'
    if scroll:
        out = f'<div class="scroll">{out}</div>'
    return out


def figure(png: bytes, *, alt: str, caption: str, file: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
            f"<figcaption>{caption} <span class=\"muted\">(also <code>{esc(file)}</code>)</span></figcaption>"
            "</figure>")


def note(text: str) -> str:
    return f'<div class="note">{text}</div>'


def unavailable(what: str, why: str = "") -> str:
    extra = f" {why}" if why else ""
    return note(f"<strong>Not available in this result:</strong> {what}.{extra}")


def kv(pairs: list[tuple[str, object]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"


@dataclass
class Section:
    id: str
    title: str
    body: str


def document(title: str, intro: str, sections: list[Section]) -> str:
    toc = "".join(f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a></li>' for s in sections)
    parts = "\n".join(f'<section id="{esc(s.id)}"><h2>{esc(s.title)}</h2>\n{s.body}\n</section>' for s in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><link rel=\"icon\" href=\"data:,\"><style>{CSS}</style></head>\n"
            f"<body><header><h1>{esc(title)}</h1>{intro}</header>\n<nav><h3>Contents</h3><ol>{toc}</ol></nav>\n"
            f"{parts}\n</body></html>\n")
