"""The weights of a module: `top.weight` ops name entries of a weight table kept beside the IR.

The table lives in memory while passes run, attached to its module; it is
loaded lazily from the `.npz` that `module.weight_file` names (relative to the
`.mlir` file) and written next to the output when the module is saved.
Weights never sit inline in the IR.
"""

from __future__ import annotations

import weakref
import zipfile
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import BinaryIO

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.dialects import op_class
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import write_atomic
from tpu_xdsl.kernels.dtypes import element_type


class WeightFileError(TpuXdslError):
    """The weight file is missing, unreadable, or lacks an entry the IR names."""


class WeightStore(MutableMapping[str, np.ndarray]):
    """Name -> array; entries are read from the source `.npz` on first use."""

    def __init__(self, source: Path | None = None, initial: Mapping[str, np.ndarray] | None = None):
        self.source = source
        self._loaded: dict[str, np.ndarray] = dict(initial or {})
        self._npz = None
        self._deleted: set[str] = set()
        self.changed = False

    def _file(self):
        if self._npz is None and self.source is not None:
            try:
                self._npz = np.load(self.source, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise WeightFileError(
                    f"cannot read weight file {self.source} ({e}); it is written beside the .mlir that "
                    "names it (module.weight_file): keep the two together"
                ) from e
        return self._npz

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._loaded:
            return self._loaded[name]
        npz = self._file()
        if name in self._deleted or npz is None or name not in npz.files:
            where = f"weight file {self.source}" if self.source else "the weight table"
            raise WeightFileError(f"weight '{name}' is not in {where}")
        value = npz[name]
        self._loaded[name] = value
        return value

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        value = np.asarray(value)
        self._loaded[name] = np.ascontiguousarray(value).reshape(value.shape)
        self._deleted.discard(name)
        self.changed = True

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._deleted.add(name)
        self.changed = True

    def _names(self) -> list[str]:
        names = dict.fromkeys(self._loaded)
        npz = self._file()
        if npz is not None:
            names.update(dict.fromkeys(n for n in npz.files if n not in self._deleted))
        return list(names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def unique_name(self, base: str) -> str:
        names = set(self._names())
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        return name


_STORES: weakref.WeakKeyDictionary[ModuleOp, WeightStore] = weakref.WeakKeyDictionary()


def attach_weights(
    module: ModuleOp,
    weights: Mapping[str, np.ndarray] | None = None,
    base_dir: str | Path | None = None,
) -> WeightStore:
    """Attach a weight table to `module`: given arrays, or the file `module.weight_file` names."""
    if weights is not None:
        store = WeightStore(None, weights)
    else:
        attr = module.attributes.get("module.weight_file")
        source = None
        if isinstance(attr, StringAttr):
            source = Path(base_dir or ".") / attr.data
        store = WeightStore(source)
    _STORES[module] = store
    return store


def weights_of(module: ModuleOp) -> WeightStore:
    """The module's weight table (attached on first use from `module.weight_file`)."""
    store = _STORES.get(module)
    return store if store is not None else attach_weights(module)


def weight_name(op: Operation) -> str:
    names = op.attributes["names"]
    assert isinstance(names, ArrayAttr)
    first = names.data[0]
    assert isinstance(first, StringAttr)
    return first.data


def is_weight(value: SSAValue) -> bool:
    """Whether a `top.weight` defines `value`."""
    owner = value.owner
    return isinstance(owner, Operation) and owner.name == "top.weight"


def weight_value(module: ModuleOp, value: SSAValue) -> np.ndarray | None:
    """The constant array behind `value` when a `top.weight` produces it, else None."""
    if not is_weight(value):
        return None
    return weights_of(module)[weight_name(value.owner)]  # type: ignore[arg-type]


def create_weight(
    module: ModuleOp, base_name: str, array: np.ndarray, insert_before: Operation
) -> SSAValue:
    """Add `array` to the table under a fresh name and insert the `top.weight` reading it."""
    store = weights_of(module)
    name = store.unique_name(base_name)
    store[name] = array
    op = op_class("top.weight").build(
        result_types=[TensorType(element_type(array.dtype), array.shape)],
        attributes={"names": ArrayAttr([StringAttr(name)])},
    )
    Rewriter.insert_op(op, InsertPoint.before(insert_before))
    return op.results[0]


def used_weight_names(module: ModuleOp) -> list[str]:
    """Entries read by `top.weight` ops, and entries named by tensor encodings (per-channel
    calibration ranges and quantization scales)."""
    names = [weight_name(op) for op in module.walk() if op.name == "top.weight"]
    for op in module.walk():
        for result in op.results:
            names += encoding_entries(result.type)
    return names


def encoding_entries(t: Attribute) -> list[str]:
    """Weight entries a tensor type's encoding names (its string parameters)."""
    encoding = getattr(t, "encoding", None)
    if not isinstance(encoding, ParametrizedAttribute):
        return []
    return [p.data for p in encoding.parameters if isinstance(p, StringAttr)]


def save_weights(module: ModuleOp, path: str | Path) -> None:
    """Write the weights the module uses to `path` (atomically) and point the module at it."""
    path = Path(path)
    store = weights_of(module)
    arrays = {name: store[name] for name in dict.fromkeys(used_weight_names(module))}
    write_npz_atomic(path, arrays)
    module.attributes["module.weight_file"] = StringAttr(path.name)


def write_npz_atomic(path: str | Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write an `.npz` via a temporary file in the same folder, then rename: no partial files."""
    write_atomic(path, lambda f: write_npz(f, arrays), binary=True)


def write_npz(file: BinaryIO, arrays: Mapping[str, np.ndarray]) -> None:
    """What np.savez writes (one uncompressed `.npy` member per array), for any array name:
    np.savez(f, **arrays) takes an array named `allow_pickle` as its flag and drops it."""
    with zipfile.ZipFile(file, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=True)


