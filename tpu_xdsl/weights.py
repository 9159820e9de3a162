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
from typing import IO

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.dialects import op_class
from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import write_atomic
from tpu_xdsl.kernels.dtypes import element_type, numpy_dtype
from tpu_xdsl.limits import check_tensor_size
from tpu_xdsl.npz import READ_ERRORS, read_header


class WeightFileError(TpuXdslError):
    """The weight file is missing, unreadable, or lacks an entry the IR names."""


class WeightMismatchError(WeightFileError):
    """A weight's array does not have the shape or element type its `top.weight` op gives it."""


_KEEP_TOGETHER = "it is written beside the .mlir that names it (module.weight_file): keep the two together"


class WeightStore(MutableMapping[str, np.ndarray]):
    """Name -> array; entries are read from the source `.npz` on first use."""

    def __init__(
        self, source: Path | None = None, initial: Mapping[str, np.ndarray] | None = None, hint: str = ""
    ):
        self.source = source
        # What to do about a file that does not fit (the default: where module.weight_file points).
        self.hint = hint or _KEEP_TOGETHER
        self._loaded: dict[str, np.ndarray] = dict(initial or {})
        self._archive: zipfile.ZipFile | None = None
        self._members: dict[str, zipfile.ZipInfo] = {}
        self._deleted: set[str] = set()
        self.changed = False

    def _file(self) -> zipfile.ZipFile | None:
        """The source archive, opened on first use (no np.load: it would take a `.npy` or a
        pickle for an archive, and its errors name neither the file nor what to do)."""
        if self._archive is not None or self.source is None:
            return self._archive
        try:
            archive = zipfile.ZipFile(self.source)
        except zipfile.BadZipFile as e:
            raise WeightFileError(
                f"weight file {self.source} is not an .npz archive (truncated or another kind of file: {e}); "
                f"{self.hint}"
            ) from e
        except READ_ERRORS as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise WeightFileError(f"cannot read weight file {self.source} ({reason}); {self.hint}") from e
        self._members = {info.filename.removesuffix(".npy"): info
                         for info in archive.infolist() if info.filename.endswith(".npy")}
        self._archive = archive
        return archive

    def where(self) -> str:
        return f"weight file {self.source}" if self.source else "the weight table"

    def _member(self, name: str) -> zipfile.ZipInfo:
        self._file()
        if name in self._deleted or name not in self._members:
            raise WeightFileError(f"weight '{name}' is not in {self.where()}")
        return self._members[name]

    def _damaged(self, name: str, reason: object) -> WeightFileError:
        return WeightFileError(
            f"weight '{name}' in weight file {self.source} cannot be read ({reason}); "
            "write the module and its weights again (tpu-xdsl transform)"
        )

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """The shape and dtype of an entry, from the `.npy` header alone for one not yet read."""
        if name in self._loaded:
            value = self._loaded[name]
            return value.shape, value.dtype
        info = self._member(name)
        try:
            with self._archive.open(info) as member:  # type: ignore[union-attr]
                shape, _, dtype = read_header(member)
        except READ_ERRORS as e:
            raise self._damaged(name, e) from e
        if dtype.hasobject:
            raise WeightFileError(
                f"weight '{name}' in weight file {self.source} holds Python objects ({dtype}), not numbers; "
                "weights are numeric arrays (they are never unpickled)"
            )
        return shape, dtype

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._loaded:
            return self._loaded[name]
        shape, dtype = self.header(name)
        check_tensor_size(f"weight '{name}'", shape, dtype.itemsize)
        try:
            with self._archive.open(self._members[name]) as member:  # type: ignore[union-attr]
                value = np.lib.format.read_array(member, allow_pickle=False)
        except READ_ERRORS as e:
            raise self._damaged(name, e) from e
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

    def __contains__(self, name: object) -> bool:
        if name in self._loaded:
            return True
        self._file()
        return name in self._members and name not in self._deleted

    def _names(self) -> list[str]:
        names = dict.fromkeys(self._loaded)
        self._file()
        names.update(dict.fromkeys(n for n in self._members if n not in self._deleted))
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
    weight_file: str | Path | None = None,
    check: bool = True,
) -> WeightStore:
    """Attach a weight table to `module`: given arrays, the file `weight_file`, or the file
    `module.weight_file` names (relative to `base_dir`).

    Weights read from a file are checked against the IR here, before anything runs or
    compiles: every `top.weight` entry present with its op's shape and element type
    (`check=False` defers that to the first read of each entry).
    """
    if weights is not None:
        store = WeightStore(None, weights)
    elif weight_file is not None:
        store = WeightStore(Path(weight_file), hint="give the .npz written with this module")
    else:
        attr = module.attributes.get("module.weight_file")
        source = None
        if isinstance(attr, StringAttr):
            source = Path(base_dir or ".") / attr.data
        elif base_dir is not None and _weight_ops(module):
            raise WeightFileError(
                f"the module has top.weight ops but no module.weight_file attribute naming their .npz "
                f"(found {attr or 'none'}); give the .mlir as tpu-xdsl wrote it"
            )
        store = WeightStore(source)
    if store.source is not None and check:
        check_weights(module, store)
    _STORES[module] = store
    return store


