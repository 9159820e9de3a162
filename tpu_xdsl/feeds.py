"""Inputs a user gives, read from their files and matched to a model's inputs (shared by
the interpreter and the device runtime; no xDSL here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from tpu_xdsl.errors import TpuXdslError, UsageError

UNNAMED = "arr_0"  # the key np.savez gives an array passed without a name
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}


def is_image(path: str | Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def in_input_order(
    names: Sequence[str], inputs: Mapping[str, np.ndarray], error: type[TpuXdslError]
) -> list[np.ndarray]:
    """The given arrays in the order of the model's input `names`, matched by name (as
    onnxruntime matches them). An array saved without a name (numpy's `arr_0`, as
    `np.savez(f, x)` writes it) feeds a single-input model, as an .npy does. A missing
    name raises `error`."""
    if len(names) == 1 and list(inputs) == [UNNAMED] and names[0] != UNNAMED:
        return [inputs[UNNAMED]]
    missing = [n for n in names if n not in inputs]
    if missing:
        raise error(
            f"missing input(s) {', '.join(missing)}; the model's inputs are {', '.join(names)} "
            f"(given: {', '.join(inputs) or 'none'})"
        )
    return [inputs[n] for n in names]


# Element types TPU ops hold in another: masks (bool) as int8 0 and 1, indices and token ids
# (int64) as int32, as TPU-MLIR holds them (every index into a tensor the device holds
# fits). Lowering converts tensors and constants so; a run converts the data it is fed.
HELD_AS = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.bool_): np.dtype(np.int8)}


def accepts_dtype(given: np.dtype, expected: np.dtype) -> bool:
    """Whether data of dtype `given` may feed an input of dtype `expected`: the same dtype,
    float32 data for any float input (an F16 or BF16 model casts it as its ONNX original
    took float32), or the int64 or bool data of an input the TPU holds as int32 or int8.
    float64 data for a float32 input is refused, as onnxruntime refuses it."""
    return given == expected or (given == np.float32 and expected.kind in "fV") or HELD_AS.get(given) == expected


def held_feed(name: str, value: np.ndarray, expected: np.dtype, error: type[Exception]) -> np.ndarray:
    """`value` (accepted by `accepts_dtype`) as `expected`; int64 values beyond int32 are an
    `error` naming the input rather than wrapped."""
    if value.dtype == np.int64 and expected == np.int32 and value.size:
        info = np.iinfo(np.int32)
        if value.min() < info.min or value.max() > info.max:
            raise error(f"input '{name}' holds values beyond int32, which the TPU holds int64 inputs in; "
                        "give ids and indices that fit")
    return value.astype(expected, copy=False)


def read_input_file(path: str, names: list[str], image: Callable[[Path], np.ndarray | None]) -> dict:
    """Arrays by input name from an .npz, an .npy (the first input), or an image file that
    `image(file)` turns into the single input."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such input file")
    if is_image(file):
        if len(names) != 1:
            raise UsageError(f"{path}: an image can feed a single-input model; this one has {len(names)} inputs")
        return {names[0]: image(file)}
    from tpu_xdsl.npz import read_npy, read_npz

    hint, where = "give an .npz, .npy or image file (an .npz holds arrays by input name)", f"{path}: cannot read inputs"
    if file.suffix == ".npy":
        return {names[0]: read_npy(file, hint, where)}
    return read_npz(file, hint, where)
