"""`tpu-xdsl report STAGE_FILE... --input X -o report.html`: the page holds a node per layer
filled by its cosine, a row per tensor with the numbers `interp.compare` gives, a row per
layer group, the engines' timeline, and nothing from the network; a headless Chromium
renders it with its script running; every bad input is a one-line error, exit code 2, no
file written.

The model is the conv -> relu -> flatten -> matmul of tests/test_cli_device.py in all four
stages (m.onnx, m.mlir, m_int8.mlir, m_int8.tpumodel).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.test_cli_device import compiled  # noqa: F401  (the fixture)
from tests.test_cli_int8_errors import assert_fails_cleanly, run
from tpu_xdsl.device.runtime import LoadedModel, profile_rows
from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.inspect.report import COSINE_BINS, MISMATCH, NOT_COMPARED, cosine_color
from tpu_xdsl.inspect.stages import (
    align_feeds,
    default_tolerance,
    load_stages,
    read_feeds,
)
from tpu_xdsl.interp.compare import compare_all

# -- the page as a tree ---------------------------------------------------------------------


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    parent: Element | None
    children: list[Element]
    text: str = ""

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and all(child.attrs.get(k.rstrip("_")) == v for k, v in attrs.items()):
                found.append(child)
            found += child.find_all(tag, **attrs)
        return found

    def find(self, tag: str | None = None, **attrs: str) -> Element:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}>"
        return found[0]

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)

    def has_class(self, name: str) -> bool:
        return name in self.attrs.get("class", "").split()


VOID = {"meta", "br", "input", "img", "link", "hr"}


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("root", {}, None, [])
        self.at = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs}, self.at, [])
        self.at.children.append(element)
        if tag not in VOID:
            self.at = element

    def handle_startendtag(self, tag, attrs):
        self.at.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.at, []))

    def handle_endtag(self, tag):
        at = self.at
        while at is not None and at.tag != tag:
            at = at.parent
        assert at is not None, f"</{tag}> closes nothing"
        self.at = at.parent or self.root

    def handle_data(self, data):
        self.at.text += data


def parse(text: str) -> Element:
    builder = TreeBuilder()
    builder.feed(text)
    builder.close()
    assert builder.at is builder.root, f"<{builder.at.tag}> left open"
    return builder.root


# -- the report of the four stages ----------------------------------------------------------


@dataclass(frozen=True)
class Report:
    stages: list[Path]
    x: Path
    html: Path
    code: int
    out: str
    err: str


def stage_files(folder: Path) -> list[Path]:
    return [folder / "m.onnx", folder / "m.mlir", folder / "m_int8.mlir", folder / "m_int8.tpumodel"]


@pytest.fixture(scope="module")
def four_stages(compiled, tmp_path_factory) -> Report:  # noqa: F811
    from tpu_xdsl.tools.tpu_xdsl import main

    out_dir = tmp_path_factory.mktemp("report")
    html = out_dir / "report.html"
    stages = stage_files(compiled.folder)
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", *map(str, stages), "--input", str(compiled.x), "-o", str(html)])
    return Report(stages, compiled.x, html, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def expected(four_stages):
    """What the page must show, worked out here from the stages themselves."""
    stages = load_stages(four_stages.stages)
    feeds = read_feeds(str(four_stages.x), stages)
    results = {s.kind: s.run(align_feeds(feeds, s)) for s in stages}
    pairs = {}
    for ref, act in itertools.pairwise(stages):
        rows = compare_all(results[ref.kind], results[act.kind])
        pairs[f"{act.label} vs {ref.label}"] = ({r.name: r for r in rows}, default_tolerance(ref, act))
    top = next(s for s in stages if s.kind == "top")
    layers = [tensor_names(op)[0] for op in main_func(top.handle).walk()
              if tensor_names(op) and op.name not in ("top.weight", "top.none")]
    device = next(s for s in stages if s.kind == "device").handle
    return {"pairs": pairs, "layers": layers, "model": device}


def test_report_prints_a_summary_per_pair_and_exits_by_the_tolerances(four_stages, expected):
    assert four_stages.html.is_file(), four_stages.err
    lines = four_stages.out.splitlines()
    titles = ["TOP vs ONNX", "TPU INT8 vs TOP", "device bm1684x vs TPU INT8"]
    for title in titles:
        assert any(line.startswith(f"{title}: ") and " tensors compared; min cosine " in line for line in lines), title
    all_pass = all(
        all(r.passes(tol) for r in rows.values()) for rows, tol in expected["pairs"].values()
    )
    assert four_stages.code == (0 if all_pass else 1), four_stages.out
    wrote = lines[-1]
    assert wrote.startswith(f"wrote {four_stages.html} (") and f"{len(expected['layers'])} layers" in wrote, wrote


def test_graph_has_a_node_per_layer_filled_by_its_cosine(four_stages, expected):
    page = parse(four_stages.html.read_text(encoding="utf-8"))
    svg = page.find("svg", id="graph-svg")
    nodes = [g for g in svg.find_all("g") if g.has_class("node")]
    assert [n.attrs["data-name"] for n in nodes] == expected["layers"]
    shown = page.find("select", id="pair-select")
    title = next(o for o in shown.find_all("option") if "selected" in o.attrs).all_text()
    rows, tolerance = expected["pairs"][title]
    compared = 0
    for node in nodes:
        rect, name = node.find("rect"), node.attrs["data-name"]
        cos_text = next(t for t in node.find_all("text") if t.has_class("cos")).all_text()
        if name not in rows:
            assert rect.attrs["fill"] == NOT_COMPARED, name
            continue
        compared += 1
        row = rows[name]
        assert rect.attrs["fill"] == cosine_color(row.cosine), name
        assert cos_text == ("" if row.passes(tolerance) else "✗ ") + f"{row.cosine:.5f}", name
        assert node.find("title").all_text().startswith(name)
    assert compared >= 3
    # Edges follow the data: image -> conv ... -> logits, one per consumed tensor.
    edges = [p for p in svg.find_all("path") if p.has_class("edge")]
    assert len(edges) == len(expected["layers"]) - 1
    # The legend shows every bin of the scale.
    legend = page.find("div", class_="legend").all_text()
    assert all(label in legend for _, _, label in COSINE_BINS)


def test_color_scale():
    color = cosine_color
    assert color(1.0) == "#1a9850" and color(0.99999) == "#1a9850"
    assert color(0.995) == "#d9ef8b" and color(0.93) == "#fdae61" and color(0.5) == "#d73027"
    assert color(float("nan")) == MISMATCH


def test_table_has_a_row_per_tensor_with_the_compare_numbers(four_stages, expected):
    page = parse(four_stages.html.read_text(encoding="utf-8"))
    table = page.find("table", id="tensor-table")
    body = table.find("tbody")
    rows = body.find_all("tr")
    names = [r.attrs["data-name"] for r in rows]
    every = set(expected["layers"]).union(*(set(r) for r, _ in expected["pairs"].values()))
    assert sorted(names) == sorted(every)
    headers = [th.all_text() for th in table.find_all("th") if "data-col" in th.attrs]
    assert headers[:4] == ["#", "tensor", "op", "shape"]
    assert headers[4:] == ["cosine", "euclid", "SQNR dB", "max |d|", "ok"] * len(expected["pairs"])
    for tr in rows:
        cells = [td.all_text() for td in tr.find_all("td")]
        fails = False
        for k, (rows_by_name, tolerance) in enumerate(expected["pairs"].values()):
            row = rows_by_name.get(tr.attrs["data-name"])
            cosine, ok = cells[4 + 5 * k], cells[8 + 5 * k]
            if row is None:
                assert cosine == "—"
                continue
            assert cosine == f"{row.cosine:.6f}"
            assert ok == ("pass" if row.passes(tolerance) else "FAIL")
            fails |= ok == "FAIL"
        assert tr.has_class("failing") == fails
    # Worst first: the failing tensors, then the others.
    failing = [tr.has_class("failing") for tr in rows]
    assert failing == sorted(failing, reverse=True)


def test_profile_rows_and_timeline(four_stages, expected):
    page = parse(four_stages.html.read_text(encoding="utf-8"))
    model = expected["model"]
    timeline = LoadedModel(model).timeline
    rows = profile_rows(model, timeline)
    table_rows = page.find("table", id="profile-table").find("tbody").find_all("tr")
    assert len(table_rows) == len(rows)
    assert any(g.name in table_rows[i].all_text() for i, g in enumerate(model.groups)) and model.groups
    for tr, row in zip(table_rows, rows, strict=True):
        cells = [td.all_text() for td in tr.find_all("td")]
        assert row.name in cells[1]
        assert cells[5] == str(row.span) and cells[7] == str(row.busy("compute")) and cells[8] == str(row.busy("dma"))
        assert cells[11] == str(row.macs) and cells[13] == str(row.dma_bytes)
    svg = page.find("svg", id="timeline-svg")
    rects = svg.find_all("rect")
    for engine in ("dma", "compute"):
        bars = [r for r in rects if r.has_class(engine)]
        assert bars, engine
        # An engine runs one instruction at a time: its bars add up to its busy cycles.
        assert sum(int(r.attrs["data-f"]) - int(r.attrs["data-s"]) for r in bars) == timeline.engine_busy(engine)
        assert all(r.find("title").all_text() for r in bars)
    assert len([r for r in rects if r.has_class("span")]) == len(rows)
    header = page.find("header").all_text()
    assert f"{timeline.total_cycles} cycles" in header and "simulated / bound = " in header


def test_page_is_self_contained(four_stages):
    text = four_stages.html.read_text(encoding="utf-8")
    page = parse(text)
    for element in page.find_all():
        for attr in ("src", "href", "xlink:href", "action"):
            value = element.attrs.get(attr, "")
            assert not re.match(r"\s*(https?:)?//", value), f"<{element.tag} {attr}={value}>"
        assert element.tag not in ("link", "iframe", "img", "object", "embed")
        if element.tag == "script":
            assert "src" not in element.attrs
    assert not re.search(r"https?://", text), re.search(r".{40}https?://.{40}", text)
    assert "@import" not in text and "url(http" not in text
    data = json.loads(page.find("script", id="report-data").all_text())
    nodes = [g for g in page.find("svg", id="graph-svg").find_all("g") if g.has_class("node")]
    assert len(data["layers"]) == len(nodes)


def test_one_stage_compares_nothing_and_passes(compiled, tmp_path, capsys):  # noqa: F811
    html = tmp_path / "device.html"
    code, out, err = run(capsys, "report", compiled.model, "--input", compiled.x, "-o", html)
    assert code == 0, err
    assert out.splitlines()[-1].startswith(f"wrote {html} (")
    page = parse(html.read_text(encoding="utf-8"))
    names = [g.attrs["data-name"] for g in page.find("svg", id="graph-svg").find_all("g") if g.has_class("node")]
    assert names == expected_device_names(compiled.model)
    assert "one stage: nothing compared" in page.find("section", id="graph").all_text()


@pytest.mark.parametrize("kinds", [("onnx", "device"), ("tpu",), ("top", "device")])
def test_graph_comes_from_the_most_readable_stage(kinds, compiled, tmp_path, capsys):  # noqa: F811
    files = dict(zip(("onnx", "top", "tpu", "device"), stage_files(compiled.folder), strict=True))
    html = tmp_path / "r.html"
    code, _, err = run(capsys, "report", *(files[k] for k in kinds), "--input", compiled.x, "-o", html)
    assert code in (0, 1), err
    svg = parse(html.read_text(encoding="utf-8")).find("svg", id="graph-svg")
    nodes = [g for g in svg.find_all("g") if g.has_class("node")]
    names = [g.attrs["data-name"] for g in nodes]
    edges = {(int(p.attrs["data-from"]), int(p.attrs["data-to"])) for p in svg.find_all("path") if p.has_class("edge")}
    if kinds[0] == "onnx":
        assert names == ["image", "conv", "relu", "flat", "logits"]  # the ONNX nodes
        assert edges == {(0, 1), (1, 2), (2, 3), (3, 4)}
    else:
        module = load_stages([files[kinds[0]]])[0].handle
        expected = [tensor_names(op)[0] for op in main_func(module).walk()
                    if tensor_names(op) and op.name not in ("top.weight", "top.none", "tpu.group")]
        assert names == expected
        # A chain: each op consumes the one before it, through tpu.load/store and out of the group.
        assert edges == {(i, i + 1) for i in range(len(names) - 1)}
    grouped = [g.attrs["data-name"] for g in nodes if any(t.has_class("gtag") for t in g.find_all("text"))]
    assert "relu" in grouped and "flat" not in grouped  # the conv's layer group


def expected_device_names(path: Path) -> list[str]:
    from tpu_xdsl.device.model_file import load_model

    model = load_model(path)
    names = [d.name for d in model.inputs]
    return names + [d.name for d in sorted(model.tensors, key=lambda d: d.written_by) if d.name not in names]


def test_tolerance_flag_sets_every_pair(compiled, tmp_path, capsys):  # noqa: F811
    loose, strict = tmp_path / "loose.html", tmp_path / "strict.html"
    stages = stage_files(compiled.folder)
    code, out, err = run(capsys, "report", *stages, "--input", compiled.x, "-o", loose, "--tolerance", "0.5,-1")
    assert code == 0, out + err
    assert out.count("(tolerance 0.5, -1.0); all pass") == 3, out
    code, out, err = run(capsys, "report", *stages, "--input", compiled.x, "-o", strict, "--tolerance", "1,1")
    assert code == 1, out + err
    assert "below tolerance, first: " in out and strict.is_file()


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [
    "missing stage", "unknown stage file", "bad onnx", "two TOP stages", "missing input", "corrupt input",
    "input names", "input shape", "output folder", "output suffix", "tolerance", "unrelated models",
])
def test_bad_input_is_one_line_and_writes_nothing(case, compiled, tmp_path, capsys):  # noqa: F811
    folder = compiled.folder
    stages = [str(p) for p in stage_files(folder)]
    x, out = str(compiled.x), str(tmp_path / "report.html")
    args: list
    if case == "missing stage":
        args, fragments = ["report", str(folder / "nope.mlir"), "--input", x, "-o", out], ("nope.mlir: no such file",)
    elif case == "unknown stage file":
        (tmp_path / "m.txt").write_text("hello")
        args, fragments = ["report", str(tmp_path / "m.txt"), "--input", x, "-o", out], ("unknown stage file",)
    elif case == "bad onnx":
        (tmp_path / "bad.onnx").write_bytes(b"\xff\x00 not a model")
        args, fragments = ["report", str(tmp_path / "bad.onnx"), stages[1], "--input", x, "-o", out], \
            ("bad.onnx: cannot read as ONNX",)
    elif case == "two TOP stages":
        shutil.copy(folder / "m.mlir", tmp_path / "m.mlir")
        shutil.copy(folder / "m_weights.npz", tmp_path / "m_weights.npz")
        args, fragments = ["report", stages[1], str(tmp_path / "m.mlir"), "--input", x, "-o", out], \
            ("are both TOP stages",)
    elif case == "missing input":
        args, fragments = ["report", *stages, "--input", str(tmp_path / "none.npz"), "-o", out], \
            ("none.npz: no such input file",)
    elif case == "corrupt input":
        (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 truncated")
        args, fragments = ["report", *stages, "--input", str(tmp_path / "bad.npz"), "-o", out], \
            ("bad.npz: cannot read inputs",)
    elif case == "input names":
        np.savez(tmp_path / "two.npz", a=np.zeros((1, 3, 8, 8), np.float32), b=np.zeros((1, 3, 8, 8), np.float32))
        args, fragments = ["report", *stages, "--input", str(tmp_path / "two.npz"), "-o", out], \
            ("two.npz: has no input 'image'",)
    elif case == "input shape":
        np.savez(tmp_path / "small.npz", image=np.zeros((1, 3, 4, 4), np.float32))
        args, fragments = ["report", *stages, "--input", str(tmp_path / "small.npz"), "-o", out], \
            ("small.npz: input 'image' has shape [1, 3, 4, 4]", "expects [")
    elif case == "output folder":
        args, fragments = ["report", *stages, "--input", x, "-o", str(tmp_path / "no" / "r.html")], \
            ("does not exist",)
    elif case == "output suffix":
        args, fragments = ["report", *stages, "--input", x, "-o", str(tmp_path / "r.txt")], ("name it r.html",)
    elif case == "tolerance":
        args, fragments = ["report", *stages, "--input", x, "-o", out, "--tolerance", "0.9"], ("--tolerance '0.9'",)
    else:
        other = tmp_path / "other.onnx"
        graph = helper.make_graph([helper.make_node("Relu", ["pixels"], ["y"])], "other",
                                  [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [1, 3, 8, 8])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), other)
        args, fragments = ["report", str(other), stages[1], "--input", x, "-o", out], \
            ("other.onnx and ", "m.mlir have no tensor name in common")
    assert_fails_cleanly(capsys, (tmp_path, folder), args, *fragments)
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob(".*html*"))


# -- in a browser ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    if os.environ.get("TPU_XDSL_NO_CHROMIUM") == "1":
        pytest.skip("TPU_XDSL_NO_CHROMIUM=1: the headless-browser check of the report is turned off")
    assert Path(CHROMIUM).is_file(), (
        f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; .ci/run does) "
        "or set TPU_XDSL_NO_CHROMIUM=1 to skip this test"
    )
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1000", *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=90)


# Run after the page's own script: errors it threw, and what clicking does.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', ev => window.__errors.push(String(ev.message)));
</script>"""
PROBE_AFTER = """<script>
(function(){
  const result = {errors: window.__errors, ready: document.body.dataset.ready || ''};
  const table = document.getElementById('tensor-table');
  const names = () => Array.from(table.tBodies[0].rows).map(r => r.dataset.name);
  result.rows = names().length;
  const hash = table.querySelector('th[data-col="0"]');
  hash.click();
  result.sortedByNumber = Array.from(table.tBodies[0].rows).map(r => +r.cells[0].dataset.v);
  hash.click();
  result.reversed = Array.from(table.tBodies[0].rows).map(r => +r.cells[0].dataset.v);
  const node = document.querySelector('#graph-svg .node');
  node.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  result.selected = document.querySelectorAll('#graph-svg .node.sel').length;
  result.highlighted = Array.from(document.querySelectorAll('#tensor-table tr.hl')).map(r => r.dataset.name);
  result.clicked = node.dataset.name;
  result.details = document.getElementById('details').textContent;
  const svg = document.getElementById('timeline-svg');
  const before = +svg.getAttribute('width');
  document.querySelector('button[data-zoom="2"]').click();
  result.zoom = +svg.getAttribute('width') / before;
  const select = document.getElementById('pair-select');
  select.value = '0'; select.dispatchEvent(new Event('change'));
  result.fillsFirstPair = Array.from(document.querySelectorAll('#graph-svg .node rect')).map(r => r.getAttribute('fill'));
  result.errorsAfter = window.__errors;
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
})();
</script>"""


