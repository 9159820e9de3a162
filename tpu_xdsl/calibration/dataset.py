"""Calibration samples: files from `--dataset DIR` or `--data-list FILE`, loaded one at a time.

A sample is an image (decoded and preprocessed as the module records,
`module.preprocess`), an `.npz` holding the model inputs by name (any single
array for a single-input model), or an `.npy` for a single-input model, the
same files `tpu-xdsl run --input` takes. A folder contributes its files in
sorted name order (hidden files and other suffixes skipped); a list file its
paths in the order written, one per line, `#` starting a comment, relative
paths taken from the current folder or else from the list's folder. The first
`input_num` are used. Samples are read when iterated, never all at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from tpu_xdsl.dialects.module import input_names, main_func
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.feeds import IMAGE_SUFFIXES, is_image
from tpu_xdsl.frontend.preprocess import Preprocess, PreprocessError, load_inputs

ARRAY_SUFFIXES = (".npz", ".npy")
KINDS = "images (" + "/".join(sorted(s.lstrip(".") for s in IMAGE_SUFFIXES)) + ") or .npz/.npy files"


class DatasetError(TpuXdslError):
    """The calibration samples are missing, unreadable, or do not fit the model."""


def usable(path: Path) -> bool:
    return not path.name.startswith(".") and (is_image(path) or path.suffix.lower() in ARRAY_SUFFIXES)


@dataclass(frozen=True)
class Dataset:
    """The sample files of one calibration run (paths only: picklable for worker processes)."""

    paths: tuple[Path, ...]
    source: str  # the flag and value that named them, for messages

    def __len__(self) -> int:
        return len(self.paths)

    @staticmethod
    def from_dir(directory: str | Path, input_num: int) -> Dataset:
        folder = Path(directory)
        source = f"--dataset {directory}"
        if not folder.exists():
            raise DatasetError(f"{source}: no such folder; give a folder of {KINDS}")
        if not folder.is_dir():
            raise DatasetError(f"{source}: not a folder; give a folder of {KINDS}, or a list file with --data-list")
        try:
            entries = sorted(os.listdir(folder))
        except OSError as e:
            raise DatasetError(f"{source}: cannot read the folder ({e.strerror}); check its permissions") from e
        if not entries:
            raise DatasetError(f"{source}: the folder is empty; put {KINDS} in it")
        files = [folder / name for name in entries if (folder / name).is_file()]
        paths = [p for p in files if usable(p)]
        if not paths:
            raise DatasetError(
                f"{source}: none of its {len(entries)} entries is usable (hidden files, subfolders and "
                f"other suffixes are skipped); put {KINDS} in it"
            )
        return Dataset(tuple(paths[:input_num]), source)

    @staticmethod
    def from_list(list_file: str | Path, input_num: int) -> Dataset:
        listing = Path(list_file)
        source = f"--data-list {list_file}"
        try:
            lines = listing.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) else "not a text file"
            raise DatasetError(f"{source}: cannot read the list ({reason}); "
                               "give a text file with one sample path per line") from e
        paths = []
        for number, line in enumerate(lines, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            path = Path(text)
            if not path.is_absolute() and not path.exists():
                path = listing.parent / text
            where = f"{listing}:{number}"
            if not path.is_file():
                raise DatasetError(f"{where}: {text}: no such file; fix or remove the line")
            if not usable(path):
                raise DatasetError(f"{where}: {text}: not a sample; list {KINDS}")
            paths.append(path)
            if len(paths) == input_num:
                break
        if not paths:
            raise DatasetError(f"{source}: the list names no sample; write one path per line")
        return Dataset(tuple(paths), source)

    def check(self, module: ModuleOp) -> None:
        """Checks that need no decoding: images need one 4-D input whose channel count the
        recorded pixel format gives."""
        images = [p for p in self.paths if is_image(p)]
        if not images:
            return
        shapes = input_shapes(module)
        if len(shapes) != 1:
            raise DatasetError(f"{images[0]}: an image can feed a single-input "
                               f"model; this one has {len(shapes)} inputs")
        preprocess = Preprocess.from_module(module) or Preprocess()
        try:
            channels, _, _ = preprocess.model_hw(shapes[0])
        except PreprocessError as e:
            raise DatasetError(f"{images[0]}: {e}") from e
        if channels != preprocess.channels:
            raise DatasetError(
                f"{images[0]}: the model input {list(shapes[0])} has {channels} channel(s) but images "
                f"under the recorded pixel format {preprocess.pixel_format} have {preprocess.channels}; "
                "give .npz samples or transform the model with a matching --pixel-format"
            )

    def samples(self, module: ModuleOp) -> Iterator[dict[str, np.ndarray]]:
        loader = SampleLoader(module)
        for path in self.paths:
            yield loader.load(path)


def input_shapes(module: ModuleOp) -> list[tuple[int, ...]]:
    return [tuple(t.get_shape()) for t in main_func(module).function_type.inputs.data]  # type: ignore[attr-defined]


class SampleLoader:
    """Reads one sample file into the model's inputs (by name, checked against the model)."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.preprocess = Preprocess.from_module(module) or Preprocess()

    def load(self, path: Path) -> dict[str, np.ndarray]:
        # delays the xDSL interpreter: listing a dataset needs no runner
        from tpu_xdsl.interp.runner import InputMismatchError, arrange_inputs

        try:
            given = load_inputs(str(path), self.module, self.preprocess)
            arranged = arrange_inputs(self.module, given)
        except InputMismatchError as e:
            raise DatasetError(f"{path}: {e}; give samples with the model inputs' shapes and dtypes") from e
        except TpuXdslError as e:
            message = str(e)
            raise DatasetError(message if message.startswith(str(path)) else f"{path}: {message}") from e
        sample = dict(zip(input_names(self.module), arranged, strict=True))
        for name, value in sample.items():
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                bad = int(value.size - np.count_nonzero(np.isfinite(value)))
                raise DatasetError(
                    f"{path}: input '{name}' has {bad} NaN or infinite value(s) of {value.size}; "
                    "calibration needs the finite data the model will see: fix or remove the sample"
                )
        return sample
