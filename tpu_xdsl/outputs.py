"""A command's outputs never destroy its inputs, and are written all or nothing.

Every command that writes files is decorated with `@writes_outputs`: it runs inside a
`files.OutputSet`, so its files go in place together when it returns (whatever its exit
code) and none when it fails or is interrupted (Ctrl-C, SIGTERM). Before its first write
and its long work, it calls `check_paths` with every file it reads (a `.mlir`'s weight
file, the dataset's samples too) and every file it writes (a `.mlir`'s `N_weights.npz`
too); `check_output_path` checks one output's place alone, before the inputs are read.
`check_paths` resolves symbolic links and refuses, in one line naming both flags:

- an output that is the same file as an input (it would be replaced);
- two outputs that are the same file (one would replace the other);
- an output that is a folder (`--output .`), or an existing file that is not a regular
  file (a device, a pipe: renaming over it would replace it);
- an output whose folder is missing, is a file, or is not writable.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tpu_xdsl.errors import TpuXdslError
from tpu_xdsl.files import OutputSet


class OutputPathError(TpuXdslError):
    """An output path would destroy an input or another output, or cannot be written."""


@dataclass(frozen=True)
class Role:
    """A file a command reads or writes: the flag that names it (or the one it derives
    from), and for a derived file what it is to that flag's file."""

    flag: str
    path: Path
    given: str | None = None  # the flag's value when `path` derives from it
    what: str | None = None  # e.g. "the weight file"
    raw: str | None = None  # the flag's text: "out/" names a folder though Path("out/") drops the slash

    def describe(self) -> str:
        if self.given is None:
            return f"{self.flag} {self.raw or self.path}"
        return f"{self.path} ({self.what} of {self.flag} {self.given})"


def named(flag: str, *paths: str | os.PathLike | None) -> list[Role]:
    """The files a flag names (none when it is not given)."""
    return [Role(flag, Path(p), raw=str(p)) for p in paths if p is not None]


def weight_file_of(mlir: str | os.PathLike) -> Path:
    """The weight file a command writes beside the `.mlir` `mlir` (`ir_io.save_module`)."""
    path = Path(mlir)
    return path.with_name(f"{path.stem}_weights.npz")


def module_outputs(flag: str, mlir: str | os.PathLike, of: str | None = None) -> list[Role]:
    """A `.mlir` a command writes and the weight file written beside it; both derived from
    the flag's value `of` when given (deploy -o N.tpumodel writes N.mlir too)."""
    if of is None:
        return [*named(flag, mlir), Role(flag, weight_file_of(mlir), str(mlir), "the weight file")]
    return [Role(flag, Path(mlir), of, "the .mlir"), Role(flag, weight_file_of(mlir), of, "the weight file")]


_WEIGHT_FILE = re.compile(r'module\.weight_file\s*=\s*"((?:[^"\\]|\\.)*)"')


def read_weight_file_name(mlir: str | os.PathLike, module=None) -> str | None:
    """The `module.weight_file` a `.mlir` names: from `module` when given, else from the
    file's text (its module attributes come first)."""
    if module is not None:
        attr = module.attributes.get("module.weight_file")
        data = getattr(attr, "data", None)
        return data if isinstance(data, str) else None
    try:
        with open(mlir, encoding="utf-8", errors="replace") as f:
            head = f.read(1 << 20)
    except OSError:
        return None
    match = _WEIGHT_FILE.search(head)
    return match.group(1) if match else None


def module_inputs(flag: str, mlir: str | os.PathLike | None, module=None) -> list[Role]:
    """A `.mlir` a command reads and the weight file it names (beside it)."""
    if mlir is None:
        return []
    roles = named(flag, mlir)
    name = read_weight_file_name(mlir, module)
    if name:
        roles.append(Role(flag, Path(mlir).parent / name, str(mlir), "the weight file"))
    return roles


def sample_inputs(flag: str, given_value: str | None, paths: Iterable[str | os.PathLike]) -> list[Role]:
    """The samples a dataset folder or list holds, each an input of the command."""
    if given_value is None:
        return []
    return [Role(flag, Path(p), given_value, "a sample") for p in paths]


def _same(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _check_place(output: Role) -> None:
    """The output can be a file: not a folder, in a folder that exists and is writable."""
    try:
        _check_place_of(output)
    except OSError as e:  # a name too long for the file system, a loop of links, ...
        raise OutputPathError(f"{output.describe()}: cannot be written ({e.strerror or e}); name another file") from e


def _check_place_of(output: Role) -> None:
    path = output.path
    name = output.describe()
    raw = output.raw if output.raw is not None else str(path)
    if raw == "" or raw.endswith(("/", os.sep)) or path.is_dir():
        raise OutputPathError(f"{name} is a folder; name a file to write, e.g. {path / 'out'}")
    if path.exists() and not path.is_file():
        raise OutputPathError(f"{name} exists and is not a regular file; name a file to write")
    folder = path.parent
    if not folder.exists():
        raise OutputPathError(f"{name}: folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputPathError(f"{name}: {folder} is a file, not a folder; name a file in a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{name}: folder {folder} is not writable; write the file somewhere you may")


def check_output_path(flag: str, value: str | os.PathLike) -> None:
    """The one output a flag names can be a file (the place checks of `check_paths`), for a
    command to check first, before its inputs."""
    _check_place(named(flag, value)[0])


def check_paths(inputs: Sequence[Role], outputs: Sequence[Role]) -> None:
    """Refuse outputs that would destroy an input or each other, or cannot be written
    (see the module's docstring); one line naming the flags."""
    for output in outputs:
        _check_place(output)
    for output in outputs:
        for source in inputs:
            if _same(output.path, source.path):
                raise OutputPathError(
                    f"{output.describe()} is the same file as {source.describe()}: writing it would destroy "
                    "that input; name another output file"
                )
    for i, first in enumerate(outputs):
        for second in outputs[i + 1:]:
            if _same(first.path, second.path):
                raise OutputPathError(
                    f"{first.describe()} and {second.describe()} are the same file: one would replace "
                    "the other; name them apart"
                )


F = TypeVar("F", bound=Callable[..., int])


def writes_outputs(command: F) -> F:
    """Run a command in an `OutputSet`: its files go in place together when it returns
    (whatever its exit code), none when it raises or is interrupted."""

    @functools.wraps(command)
    def run(*args, **kwargs) -> int:
        with OutputSet():
            return command(*args, **kwargs)

    return run  # type: ignore[return-value]
