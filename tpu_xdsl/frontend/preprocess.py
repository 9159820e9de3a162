"""Image preprocessing recorded in the TOP module and applied to image inputs.

The flags are TPU-MLIR's model_transform ones: the image is decoded (Pillow),
converted to `pixel_format`, resized to `resize_dims` (keeping the aspect
ratio and padding with zeros when asked), center-cropped to the model's input
size, normalized as y = (x - mean) * scale per channel, and laid out as
`channel_format` with a batch dimension.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp

from tpu_xdsl.dialects.attr_values import from_py, to_py
from tpu_xdsl.dialects.module import input_names, main_func
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.feeds import read_input_file
from tpu_xdsl.limits import MAX_IMAGE_SIDE

PIXEL_FORMATS = ("rgb", "bgr", "gray")
CHANNEL_FORMATS = ("nchw", "nhwc")


class PreprocessError(TpuXdslError):
    """Bad preprocessing flags, or an image that cannot be used as model input."""


@dataclass
class Preprocess:
    mean: list[float] = field(default_factory=lambda: [0.0])
    scale: list[float] = field(default_factory=lambda: [1.0])
    pixel_format: str = "bgr"
    channel_format: str = "nchw"
    resize_dims: list[int] | None = None
    keep_aspect_ratio: bool = False

    def __post_init__(self) -> None:
        if self.pixel_format not in PIXEL_FORMATS:
            raise PreprocessError(f"--pixel-format {self.pixel_format!r}: choose one of {', '.join(PIXEL_FORMATS)}")
        if self.channel_format not in CHANNEL_FORMATS:
            raise PreprocessError(
                f"--channel-format {self.channel_format!r}: choose one of {', '.join(CHANNEL_FORMATS)}"
            )
        channels = 1 if self.pixel_format == "gray" else 3
        for flag, values in (("--mean", self.mean), ("--scale", self.scale)):
            if len(values) not in (1, channels):
                raise PreprocessError(
                    f"{flag} has {len(values)} values; give 1 or {channels} (one per channel of {self.pixel_format})"
                )
        if self.resize_dims is not None and (len(self.resize_dims) != 2 or min(self.resize_dims) <= 0):
            raise PreprocessError(f"--resize-dims {self.resize_dims}: give two positive sizes, height,width")
        if self.resize_dims is not None and max(self.resize_dims) > MAX_IMAGE_SIDE:
            raise PreprocessError(f"--resize-dims {self.resize_dims}: give sides of at most {MAX_IMAGE_SIDE} pixels")

    @property
    def channels(self) -> int:
        return 1 if self.pixel_format == "gray" else 3

    def record(self, module: ModuleOp) -> None:
        """Store the preprocessing in the module as `module.preprocess`."""
        module.attributes["module.preprocess"] = from_py(
            {k: v for k, v in asdict(self).items() if v is not None}
        )

    @staticmethod
    def from_module(module: ModuleOp) -> Preprocess | None:
        attr = module.attributes.get("module.preprocess")
        if not isinstance(attr, DictionaryAttr):
            return None
        return Preprocess.from_dict(to_py(attr))

    @staticmethod
    def from_dict(values: dict) -> Preprocess:
        """From the recorded form (`module.preprocess`, or a .tpumodel's header)."""
        return Preprocess(
            mean=[float(v) for v in values.get("mean", [0.0])],
            scale=[float(v) for v in values.get("scale", [1.0])],
            pixel_format=values.get("pixel_format", "bgr"),
            channel_format=values.get("channel_format", "nchw"),
            resize_dims=values.get("resize_dims"),
            keep_aspect_ratio=bool(values.get("keep_aspect_ratio", False)),
        )

    def model_hw(self, input_shape: Sequence[int]) -> tuple[int, int, int]:
        """(channels, height, width) the model's 4-D image input expects."""
        if len(input_shape) != 4:
            raise PreprocessError(
                f"an image input needs a 4-D model input, this one is {list(input_shape)}"
            )
        if self.channel_format == "nchw":
            c, h, w = input_shape[1], input_shape[2], input_shape[3]
        else:
            h, w, c = input_shape[1], input_shape[2], input_shape[3]
        return c, h, w

    def load_image(self, path: str | Path, input_shape: Sequence[int]) -> np.ndarray:
        """Decode and preprocess one image into the model's input layout (float32)."""
        from PIL import Image, UnidentifiedImageError

        c, h, w = self.model_hw(input_shape)
        if c != self.channels:
            raise PreprocessError(
                f"{path}: the model input has {c} channel(s) but --pixel-format "
                f"{self.pixel_format} gives {self.channels}"
            )
        try:
            with warnings.catch_warnings():
                # Pillow warns of an image past its pixel limit and refuses one past twice it: both refused here.
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(path) as image:
                    image = image.convert("L" if self.pixel_format == "gray" else "RGB")
                    pixels = self._resize(image, h, w)
        except (Image.DecompressionBombWarning, Image.DecompressionBombError) as e:
            raise PreprocessError(f"{path}: the image is too large to decode safely ({e}); give a smaller image") from e
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
            raise PreprocessError(f"{path}: cannot decode image ({e}); use a JPEG/PNG/BMP file") from e
        return self.normalize(pixels, input_shape[0])

    def _resize(self, image, h: int, w: int) -> np.ndarray:
        from PIL import Image

        rh, rw = self.resize_dims or (h, w)
        if self.keep_aspect_ratio:
            ratio = min(rh / image.height, rw / image.width)
            nh, nw = max(1, round(image.height * ratio)), max(1, round(image.width * ratio))
            resized = np.asarray(image.resize((nw, nh), Image.Resampling.BILINEAR), dtype=np.float32)
            canvas = np.zeros((rh, rw, *resized.shape[2:]), dtype=np.float32)
            top, left = (rh - nh) // 2, (rw - nw) // 2
            canvas[top : top + nh, left : left + nw] = resized
        else:
            canvas = np.asarray(image.resize((rw, rh), Image.Resampling.BILINEAR), dtype=np.float32)
        if canvas.shape[0] < h or canvas.shape[1] < w:
            raise PreprocessError(
                f"--resize-dims {rh},{rw} is smaller than the model input {h},{w}"
            )
        top, left = (canvas.shape[0] - h) // 2, (canvas.shape[1] - w) // 2
        return canvas[top : top + h, left : left + w]

    def normalize(self, pixels: np.ndarray, batch: int) -> np.ndarray:
        """HWC (or HW) pixels in RGB/gray order -> normalized batch in the model layout."""
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if self.pixel_format == "bgr":
            pixels = pixels[:, :, ::-1]
        mean = np.asarray(self.mean, dtype=np.float32)
        scale = np.asarray(self.scale, dtype=np.float32)
        pixels = (pixels - mean) * scale
        if self.channel_format == "nchw":
            pixels = pixels.transpose(2, 0, 1)
        return np.ascontiguousarray(np.broadcast_to(pixels, (batch, *pixels.shape)), dtype=np.float32)


def parse_floats(text: str | None, flag: str) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError as e:
        raise PreprocessError(f"{flag} {text!r}: give comma-separated numbers, e.g. 123.675,116.28,103.53") from e


def parse_ints(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(v) for v in text.split(",")]
    except ValueError as e:
        raise PreprocessError(f"{flag} {text!r}: give comma-separated integers, e.g. 256,256") from e


def load_inputs(path: str, module, preprocess=None) -> dict:
    """Model inputs from an .npz (by input name), an .npy (single input), or an image
    (through `preprocess`, or the one the module records)."""
    def image(file: Path):
        pre = preprocess or Preprocess.from_module(module) or Preprocess()
        shape = main_func(module).function_type.inputs.data[0].get_shape()  # type: ignore[attr-defined]
        return pre.load_image(file, shape)

    return read_input_file(path, input_names(module), image)


def load_device_inputs(path: str, model) -> dict:
    """Inputs of a compiled model (a TpuModel) from an .npz, an .npy or an image (through
    the preprocessing the model recorded)."""

    def image(file: Path):
        pre = Preprocess.from_dict(model.preprocess) if model.preprocess else Preprocess()
        return pre.load_image(file, model.inputs[0].shape)

    return read_input_file(path, [d.name for d in model.inputs], image)