def test_chromium_renders_the_page_and_its_script_runs(four_stages, tmp_path):
    from PIL import Image

    png = tmp_path / "report.png"
    result = chromium(tmp_path, f"--screenshot={png}", four_stages.html.as_uri())
    assert result.returncode == 0 and png.is_file(), result.stderr[-2000:]
    image = Image.open(png).convert("RGB")
    assert image.size == (1400, 1000)
    colors = {tuple(int(v) for v in c) for c in np.unique(np.asarray(image).reshape(-1, 3), axis=0)}
    assert len(colors) > 50, f"{len(colors)} colors: a blank page?"
    page = parse(four_stages.html.read_text(encoding="utf-8"))
    fills = {r.attrs["fill"] for g in page.find("svg", id="graph-svg").find_all("g") if g.has_class("node")
             for r in g.find_all("rect")}
    fills.discard(NOT_COMPARED)
    assert fills
    for fill in fills:  # the nodes' similarity colors are on the screen
        rgb = tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
        assert rgb in colors, f"fill {fill} not in the screenshot"

    probed = tmp_path / "probed.html"
    text = four_stages.html.read_text(encoding="utf-8")
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1).replace("</body>", PROBE_AFTER + "</body>"),
                      encoding="utf-8")
    result = chromium(tmp_path, "--dump-dom", probed.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    dom = parse(result.stdout)
    probe = json.loads(dom.find("pre", id="probe").all_text())
    assert probe["errors"] == [] and probe["errorsAfter"] == [], probe
    assert probe["ready"] == "yes"
    rows = len(page.find("table", id="tensor-table").find("tbody").find_all("tr"))
    assert probe["rows"] == rows
    assert probe["sortedByNumber"] == list(range(rows))
    assert probe["reversed"] == list(reversed(range(rows)))
    assert probe["selected"] == 1
    assert probe["highlighted"] == [probe["clicked"]]
    assert probe["clicked"] in probe["details"] and "cosine" in probe["details"]
    assert probe["zoom"] > 1.5
    data = json.loads(page.find("script", id="report-data").all_text())
    assert probe["fillsFirstPair"] == [layer["pairs"][0]["fill"] for layer in data["layers"]]


# -- the graph layout -----------------------------------------------------------------------


def check_layout(nodes: list, edges: list, layout) -> None:
    for u, v in edges:  # every edge points down, one layer per step of the longest path
        assert layout.depth[v] > layout.depth[u]
    rows: dict[float, list[float]] = {}
    for n in nodes:
        rows.setdefault(layout.y[n], []).append(layout.x[n])
    for xs in rows.values():  # nodes of a layer do not overlap
        xs.sort()
        assert all(b - a >= 170 for a, b in itertools.pairwise(xs))
    for (u, v), points in zip(edges, layout.edges, strict=True):
        assert points[0] == (layout.x[u], layout.y[u] + 38) and points[-1] == (layout.x[v], layout.y[v])
        assert all(y0 <= y1 for (_, y0), (_, y1) in itertools.pairwise(points))


def test_layered_layout_routes_long_edges_between_layers():
    from tpu_xdsl.inspect.layered_layout import layered_layout

    nodes = ["in", "a", "b", "c", "add", "out"]
    edges = [("in", "a"), ("a", "b"), ("b", "c"), ("c", "add"), ("in", "add"), ("add", "out")]
    layout = layered_layout(nodes, edges)
    assert [layout.depth[n] for n in nodes] == [0, 1, 2, 3, 4, 5]
    check_layout(nodes, edges, layout)
    assert len(layout.edges[4]) == 2 + 2 * 3  # in -> add crosses three layers: a dummy point pair each
    assert abs(layout.x["a"] - layout.edges[4][1][0]) >= 170 / 2  # ... beside the chain, not through it


def test_layered_layout_of_a_large_model_is_fast():
    import random
    import time

    from tpu_xdsl.inspect.layered_layout import layered_layout

    rng = random.Random(0)
    nodes = list(range(500))
    edges = [(i - 1, i) for i in range(1, 500)]  # a backbone with skips and branches, like ppocr_det
    edges += [(i - rng.randint(2, 40), i) for i in range(60, 500, 7)]
    edges += [(i - rng.randint(2, 5), i) for i in range(10, 500, 3)]
    started = time.perf_counter()
    layout = layered_layout(nodes, edges)
    seconds = time.perf_counter() - started
    check_layout(nodes, edges, layout)
    assert seconds < 3, f"{seconds:.2f} s for 500 nodes"
