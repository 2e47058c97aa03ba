"""The catalogue of input and failure cases of ``vcmc fit``: one entry per case, one test per entry.

``DATA_CASES`` are files given to ``vcmc fit`` (and, when ``silo_side``, read by a Flower SuperNode as its own
data); ``OTHER_CASES`` are tested by a function of ``test_catalogue_cli.py`` named ``test_<id>``.
``docs/reliability.md`` lists every case with its behaviour; ``test_catalogue_doc.py`` keeps them in step.

Behaviours: ``error`` (stops with a message naming the file / flag and what was expected), ``refusal``
(stops with the fix: the option or file that resolves it), ``warning`` (the run goes on and says so),
``recorded`` (a normalisation or choice, done as asked and recorded in ``result.json``), ``handled`` (the run
does the right thing: resumes, caps its processes, numbers rows as in the file, ends cleanly on Ctrl-C).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BEHAVIOURS = ("error", "refusal", "warning", "recorded", "handled")


@dataclass(frozen=True)
class Case:
    id: str
    behaviour: str
    what: str
    files: dict = field(default_factory=dict)   # name -> text (CSV or JSON); "{base}" is replaced by clean data
    args: tuple = ()
    match: str = ""                              # regex the CLI's message must match
    silo_side: bool = False                      # the silo reads these files itself (also run through Flower)
    values: tuple = ()                           # data values that a silo's error text must not carry
    schema_node: bool = False                    # on Flower: the SuperNode is given schema.json as schema-path


# -- clean data ------------------------------------------------------------------------------------------------
N_ROWS = 60
COLUMNS = ("smoker", "region", "stage", "sex")


def clean_rows(silo: int, n: int = N_ROWS) -> list[list[str]]:
    """Two latent groups, every modality in at least 10 rows of every silo (seeded by the silo)."""
    rng = np.random.default_rng(100 + silo)
    z = np.arange(n) % 2
    rows = []
    for i in range(n):
        hi = z[i] == 1
        rows.append(["yes" if rng.random() < (0.8 if hi else 0.2) else "no",
                     ["north", "south", "east"][(i // 2 + (1 if hi else 0)) % 3],
                     str(1 + int(rng.random() < (0.75 if hi else 0.25)) + int(rng.random() < 0.3)),
                     "F" if rng.random() < 0.5 else "M"])
    return rows


def csv_text(rows, header=COLUMNS) -> str:
    return "\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n"


def clean(silo: int) -> str:
    return csv_text(clean_rows(silo))


def edited(silo: int, row: int, col: int, value: str) -> str:
    rows = clean_rows(silo)
    rows[row][col] = value
    return csv_text(rows)


def with_line(silo: int, at: int, line: str) -> str:
    lines = clean(silo).splitlines()
    lines.insert(at, line)
    return "\n".join(lines) + "\n"


def with_column(silo: int, name: str, values) -> str:
    rows = clean_rows(silo)
    return csv_text([[*r, str(v)] for r, v in zip(rows, values, strict=True)], (*COLUMNS, name))


SCHEMA = ('{"format": "vcmc-schema", "version": 1, "variables": ['
          '{"name": "smoker", "modalities": ["no", "yes"]}, '
          '{"name": "region", "modalities": ["east", "north", "south"]}, '
          '{"name": "stage", "modalities": ["1", "2", "3"]}, '
          '{"name": "sex", "modalities": ["F", "M"]}]}')


def base(**changes) -> dict:
    files = {"a.csv": clean(0), "b.csv": clean(1), "c.csv": clean(2)}
    files.update(changes)
    return files


def _ws_rows():
    rows = clean_rows(1)
    for i in range(0, N_ROWS, 4):
        rows[i][2] = f" {rows[i][2]} "
    return csv_text(rows)


def _case_rows(silo):
    rows = clean_rows(silo)
    for r in rows[::2]:          # every other row: "Yes" and "yes" within one file
        r[0] = r[0].capitalize()
    return csv_text(rows)


def _age(silo):
    rng = np.random.default_rng(7 + silo)
    return with_column(silo, "age", rng.integers(18, 78, N_ROWS))


def _na_region(silo):
    rows = clean_rows(silo)
    for i in range(0, N_ROWS, 5):
        rows[i][1] = "NA"
    return csv_text(rows)


def _short_row():
    lines = clean(0).splitlines()
    lines[7] = ",".join(lines[7].split(",")[:2])
    return "\n".join(lines) + "\n"


def _long_rows():
    lines = clean(0).splitlines()
    return "\n".join([lines[0], *(f"{i},{ln}" for i, ln in enumerate(lines[1:]))]) + "\n"


DATA_CASES = (
    Case("whitespace-variants", "refusal", "' 1 ' beside '1' in an inferred schema",
         base(**{"b.csv": _ws_rows()}), match=r"column 'stage': ' 1 ', '1' differ only by white space.*"
         r"--strip-whitespace", silo_side=True, values=(" 1 ",)),
    Case("strip-whitespace", "recorded", "--strip-whitespace reads ' 1 ' as '1' and records each change",
         base(**{"b.csv": _ws_rows()}), args=("--strip-whitespace",)),
    Case("case-variants", "refusal", "'Yes' beside 'yes' in an inferred schema",
         base(**{"b.csv": _case_rows(1)}), match=r"column 'smoker': 'No', 'no' differ only by case.*"
         r"--case-insensitive", silo_side=True, values=("Yes", "No")),
    Case("case-insensitive", "recorded", "--case-insensitive folds 'Yes' into 'yes' and records it",
         base(**{"b.csv": _case_rows(1)}), args=("--case-insensitive",)),
    Case("duplicated-header", "error", "a header naming one column twice (pandas would fit 'sex.1')",
         base(**{"a.csv": csv_text([[*r, "F"] for r in clean_rows(0)], (*COLUMNS, "sex"))}),
         match=r"a\.csv: the header names column\(s\) 'sex' more than once", silo_side=True),
    Case("identifier-column", "refusal", "a record number 1-60 in 60-row silos",
         base(**{f"{k}.csv": with_column(i, "record", range(1, N_ROWS + 1)) for i, k in enumerate("abc")}),
         match=r"column 'record': 60 distinct values in 60 rows .*row identifier.*--id-column record",
         silo_side=True, values=("57", "58")),
    Case("many-levels", "refusal", "a 40-level age column in 60-row silos",
         base(**{f"{k}.csv": _age(i) for i, k in enumerate("abc")}),
         match=r"column 'age': \d+ distinct values in 60 rows .*fewer than two rows per value.*age bands",
         silo_side=True),
    Case("rare-modality", "refusal", "a value seen in one row of one silo (under the disclosure minimum 10)",
         base(**{"c.csv": edited(2, 5, 1, "west")}),
         match=r"modalities seen in fewer rows of all silos than the disclosure minimum \(--min-cluster-size "
               r"10\): column 'region': 'west' in 1 row\(s\) of .*c\.csv.*schema file", silo_side=True,
         values=("west",)),
    Case("rare-modality-with-schema", "recorded", "the same value listed in a schema file is the user's decision",
         base(**{"c.csv": edited(2, 5, 1, "west"),
                 "schema.json": SCHEMA.replace('"east", "north", "south"', '"east", "north", "south", "west"')})),
    Case("schema-beside-some-files", "refusal", "a schema.json beside only some of the files",
         {"a.csv": clean(0), "b.csv": clean(1), "sub/c.csv": clean(2), "sub/schema.json": SCHEMA},
         match=r"a schema\.json lies beside some of the files .* --schema PATH"),
    Case("schema-recorded", "recorded", "result.json says which schema was used (a schema.json beside the files)",
         base(**{"schema.json": SCHEMA})),
    Case("schema-modalities-string", "error", '"modalities": "123" (a string would be split into characters)',
         base(**{"schema.json": SCHEMA.replace('["1", "2", "3"]', '"123"')}),
         match=r"variable 'stage': 'modalities' must be a JSON list", silo_side=True, schema_node=True),
    Case("schema-float-modality", "error", "a modality written as the number 1.5 in the schema",
         base(**{"schema.json": SCHEMA.replace('["1", "2", "3"]', '[1, 2, 3.5]')}),
         match=r"every modality must be a string \(or a whole number\); got 3\.5", silo_side=True,
         schema_node=True),
    Case("schema-not-json", "error", "a schema file that is not JSON", base(**{"schema.json": "{variables: ["}),
         match=r"schema\.json' is not valid JSON", silo_side=True, schema_node=True),
    Case("short-row", "error", "a line with 2 of 4 fields (pandas would fill the others as missing)",
         base(**{"a.csv": _short_row()}), match=r"a\.csv, line 8: 2 fields, expected 4.*missing values",
         silo_side=True),
    Case("long-row", "error", "a line with one field too many",
         base(**{"a.csv": with_line(0, 5, "yes,north,1,F,extra")}), match=r"a\.csv, line 6: 5 fields, expected 4",
         silo_side=True, values=("extra",)),
    Case("index-column", "error", "every line with one field more than the header (pandas: an index column)",
         base(**{"a.csv": _long_rows()}), match=r"a\.csv, line 2: 5 fields, expected 4", silo_side=True),
    Case("blank-line", "error", "a blank line inside the data (later row numbers would shift)",
         base(**{"a.csv": with_line(0, 10, "")}), match=r"a\.csv, line 11: blank line inside the data.*shift",
         silo_side=True),
    Case("na-text-inferred", "refusal", "'NA' in a column without a schema (a value, or missing?)",
         base(**{"a.csv": _na_region(0)}),
         match=r"'NA' in column\(s\) 'region' \(12 rows, in .*a\.csv\) is a common spelling of a missing value"
               r".*--na-values NA",
         silo_side=True),
    Case("na-values", "recorded", "--na-values NA reads 'NA' as missing and records the cells",
         base(**{"a.csv": _na_region(0)}), args=("--na-values", "NA")),
    Case("na-modality-in-schema", "recorded", "'NA' listed as a modality (a region code) stays a value",
         base(**{f"{k}.csv": _na_region(i) for i, k in enumerate("abc")},
              **{"schema.json": SCHEMA.replace('"east", "north", "south"', '"NA", "east", "north", "south"')})),
    Case("na-values-clash", "error", "--na-values NA while the schema lists 'NA' as a modality",
         base(**{"a.csv": _na_region(0),
                 "schema.json": SCHEMA.replace('"east", "north", "south"', '"NA", "east", "north", "south"')}),
         args=("--na-values", "NA"), match=r"'NA' is a modality of the schema and also a missing-value text"),
    Case("unknown-value", "error", "a value outside the schema (a typo)",
         base(**{"b.csv": edited(1, 3, 1, "nroth"), "schema.json": SCHEMA}),
         match=r"b\.csv, column 'region': value\(s\) 'nroth' \(data row\(s\) 3, 0-based\) are not modalities",
         silo_side=True, values=("nroth",), schema_node=True),
    Case("padded-value-with-schema", "error", "' yes' with a schema: the error points at --strip-whitespace",
         base(**{"b.csv": edited(1, 3, 0, " yes"), "schema.json": SCHEMA}),
         match=r"' yes' is 'yes' with surrounding white space: --strip-whitespace", silo_side=True,
         values=(" yes",), schema_node=True),
    Case("extra-column", "error", "a column that is not in the schema",
         base(**{"b.csv": with_column(1, "postcode", ["x"] * N_ROWS), "schema.json": SCHEMA}),
         match=r"column\(s\) 'postcode' are not in the schema", silo_side=True, schema_node=True),
    Case("missing-column", "error", "a schema column absent from a file",
         base(**{"b.csv": csv_text([r[:3] for r in clean_rows(1)], COLUMNS[:3]), "schema.json": SCHEMA}),
         match=r"column\(s\) 'sex' of the schema are missing", silo_side=True, schema_node=True),
    Case("different-columns", "error", "silos with different columns (inferred schema)",
         base(**{"b.csv": csv_text([r[:3] for r in clean_rows(1)], COLUMNS[:3])}),
         match=r"column\(s\) 'sex' are missing \(present in .*a\.csv\)"),
    Case("column-all-missing", "error", "a column empty in every row of one silo",
         base(**{"b.csv": csv_text([[*r[:3], ""] for r in clean_rows(1)]), "schema.json": SCHEMA}),
         match=r"b\.csv: column\(s\) 'sex' have all 60 values missing", silo_side=True, schema_node=True),
    Case("one-row-silo", "error", "a silo of one row", base(**{"b.csv": csv_text(clean_rows(1)[:1])}),
         match=r"b\.csv: has 1 data row\(s\).*expected at least 2", silo_side=True),
    Case("empty-file", "error", "an empty file", base(**{"b.csv": ""}), match=r"b\.csv' is empty",
         silo_side=True),
    Case("missing-file", "error", "a file that does not exist", base(**{"b.csv": None}),
         match=r"b\.csv': it does not exist"),
    Case("not-utf8", "error", "a file in Latin-1 with accented labels",
         base(**{"b.csv": edited(1, 2, 1, "Zürich").encode("latin-1")}), match=r"b\.csv': not utf-8 text",
         silo_side=True),
    Case("constant-column", "refusal", "a column with one value in every silo",
         {k: csv_text([[*r, "x"] for r in clean_rows(i)], (*COLUMNS, "flag")) for i, k in
          enumerate(("a.csv", "b.csv", "c.csv"))}, match=r"column 'flag' has a single modality 'x'.*remove it",
         silo_side=True),
    Case("free-text", "refusal", "a free-text column (more than 50 distinct values)",
         base(**{"a.csv": csv_text([[*r[:3], f"note {i // 2}"] for i, r in enumerate(clean_rows(0) * 2)])}),
         match=r"column 'sex': 60 distinct values .*at most max_levels=50", silo_side=True,
         values=("note 1",)),
    Case("duplicate-ids", "error", "--id-column with a repeated identifier",
         base(**{f"{k}.csv": with_column(i, "pid", [*range(N_ROWS - 1), 0]) for i, k in enumerate("abc")}),
         args=("--id-column", "pid"), match=r"column 'pid': row identifiers '0' appear more than once",
         silo_side=True, values=()),
)


# -- the first day with one's own data (issue 22) ------------------------------------------------------------------
def _spelled(silo, spellings):
    """Column 'stage' with '1' written as each of ``spellings`` in turn (every third row)."""
    rows = clean_rows(silo)
    ones = [r for r in rows if r[2] == "1"]
    for i, r in enumerate(ones[::3]):
        r[2] = spellings[i % len(spellings)]
    return csv_text(rows)


def _regions(silo, name):
    rows = clean_rows(silo)
    for r in rows[::3]:
        r[1] = name
    return csv_text(rows)


def _recoded(silo, column, mapping):
    rows = clean_rows(silo)
    for r in rows:
        r[column] = mapping.get(r[column], r[column])
    return csv_text(rows)


ZURICH_NFC = "Z\u00fcrich"          # one code point for the u with diaeresis
ZURICH_NFD = "Zu\u0308rich"         # u + combining diaeresis: the same text by Unicode's definition

WORKFLOW_DATA_CASES = (
    Case("numeric-spellings", "refusal", "'1' beside '1.0' and '01' in an inferred schema (K = 4 against 2)",
         base(**{"b.csv": _spelled(1, ["1.0"]), "c.csv": _spelled(2, ["01"])}),
         match=r"column 'stage': '1', '01', '1\.0' are spellings of one number \(1\).*Write one spelling"),
    Case("number-spelling-with-schema", "error", "'1.0' in a file whose schema lists '1'",
         base(**{"b.csv": edited(1, 3, 2, "1.0"), "schema.json": SCHEMA}),
         match=r"'1\.0' spells the number of modality '1' differently: write '1' in the file"),
    Case("unicode-forms", "recorded", "one label in two Unicode normal forms (NFC, NFD): one modality, recorded",
         base(**{"a.csv": _regions(0, ZURICH_NFC), "b.csv": _regions(1, ZURICH_NFD)})),
    Case("missing-code-modality", "warning", "'.' and '-9' become modalities: a warning naming them",
         base(**{"a.csv": _regions(0, "."), "b.csv": _recoded(1, 3, {"F": "-9"})})),
    Case("disjoint-modalities", "refusal", "'Y'/'N' in one silo, 'yes'/'no' in the others (K = 6 against 2)",
         base(**{"a.csv": _recoded(0, 0, {"yes": "Y", "no": "N"})}),
         match=r"column 'smoker': the files share no value \(\S*a\.csv use 'N', 'Y'; .*b\.csv, .*c\.csv use 'no', "
               r"'yes'\).*Recode the files to one coding"),
    Case("same-data-two-names", "warning", "the same file given under two silo names", base(**{"c.csv": clean(0)})),
    Case("two-row-silo", "error", "a silo of two rows: refused before the other silos sample",
         base(**{"b.csv": csv_text(clean_rows(1)[:2])}), match=r"b\.csv \(2 rows\) have fewer than 3 rows"),
    Case("min-cluster-size-above-silos", "error", "--min-cluster-size larger than every silo, before sampling",
         base(**{"schema.json": SCHEMA}), args=("--min-cluster-size", "100"),
         match=r"--min-cluster-size 100 is larger than every silo \(the largest has 60 rows\)"),
    Case("silo-under-min-cluster-size", "refusal", "a silo smaller than --min-cluster-size: refused before sampling",
         base(**{"b.csv": csv_text(clean_rows(1)[:6])}), args=("--min-cluster-size", "7"),
         match=r"b\.csv \(6 rows\) have fewer rows than --min-cluster-size 7.*--min-silos 2"),
    Case("components-one", "refusal", "--components 1 (the 'clusters' would be the silos)",
         base(), args=("--components", "1"), match=r"--components must be at least 2 for --method vcmc; got 1"),
)
DATA_CASES = DATA_CASES + WORKFLOW_DATA_CASES

OTHER_CASES = (
    Case("out-is-a-file", "error", "--out names a file: error within a second, before any sampling"),
    Case("out-read-only", "error", "--out in a read-only folder: error within a second, before any sampling"),
    Case("out-empty", "error", '--out "" (would write into the working folder)'),
    Case("out-another-run", "refusal", "--out holds another run's results: refused unless --overwrite"),
    Case("out-overwrite", "handled", "--overwrite replaces another run's results and removes its stale files"),
    Case("out-same-run-resumes", "handled", "the same command again resumes in place (no sampling)"),
    Case("out-no-space", "error", "too little free space for the run's estimate: error before sampling"),
    Case("full-disk", "error", "a full disk while writing the results: one clear error, no partial file"),
    Case("file-size-limit", "error", "EFBIG under a file-size limit while writing: clear error, no partial file"),
    Case("full-disk-no-resume", "error", "a full disk with --no-resume: the error says nothing was kept"),
    Case("alpha-inf", "error", "--alpha inf"),
    Case("beta-nan", "error", "--beta nan"),
    Case("seed-negative", "error", "--seed -1"),
    Case("thin-too-large", "error", "--thin larger than the kept iterations"),
    Case("min-silos-too-many", "error", "--min-silos above the number of silos"),
    Case("min-silos-zero", "error", "--min-silos 0"),
    Case("jobs-zero", "error", "--jobs 0"),
    Case("burn-in-too-long", "error", "--burn-in at least --iterations"),
    Case("iterations-zero", "error", "--iterations 0"),
    Case("components-zero", "error", "--components 0"),
    Case("level-out-of-range", "error", "--level 1.5"),
    Case("summary-draws-one", "error", "--summary-draws 1 (one draw has no posterior variance)"),
    Case("set-bad-value", "error", "--set sampler.n-iter=many"),
    Case("min-cluster-size-negative", "error", "--min-cluster-size -1"),
    Case("na-values-empty", "error", '--na-values ""'),
    Case("fed-kmodes-without-k", "error", "--method fed-kmodes without --n-clusters"),
    Case("jobs-caps-workers", "handled", "--jobs 2 with 40 silos starts at most 2 worker processes"),
    Case("silo-column-rows", "handled", "--silo-column: 'row' in assignments.csv is the row of the pooled file"),
    Case("ctrl-c", "handled", "Ctrl-C: one line with what was kept and the command that resumes, exit 130"),
    Case("state-of-another-seed", "refusal", "a silo-state file written under another seed renamed into place"),
    Case("state-of-another-silo", "refusal", "a silo-state file of another silo renamed into place"),
    Case("state-not-writable", "warning", "the silo-state folder cannot be written: the run goes on and says so"),
    Case("state-damaged", "warning", "a silo-state file changed after it was written: digest fails, resampled"),
)

WORKFLOW_CASES = (
    Case("out-locked", "refusal", "a second run into --out while the first holds it: refused at once"),
    Case("stale-lock", "handled", "the lock file of a killed run (kill -9) does not block the next run"),
    Case("leftover-temp-files", "handled", "temporary files of a killed run (row-level memberships) removed next run"),
    Case("sigterm-sighup", "handled", "SIGTERM and SIGHUP end a run like Ctrl-C: the resume line, exit 130"),
    Case("predict-into-fit", "refusal", "vcmc predict FIT FILE --out FIT: refused, the fit's files unchanged"),
    Case("predict-another-run", "refusal", "predict into a folder holding another prediction: --overwrite rule"),
    Case("mixed-result-set", "refusal", "a fit folder with another run's assignments.csv: predict and report refuse"),
    Case("unfinished-run", "refusal", "a folder whose run did not finish writing (killed between renames): refused"),
    Case("truncated-posterior", "error", "a truncated posterior.nc given to predict: a clear error, no traceback"),
    Case("out-is-input-folder", "handled", "--out = the input folder: its schema.json is not another run's, kept"),
    Case("repeat-without-seed", "handled", "the same command again without --seed resumes with the drawn seed"),
    Case("ess-unreachable", "warning", "a run keeping fewer draws than the ESS target: said before sampling"),
    Case("iterations-auto-names-ess", "warning", "--iterations auto that stops on ESS says ESS (not R-hat)"),
    Case("console-warnings", "warning", "failed predictive checks, non-converged and one-cluster silos on the console"),
    Case("simulate-another-run", "refusal", "vcmc simulate into another simulation's folder: --overwrite rule, lock"),
    Case("method-files", "handled", "every --method and --matching writes the README's files: memberships.csv and "
         "probability where the method has them (fed-kmodes: hard labels only)"),
    Case("compare-another-run", "refusal", "vcmc compare into another comparison's or a fit's folder: the --overwrite "
         "rule, lock, sealed manifest; the same command resumes with its drawn seed"),
    Case("compare-out-checks", "error", "vcmc compare --out that is a file: a clear error; a killed run's temporary "
         "files removed"),
    Case("study-another-run", "refusal", "vcmc study into another study's (other seed or settings) or a fit's folder: "
         "kept unless --overwrite; the same study resumes; vcmc fit refuses a study's folder"),
    Case("report-convergence-legend", "handled", "the report's convergence legend lies inside the figure (it was "
         "clipped)"),
    Case("report-k-posterior", "handled", "the report's posterior of K: no P = 1.000 by construction; K fixed by the "
         "matching said, the silos' local posteriors shown"),
    Case("readme-activates", "handled", "after the README's first command, its command-line section activates the "
         "environment (no 'vcmc: command not found')"),
    Case("score-silo-list", "handled", "the estimator's score on a list of silos: cross_val_score, GridSearchCV"),
    Case("schema-command", "handled", "vcmc schema writes schema.json, listing rare modalities for the user to decide"),
    Case("schema-check", "error", "vcmc schema --check names a value outside the schema"),
    Case("help-real-defaults", "handled", "help shows real defaults (no '(default: None)'), --method has help"),
)
OTHER_CASES = OTHER_CASES + WORKFLOW_CASES

ALL_CASES = DATA_CASES + OTHER_CASES
