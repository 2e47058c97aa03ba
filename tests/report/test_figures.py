"""The report's figures keep what they draw on the canvas (the convergence legend was clipped), and the
posterior of K is shown only where a result has one."""

import io
import json
import re

import pytest

from vcmc.report import figures as F
from vcmc.report.build import write_report


@pytest.mark.parametrize("n_silos", [1, 4, 30])
def test_the_convergence_legend_lies_inside_the_saved_canvas(n_silos):
    from matplotlib.image import imread

    silos = [f"silo_{i + 1}" for i in range(n_silos)]
    rhat = {"log posterior": [1.0 + 0.01 * i for i in range(n_silos)], "weights": [1.02] * n_silos}
    ess = {"log posterior": [300.0 + 10 * i for i in range(n_silos)], "weights": [None] * n_silos}
    fig = F.convergence_figure(silos, rhat, ess)
    data = F.png(fig)                      # draws the figure (the layout is computed on saving)
    legends = fig.legends + [lg for ax in fig.axes if (lg := ax.get_legend()) is not None]
    assert legends, "the convergence figure has a legend"
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert box.x0 >= canvas.x0 - 0.5 and box.y0 >= canvas.y0 - 0.5, (box, canvas)
        assert box.x1 <= canvas.x1 + 0.5 and box.y1 <= canvas.y1 + 0.5, (box, canvas)
        assert {t.get_text() for t in legend.get_texts()} == {"log posterior", "weights"}
    # and the PNG is the whole canvas: nothing cut at its edges
    height, width = imread(io.BytesIO(data)).shape[:2]
    assert width >= 0.9 * canvas.width and height >= 0.9 * canvas.height


def _k_section(page: str) -> str:
    start = page.index('id="k-posterior"')
    return re.sub(r"<[^>]+>", " ", page[start:page.index("</section>", start)])


def _with_k(folder, method, ncp):
    result = json.loads((folder / "result.json").read_text())
    result["method"] = method
    result["diagnostics"]["n_clusters_posterior"] = ncp
    (folder / "result.json").write_text(json.dumps(result))


def test_a_matched_method_says_its_global_k_is_fixed_not_p_1(exact_fit_dir):
    k = json.loads((exact_fit_dir / "result.json").read_text())["n_global_clusters"]
    _with_k(exact_fit_dir, "vcmc", {"global": {"values": [k], "probabilities": [1.0]},
                                    "local": {"silo_1": {"values": [3, 4, 5], "probabilities": [0.2, 0.5, 0.3]},
                                              "silo_2": {"values": [3, 4], "probabilities": [0.6, 0.4]}}})
    text = _k_section(write_report(exact_fit_dir).html.read_text())
    assert f"The number of global clusters, {k}, is fixed by the matching" in text
    assert "1.000" not in text                                  # no certainty that was never measured
    assert re.search(r"silo_1\s+4\s+0\.500\s+3–5", text), text  # the silos' real posteriors are shown


def test_a_real_global_posterior_of_k_is_shown(exact_fit_dir):
    _with_k(exact_fit_dir, "full-mcmc", {"global": {"values": [3, 4], "probabilities": [0.7, 0.3]}, "local": {},
                                         "definition": "occupied components of the pooled chain"})
    text = _k_section(write_report(exact_fit_dir).html.read_text())
    assert "pooled sampler's number of occupied components" in text
    assert re.search(r"K\s+3\s+4\s+probability\s+0\.700\s+0\.300", text), text
    # a pooled chain that stayed at one K has a real posterior mass there: shown, not explained away
    _with_k(exact_fit_dir, "full-mcmc", {"global": {"values": [3], "probabilities": [1.0]}, "local": {}})
    text = _k_section(write_report(exact_fit_dir).html.read_text())
    assert "fixed by the matching" not in text and re.search(r"probability\s+1\.000", text)


def test_a_method_without_a_posterior_of_k_says_so(exact_fit_dir):
    result = json.loads((exact_fit_dir / "result.json").read_text())
    result["method"] = "fed-kmodes"
    result["diagnostics"].pop("n_clusters_posterior", None)
    (exact_fit_dir / "result.json").write_text(json.dumps(result))
    text = _k_section(write_report(exact_fit_dir).html.read_text())
    assert "Not available in this result:" in text and "1.000" not in text
