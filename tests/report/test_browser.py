"""``report.html`` in a real browser: headless Chromium (driven by Playwright over the DevTools protocol)
renders it with no console error, no failed request and no broken image, and takes a screenshot.

The browser is Debian's ``chromium`` (``.ci/run`` installs it), or the one ``VCMC_CHROMIUM`` names. Without a
browser or Playwright the tests skip, except under CI (``CI`` set), where they fail.
"""

import json
import os
import shutil

import numpy as np
import pytest

#: Flags for a sandbox-less root session on a closed network: no GPU, no background connections.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic"]


def _chromium() -> str | None:
    given = os.environ.get("VCMC_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _unavailable(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI is set, so the browser test must run (.ci/run installs Debian's chromium)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install -e '.[test]')")
    exe = _chromium()
    if exe is None:
        _unavailable("no Chromium found on PATH (apt-get install chromium) and VCMC_CHROMIUM is not set")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


def render(browser, path, screenshot=None) -> dict:
    """Open ``path`` (file URL) and report what a reader would meet: console errors, page errors, failed
    requests, images that did not decode, the visible text; optionally a full-page screenshot."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.goto(path.resolve().as_uri(), wait_until="load")
    info = page.evaluate("""() => ({
        text: document.body ? document.body.innerText : "",
        images: Array.from(document.images).map(i => ({ok: i.complete && i.naturalWidth > 0,
                                                        w: i.naturalWidth, h: i.naturalHeight, alt: i.alt})),
        height: document.documentElement.scrollHeight,
        rows: Array.from(document.querySelectorAll("#characterisation tbody tr")).length})""")
    if screenshot is not None:
        page.screenshot(path=str(screenshot), full_page=True)
    page.close()
    info["problems"] = problems
    return info


def test_the_checks_catch_a_broken_page(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><p>x</p><img src="missing.png"><script>console.error("boom"); '
                   'throw new Error("thrown")</script></body></html>')
    info = render(browser, bad)
    assert any("boom" in p for p in info["problems"])
    assert any("thrown" in p for p in info["problems"])
    assert not all(i["ok"] for i in info["images"])


def _enrich(folder):
    """Add the richer result keys (K posterior, checks, WAIC, memberships) so every section renders."""
    import pandas as pd

    result = json.loads((folder / "result.json").read_text())
    diag = result["diagnostics"]
    diag["n_clusters_posterior"] = {"global": {"values": [2, 3, 4], "probabilities": [0.1, 0.8, 0.1]},
                                    "local": {s: {"values": [3], "probabilities": [1.0]} for s in result["silos"]}}
    row = {"variable": "asthma", "modality": "yes", "observed": 0.16, "replicated_mean": 0.16,
           "replicated_ci95": [0.15, 0.17], "ppp": 0.5, "silo": None}
    diag["ppc"] = {"n_replicates": 100, "prevalence": {"statistic": 1.0, "p_value": 0.5, "table": [row]},
                   "pairs": {"statistic": 1.0, "p_value": 0.5, "table": [
                       {"variable_a": "asthma", "modality_a": "yes", "variable_b": "copd", "modality_b": "yes",
                        "observed": 0.05, "replicated_mean": 0.05, "replicated_ci95": [0.04, 0.06], "ppp": 0.01,
                        "silo": None}]}}
    diag["waic"] = {"elpd_waic": -100.0, "se": 3.0, "p_waic": 20.0, "n_rows": 6000, "definition": "WAIC"}
    (folder / "result.json").write_text(json.dumps(result))
    assign = pd.read_csv(folder / "assignments.csv")
    assign["probability"] = np.linspace(0.5, 1.0, len(assign))
    assign.to_csv(folder / "assignments.csv", index=False)


def test_the_report_renders_in_chromium_without_error(browser, exact_fit_dir, tmp_path):
    from vcmc.report.build import write_report

    _enrich(exact_fit_dir)
    labels = exact_fit_dir / "names.json"
    labels.write_text(json.dumps({"1": "Baseline", "2": "Respiratory", "3": "Stroke and dementia"}))
    paths = write_report(exact_fit_dir, labels=labels)
    shot = tmp_path / "report.png"
    info = render(browser, paths.html, screenshot=shot)
    assert info["problems"] == []
    assert len(info["text"]) > 2000 and "Characterisation of the clusters" in info["text"]
    assert "Respiratory" in info["text"]
    assert len(info["images"]) == len(paths.figures) >= 8 and all(i["ok"] for i in info["images"])
    assert info["rows"] == 3
    # the screenshot is a real picture of a long page, not a blank one
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert img.shape[0] == info["height"] and img.shape[0] > 3000
    assert img.std() > 10


def test_the_paper_sized_report_stays_readable(browser, tmp_path):
    """27 clusters x 80 conditions (the paper's application), with the exact posterior given the true
    labels of the synthetic cohort: the heatmap keeps at least 20 px per condition and per cluster, and the
    characterisation table one row per cluster."""
    from vcmc.report import write_outputs
    from vcmc.report.build import write_report
    from vcmc.research.ehr import simulate_ehr

    from .conftest import exact_posterior_fit

    data = simulate_ehr(n=60_000, n_silos=30, rng=3)
    write_outputs(exact_posterior_fit(data.silos, data.labels, n_draws=400), tmp_path / "fit", schema=data.schema)
    paths = write_report(tmp_path / "fit")
    info = render(browser, paths.html)
    assert info["problems"] == []
    heat = next(i for i in info["images"] if i["alt"].startswith("heatmap"))
    assert heat["h"] >= 80 * 20 and heat["w"] >= 27 * 20
    assert info["rows"] == 27


def test_the_latent_class_report_renders_its_paper_figures(browser, tmp_path):
    """The fixed-K report (issue 46): the guide to K, the item-response plot with classes' shares and sizes, the
    odds-ratio forest plot; rendered by Chromium with no error, each figure screenshotted on its own."""
    from PIL import Image

    from vcmc.cli import main
    from vcmc.lca.simulate import simulate_lca

    sim = simulate_lca((200, 200, 200), missing=0.1, rng=7)
    files = []
    for i, df in enumerate(sim.frames):
        files.append(str(tmp_path / f"site{i + 1}.csv"))
        df.to_csv(files[-1], index=False)
    schema = tmp_path / "schema.json"
    assert main(["schema", *files, "--covariates", "age,sex", "--distal", "death,score", "--out", str(schema)]) == 0
    cmp, fit = tmp_path / "cmp", tmp_path / "fit"
    assert main(["compare", *files, "--schema", str(schema), "--k", "1-4", "--starts", "3", "--waic-draws", "0",
                 "--out", str(cmp), "--seed", "1", "--report"]) == 0
    assert main(["fit", *files, "--schema", str(schema), "--k", "3", "--starts", "3", "--out", str(fit), "--seed",
                 "1", "--report"]) == 0
    info = render(browser, cmp / "report.html", screenshot=tmp_path / "compare.png")
    assert info["problems"] == [] and all(i["ok"] for i in info["images"])
    assert "What to report" in info["text"] and "EM starts at best" in info["text"]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto((fit / "report.html").resolve().as_uri(), wait_until="load")
    text = page.evaluate("() => document.body.innerText")
    assert "Item-response probabilities" in text and "odds ratio" in text and "class 1" in text
    for section in ("items", "forest"):
        shot = tmp_path / f"{section}.png"
        page.locator(f"#{section} img").first.screenshot(path=str(shot))
        img = np.asarray(Image.open(shot).convert("L"), dtype=float)
        assert img.shape[0] > 200 and img.shape[1] > 400 and img.std() > 10, section
    page.close()
