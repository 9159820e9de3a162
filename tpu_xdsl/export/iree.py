"""Compile TOSA text with IREE (cached by content) and run it on named numpy inputs.

IREE is the optional `tosa` extra (`pip install -e '.[tosa]'`): it is imported only when a
function here needs it, so the default install imports the package without it.

A compiled module is a `.vmfb` in the project's cache folder (`dialects.cache_dir() / "iree"`),
named by the SHA-256 of the text, IREE's version, the compile flags and the host CPU (the code
is compiled for it), and written to a temporary renamed into place: two processes compiling the
same text never read half a file. The function keeps the tensor names of the exported module:
IREE records the `tpu.name` argument and result attributes in the function's reflection
(`iree.abi.declaration`), where `run` finds them.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpu_xdsl.errors import UsageError
from tpu_xdsl.feeds import UNNAMED, accepts_dtype

INSTALL_HINT = "pip install -e '.[tosa]'"
# What `iree-compile --iree-input-type=tosa --iree-hal-target-device=local
# --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host` does.
INPUT_TYPE = "tosa"
TARGET_BACKENDS = ("llvm-cpu",)
EXTRA_FLAGS = ("--iree-llvmcpu-target-cpu=host",)
# IREE's own default worker limit (`--task_topology_max_group_count`), for threads=None.
DEFAULT_MAX_GROUPS = 64

# Compiles this process ran (cache misses): tests check the cache with it.
compile_count = 0


class IreeMissingError(UsageError):
    """IREE (the `tosa` extra) is not installed."""

    def __init__(self) -> None:
        super().__init__(f"IREE is not installed; install the extra: {INSTALL_HINT}")


class IreeCompileError(UsageError):
    """IREE refuses to compile a TOSA file."""


class IreeInputError(UsageError):
    """Inputs that do not match what a compiled module declares."""


def available() -> bool:
    """Whether IREE's compiler and runtime can be imported."""
    try:
        from iree import compiler, runtime
    except ImportError:
        return False
    return compiler is not None and runtime is not None


def require() -> None:
    """Raise `IreeMissingError` (one line saying how to install) unless IREE is there."""
    if not available():
        raise IreeMissingError()


_TOSA_STATE = re.compile(r'module\.state\s*=\s*"TOSA')


def is_tosa_file(path: str | Path) -> bool:
    """Whether `path` is a TOSA module: named `.tosa.mlir`, or a `.mlir` whose module.state
    (in its module attributes, at the head of the file) starts with TOSA."""
    if str(path).endswith(".tosa.mlir"):
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return _TOSA_STATE.search(head) is not None


def iree_version() -> str:
    require()
    from iree.compiler.version import REVISIONS, VERSION

    return f"{VERSION} {REVISIONS.get('IREE', '')}".strip()


def compile_flags() -> list[str]:
    """The iree-compile flags a TOSA module is compiled with (part of the cache key)."""
    return [f"--iree-input-type={INPUT_TYPE}", *(f"--iree-hal-target-backends={b}" for b in TARGET_BACKENDS),
            *EXTRA_FLAGS]


def _host_cpu() -> str:
    """What `--iree-llvmcpu-target-cpu=host` compiles for: a cache folder shared by machines of
    different CPUs must not hand one the other's code."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))]
        described = "".join(dict.fromkeys(lines))
    except OSError:
        described = platform.processor()
    return f"{platform.machine()} {described}"


def cache_key(text: str) -> str:
    """The SHA-256 naming the compiled form of `text` with this IREE, these flags, this CPU."""
    digest = hashlib.sha256()
    for part in (text, iree_version(), "\0".join(compile_flags()), _host_cpu()):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def vmfb_cache_dir() -> Path:
    from tpu_xdsl.dialects import cache_dir

    return cache_dir() / "iree"


def compile_tosa(text: str, source: str = "<string>") -> Path:
    """The `.vmfb` of TOSA `text`, compiled once and then read from the cache. `source` names
    the text in the one-line error of a module IREE rejects."""
    global compile_count
    require()
    final = vmfb_cache_dir() / f"{cache_key(text)}.vmfb"
    if final.is_file():
        return final
    from iree import compiler

    try:
        binary = compiler.compile_str(text, input_type=INPUT_TYPE, target_backends=list(TARGET_BACKENDS),
                                      extra_args=list(EXTRA_FLAGS))
    except compiler.CompilerToolError as e:
        raise IreeCompileError(f"{source}:{first_diagnostic(str(e))} (IREE cannot compile it)") from e
    assert binary is not None  # no output_file: compile_str returns the bytes
    compile_count += 1
    try:
        _write_atomic(final, bytes(binary))
    except OSError as e:
        raise UsageError(f"{final.parent}: cannot write the compiled module ({e.strerror}); set TPU_XDSL_CACHE "
                         "to a writable folder") from e
    return final


def compile_tosa_file(path: str | Path) -> Path:
    """The `.vmfb` of the TOSA file at `path` (see `compile_tosa`)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise IreeCompileError(f"{path}: no such file; give a .tosa.mlir from tpu-xdsl export") from e
    except (OSError, UnicodeDecodeError) as e:
        raise IreeCompileError(f"{path}: cannot read it ({e})") from e
    return compile_tosa(text, str(path))


