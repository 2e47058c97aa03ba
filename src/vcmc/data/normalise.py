"""Explicit normalisation of cell labels: what the user asked for, and nothing else.

Without an option a cell's text is its modality: ``" 1 "`` and ``"1"``, or ``"Yes"`` and ``"yes"``, are
different labels, and schema inference refuses a column where two labels differ only so (it cannot know
whether they are one modality). ``--strip-whitespace`` and ``--case-insensitive`` (``Normalisation``) make
the choice explicit; the readers apply it to every distinct label (never cell by cell) and report what it
changed, so that ``vcmc fit`` records it in ``result.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SUSPECT_NA_TOKENS", "Normalisation"]

#: Cell texts that spreadsheets and statistics packages write for a missing value. They are ordinary labels
#: unless ``na_values`` (or the schema's ``na_values``) says otherwise; schema inference refuses to turn one
#: into a modality without being told (``--na-values NA``, or a schema file listing it as a modality).
#: "None" is left out: it is a plausible modality ("no symptoms") in health records.
SUSPECT_NA_TOKENS: frozenset[str] = frozenset({"NA", "N/A", "n/a", "NaN", "nan", "NULL", "null", "#N/A"})


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
        return label

    def to_dict(self) -> dict[str, bool]:
        return {"strip_whitespace": self.strip_whitespace, "case_insensitive": self.case_insensitive}


NO_NORMALISATION = Normalisation()