def weights_of(module: ModuleOp) -> WeightStore:
    """The module's weight table (attached on first use from `module.weight_file`)."""
    store = _STORES.get(module)
    return store if store is not None else attach_weights(module)


def _weight_ops(module: ModuleOp) -> list[Operation]:
    return [op for op in module.walk() if op.name == "top.weight"]


def check_weights(module: ModuleOp, store: WeightStore) -> None:
    """Every `top.weight` of `module` has its entry in `store`, of its result's shape and
    element type (read from the `.npy` headers, not the arrays); entries that tensor
    encodings name are present."""
    for op in _weight_ops(module):
        name = _checked_weight_name(op)
        t = op.results[0].type if len(op.results) == 1 else None
        if not isinstance(t, TensorType):
            raise WeightMismatchError(f"'top.weight' {name!r} has result type {t}; a weight is a tensor")
        expected_shape = tuple(t.get_shape())
        try:
            expected = numpy_dtype(t.element_type)
        except TypeError as e:
            raise WeightMismatchError(f"'top.weight' {name!r}: {e}") from e
        if name not in store:
            raise WeightMismatchError(f"weight '{name}' is not in {store.where()}; {store.hint}")
        shape, dtype = store.header(name)
        if shape != expected_shape or not _same_element_type(dtype, expected):
            raise WeightMismatchError(
                f"weight '{name}' in {store.where()} is {_describe(shape, dtype)}, the IR's top.weight "
                f"says {_describe(expected_shape, expected)}; {store.hint}"
            )
    for op in module.walk():
        for result in op.results:
            _check_encoding_entries(op, result.type, store)


# Per-channel entries a tensor encoding names, by parameter: the rows before the channel
# dimension (`ranges`: [2, C] low and high of each channel; `scales`: [C]).
_CHANNEL_ENTRIES = {"ranges": (2,), "scales": ()}


def _check_encoding_entries(op: Operation, t: Attribute, store: WeightStore) -> None:
    """The entries `t`'s encoding names are in `store`; a per-channel one holds one float
    (or one row each) per channel of the encoding's axis."""
    for name in encoding_entries(t):
        if name not in store:
            raise WeightMismatchError(
                f"weight '{name}' (named by the type of a '{op.name}' result) is not in {store.where()}; "
                f"{store.hint}"
            )
    encoding = getattr(t, "encoding", None)
    axis_attr = getattr(encoding, "axis", None)
    if not isinstance(t, TensorType) or axis_attr is None:
        return
    shape = tuple(t.get_shape())
    axis = getattr(getattr(axis_attr, "value", None), "data", None)
    for field, rows in _CHANNEL_ENTRIES.items():
        entry = getattr(encoding, field, None)
        if not isinstance(entry, StringAttr):
            continue
        if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
            raise WeightMismatchError(
                f"'{op.name}' result type {t}: per-channel axis {axis} is outside its rank {len(shape)}"
            )
        expected = (*rows, shape[axis])
        found, dtype = store.header(entry.data)
        if found != expected or dtype.kind != "f":
            raise WeightMismatchError(
                f"weight '{entry.data}' ({field} of a '{op.name}' result's {'x'.join(map(str, shape))} type, axis "
                f"{axis}) in {store.where()} is {_describe(found, dtype)}, expected {_describe(expected, 'float32')}; "
                f"{store.hint}"
            )


def _checked_weight_name(op: Operation) -> str:
    names = op.attributes.get("names")
    first = names.data[0] if isinstance(names, ArrayAttr) and names.data else None
    if not isinstance(first, StringAttr):
        raise WeightMismatchError(f"a 'top.weight' has names = {names}; it names its entry: names = [\"w\"]")
    return first.data


def _same_element_type(found: np.dtype, expected: np.dtype) -> bool:
    """Equal dtypes; or an `.npz` member of raw 2-byte records for a bfloat16 weight (the
    same bits: the `.npy` format has no bfloat16)."""
    if found == expected:
        return True
    return expected.kind == "V" and found.kind == "V" and found.fields is None and found.itemsize == expected.itemsize


def _describe(shape: tuple[int, ...], dtype: np.dtype | str) -> str:
    dtype = np.dtype(dtype)
    dims = "x".join(str(d) for d in shape) if shape else "0-d"
    kind = dtype.name if dtype.isnative else dtype.str
    return f"{dims} {kind}"


def in_element_type(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A weight file's array in the IR's element type: raw 2-byte records (how an `.npz`
    keeps bfloat16) viewed as the same bits, anything else converted."""
    if value.dtype.kind == "V" and value.dtype.itemsize == dtype.itemsize:
        return value.view(dtype)
    return value.astype(dtype, copy=False)


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


def write_npz(file: IO[bytes], arrays: Mapping[str, np.ndarray]) -> None:
    """What np.savez writes (one uncompressed `.npy` member per array), for any array name:
    np.savez(f, **arrays) takes an array named `allow_pickle` as its flag and drops it."""
    with zipfile.ZipFile(file, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=True)


