"""Explicit normalisation of cell labels: what the user asked for, and nothing else.

Without an option a cell's text is its modality: ``" 1 "`` and ``"1"``, or ``"Yes"`` and ``"yes"``, are
different labels, and schema inference refuses a column where two labels differ only so (it cannot know
whether they are one modality). ``--strip-whitespace`` and ``--case-insensitive`` (``Normalisation``) make
the choice explicit; the readers apply it to every distinct label (never cell by cell) and report what it
changed, so that ``vcmc fit`` records it in ``result.json``.

One normalisation is always applied: Unicode's canonical composition (NFC). ``"é"`` typed as one code point
and as ``"e"`` plus a combining accent (NFD, as macOS file names and some exports write it) are the same text
by the Unicode standard's own definition (canonical equivalence), look identical in every viewer and cannot
be two values a person meant; kept apart they would become two modalities (a cluster split by an encoding
accident). So labels are composed to NFC, and every cell that changed is recorded under ``data.normalised``
of ``result.json`` like the asked-for normalisations (docs/reliability.md, ``unicode-forms``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["MISSING_CODES", "SUSPECT_NA_TOKENS", "Normalisation", "number_of"]

#: Cell texts that spreadsheets and statistics packages write for a missing value. They are ordinary labels
#: unless ``na_values`` (or the schema's ``na_values``) says otherwise; schema inference refuses to turn one
#: into a modality without being told (``--na-values NA``, or a schema file listing it as a modality).
#: "None" is left out: it is a plausible modality ("no symptoms") in health records.
SUSPECT_NA_TOKENS: frozenset[str] = frozenset({"NA", "N/A", "n/a", "NaN", "nan", "NULL", "null", "#N/A"})


#: Other codes that data exports use for a missing or unknown value (SAS and Stata write ".", survey packages
#: -9 / -99 / -999 / 9999, spreadsheets "?"). Each can also be a real category, so they are not refused:
#: ``vcmc fit`` and ``vcmc schema`` warn, naming the column, the value and its rows, with the option that
#: reads it as missing (``vcmc.data.checks``).
MISSING_CODES: frozenset[str] = frozenset({".", "?", "-", "--", "None", "none", "NONE", "missing", "Missing",
                                          "MISSING", "unknown", "Unknown", "UNKNOWN", "-9", "-99", "-999",
                                          "-9999", "999", "9999"})

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def number_of(label: str) -> float | None:
    """The number a label spells (``"01"``, ``"1.0"``, ``"+1"``, ``"1e0"`` all spell 1), or None."""
    # no stripping: ' 1 ' beside '1' is a white-space variant, refused as such
    return float(label) if _NUMBER.fullmatch(label) else None


@dataclass(frozen=True)
class Normalisation:
    """How cell labels are normalised before they are compared with modalities.

    Attributes
    ----------
    strip_whitespace : bool
        Remove leading and trailing white space (``str.strip``).
    case_insensitive : bool
        Compare labels ignoring case (``str.casefold``); an inferred modality is the folded label, a cell
        matches a schema modality that equals it ignoring case (the schema's spelling is kept).
    """

    strip_whitespace: bool = False
    case_insensitive: bool = False

    @property
    def active(self) -> bool:
        return self.strip_whitespace or self.case_insensitive

    def key(self, label: str) -> str:
        """The normalised form of one label (the label itself when no option is on)."""
        if self.strip_whitespace:
            label = label.strip()
        if self.case_insensitive:
            label = label.casefold()
        # ASCII text is already NFC: the check keeps the common case free
        return label if label.isascii() else unicodedata.normalize("NFC", label)

    def to_dict(self) -> dict[str, bool]:
        return {"strip_whitespace": self.strip_whitespace, "case_insensitive": self.case_insensitive}


NO_NORMALISATION = Normalisation()