def first_diagnostic(message: str) -> str:
    """`line:col: message` of the first error in iree-compile's output (its source is stdin)."""
    for line in message.splitlines():
        match = re.match(r"^.*?:(\d+):(\d+): error: (.*)$", line)
        if match:
            return f"{match[1]}:{match[2]}: {match[3].strip()}"
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Error invoking", "Error code", "Diagnostics"))]
    return f" {(useful or lines or ['iree-compile failed'])[0]}"


def _write_atomic(final: Path, data: bytes) -> None:
    """`data` into `final` through a temporary beside it and a rename (readers see all or nothing)."""
    from tpu_xdsl.files import temp_prefix

    final.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=final.parent, prefix=f"{temp_prefix(final)}{os.getpid()}-")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, final)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class TensorSpec:
    """One argument or result of a compiled function: its `tpu.name` (None when it has none),
    shape (None for a dynamic dimension) and numpy dtype."""

    name: str | None
    shape: tuple[int | None, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def output_names(self) -> list[str]:
        """The results' names: their `tpu.name`, else `outputN`."""
        return [spec.name or f"output{i}" for i, spec in enumerate(self.outputs)]


_ELEMENT_TYPES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool",
    "ui64": "uint64", "ui32": "uint32", "ui16": "uint16", "ui8": "uint8",
    "si64": "int64", "si32": "int32", "si16": "int16", "si8": "int8",
}
_VALUE = re.compile(r"%(input|output)(\d+): tensor<([^>]*)>(?: \{([^{}]*)\})?")
_NAME = re.compile(r'tpu\.name = "((?:[^"\\]|\\.)*)"')


def _numpy_dtype(element: str) -> np.dtype:
    name = _ELEMENT_TYPES.get(element)
    if name is None:
        raise IreeInputError(f"a compiled module's tensor of element type {element}: tpu-xdsl cannot feed or read it")
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _unescape(text: str) -> str:
    """An MLIR string literal's body as text (`\\\\` a backslash, `\\HH` a byte)."""
    raw = re.sub(rb"\\(\\|[0-9A-Fa-f]{2})",
                 lambda m: b"\\" if m[1] == b"\\" else bytes([int(m[1], 16)]), text.encode("utf-8"))
    return raw.decode("utf-8", errors="replace")


def parse_declaration(declaration: str) -> Signature:
    """The signature IREE's reflection declares, e.g. `sync func @main(%input0:
    tensor<1x8x8x3xf32> {tpu.name = "image"}) -> (%output0: tensor<1x8x8x4xf32> {...})`."""
    inputs: list[TensorSpec] = []
    outputs: list[TensorSpec] = []
    for match in _VALUE.finditer(declaration):
        *dims, element = match[3].split("x")
        shape = tuple(None if d == "?" else int(d) for d in dims)
        names = _NAME.search(match[4] or "")
        spec = TensorSpec(_unescape(names[1]) if names else None, shape, _numpy_dtype(element))
        (inputs if match[1] == "input" else outputs).append(spec)
    return Signature(tuple(inputs), tuple(outputs))


def _device(threads: int | None):
    """The IREE CPU device that runs on `threads` worker threads (1: the calling thread,
    `local-sync`; None: IREE's default count), created once per count."""
    from iree import runtime

    if threads not in _DEVICES:
        if threads == 1:
            _DEVICES[threads] = runtime.get_device("local-sync", cache=False)
        else:
            # The worker count is a process-wide flag read when a device is created.
            runtime.flags.parse_flags(f"--task_topology_max_group_count={threads or DEFAULT_MAX_GROUPS}")
            _DEVICES[threads] = runtime.get_device("local-task", cache=False)
    return _DEVICES[threads]


_DEVICES: dict[int | None, Any] = {}  # iree.runtime.HalDevice by thread count


class CompiledModule:
    """A `.vmfb` loaded on IREE's CPU runtime; `run` calls its `@main` by tensor names."""

    def __init__(self, path: str | Path, threads: int | None = None, source: str | None = None):
        require()
        from iree import runtime

        if threads is not None and threads < 1:
            raise IreeInputError(f"threads {threads}: give a positive number of threads")
        self.path = Path(path)
        self.source = source or str(path)
        self.config = runtime.Config(device=_device(threads))
        self.context = runtime.SystemContext(config=self.config)
        self.vm_module = runtime.VmModule.mmap(self.config.vm_instance, str(self.path))
        self.context.add_vm_module(self.vm_module)
        function = self.vm_module.lookup_function("main")
        if function is None:
            raise IreeInputError(f"{self.source}: the compiled module has no function @main")
        self.signature = parse_declaration(function.reflection.get("iree.abi.declaration", ""))
        self._main = getattr(self.context.modules, self.vm_module.name).main

    def input_names(self) -> list[str]:
        """The inputs' `tpu.name`s, `inputN` for one without."""
        return [spec.name or f"input{i}" for i, spec in enumerate(self.signature.inputs)]

    def arrange(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The feeds in argument order, checked against the declared shapes and dtypes (the
        dtype converted where `feeds.accepts_dtype` allows: float32 data for an F16 input)."""
        specs = self.signature.inputs
        names = self.input_names()
        if len(specs) == 1 and len(feeds) == 1 and (specs[0].name is None or UNNAMED in feeds):
            arrays = list(feeds.values())
        else:
            missing = [n for n in names if n not in feeds]
            if missing:
                raise IreeInputError(
                    f"{self.source}: no input '{missing[0]}' among the feeds (given: {', '.join(feeds) or 'none'}); "
                    f"the module's inputs are {', '.join(names)}"
                )
            arrays = [feeds[n] for n in names]
        checked = []
        for name, spec, value in zip(names, specs, arrays, strict=True):
            array = np.asarray(value)
            got = tuple(array.shape)
            if len(got) != len(spec.shape) or any(w is not None and w != g for w, g in zip(spec.shape, got)):
                wanted = ", ".join("?" if d is None else str(d) for d in spec.shape)
                raise IreeInputError(f"{self.source}: input '{name}' has shape {list(got)}; the module expects "
                                     f"[{wanted}]")
            if not accepts_dtype(array.dtype, spec.dtype):
                raise IreeInputError(f"{self.source}: input '{name}' has dtype {array.dtype}; the module expects "
                                     f"{spec.dtype}")
            checked.append(np.ascontiguousarray(array, dtype=spec.dtype))
        return checked

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The results of `@main` on `feeds` (by input name), by result name."""
        results = self._main(*self.arrange(feeds))
        if not isinstance(results, (list, tuple)):
            results = [results]
        values = [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]
        return dict(zip(self.signature.output_names(), values, strict=True))


def load_vmfb(path: str | Path, threads: int | None = None, source: str | None = None) -> CompiledModule:
    """A compiled module ready to run (`source` names it in errors, e.g. its .tosa.mlir)."""
    return CompiledModule(path, threads, source)


def run_tosa(path: str | Path, feeds: Mapping[str, np.ndarray], threads: int | None = None) -> dict[str, np.ndarray]:
    """Compile (cached) the TOSA file at `path` and run it on `feeds`: its results by name."""
    return load_vmfb(compile_tosa_file(path), threads, str(path)).run(feeds)

