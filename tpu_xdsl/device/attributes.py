"""A Compute instruction checked before the device runs it: a kernel the device has, the
operands its timing and kernel read, and attributes of the types the TPU dialect gives
them (irdl/tpu.irdl: each attribute name has one type in every op that has it, and
tests/test_model_file_hostile.py holds this table to it), within bounds; for window ops
(conv, deconv, pooling) the window fits the input and gives the output's shape.

A model file is untrusted: load_model checks the kernel and the attributes' types and
bounds (`attributes_problem`), the device the rest when it loads the program
(`check_compute`), so what would make a kernel raise, or allocate without bound, is one
line naming the instruction and the attribute. No xDSL here.
"""

from __future__ import annotations

import math
from typing import Any

from tpu_xdsl.device.isa import Compute, IllegalProgramError
from tpu_xdsl.kernels.tpu import has_tpu_kernel
from tpu_xdsl.limits import ResourceLimitError, check_tensor_size, max_tensor_bytes

# The value of each attribute a kernel reads: "int", "ints" (a list of integers),
# "number" (an integer or a float), "numbers", "bool" (true/false, or 0/1), "str", "strs".
# JSON null stands for an absent attribute, as it does for the kernels.
ATTRIBUTE_TYPES: dict[str, str] = {
    # the TPU dialect's attributes
    "align_corners": "int", "alpha": "number", "approximate": "str", "axes": "ints", "axis": "int",
    "beta": "number", "bias": "number", "block_size": "int", "ceil_mode": "bool", "coordinate_mode": "str",
    "count_include_pad": "bool", "ddr": "ints", "dilations": "ints", "direction": "str", "do_relu": "bool",
    "ends": "ints", "epsilon": "number", "exclusive": "bool", "flow": "ints", "group": "int", "group_type": "str",
    "h_slices": "int",
    "hidden_size": "int", "input_zero_points": "ints", "inverse": "bool", "k": "int", "keepdims": "bool",
    "kernel_shape": "ints", "largest": "bool", "layout": "int", "left_transpose": "bool",
    "linear_before_reset": "bool", "max": "number", "min": "number", "mode": "str", "multiplier": "ints",
    "n_slices": "int", "names": "strs", "nearest_mode": "str", "num_groups": "int", "order": "ints",
    "output_padding": "ints", "output_zero_point": "int", "padding_mode": "str", "pads": "ints",
    "quant_mode": "str", "reduction": "str", "relu_limit": "number", "repeats": "ints", "reverse": "bool",
    "right_transpose": "bool",
    "round_mode": "str", "rshift": "ints", "scale": "number", "scale_h": "int", "scale_w": "int",
    "scales": "numbers", "select_last_index": "bool", "shape": "ints", "size": "int", "sorted": "bool",
    "split": "ints", "starts": "ints", "steps": "ints", "strides": "ints", "value": "number", "zero_point": "int",
    # what lowering and codegen add
    "channel_axis": "int", "first_step": "int", "recurrent_bias_gates": "int",
}  # fmt: skip

# Lower bounds of integer attributes (each element of a list), for every op but `pad`,
# whose negative pads crop.
AT_LEAST = {
    "kernel_shape": 1, "strides": 1, "dilations": 1, "group": 1, "pads": 0, "output_padding": 0,
    "block_size": 1, "num_groups": 1, "size": 1, "scale_h": 1, "scale_w": 1, "hidden_size": 1, "k": 0,
}  # fmt: skip
# Every integer of an attribute is an int64 of the chip.
_INT64 = 1 << 63
_WINDOW = frozenset({"conv", "max_pool", "avg_pool"})
# Kinds whose timing reads a weights operand at this position.
_WEIGHTS_AT = {"conv": 1, "deconv": 1, "matmul": 1, "rnn_project": 1, "lstm_cell": 3, "gru_cell": 3,
               "gru_gates": 3, "gru_update": 3}


def check_compute(instruction: Compute, where: str) -> None:
    """IllegalProgramError naming `where` and the problem, if the device cannot run it."""
    kind = instruction.kind
    if not has_tpu_kernel(kind):
        raise IllegalProgramError(f"{where}: no compute kernel {_show(kind)}; recompile the model")
    if not instruction.outputs or any(t is None for t in instruction.outputs):
        raise IllegalProgramError(f"{where}: a {kind} needs its output tensors; recompile the model")
    if not instruction.inputs:  # the timing reads the first (None: the output stands for it)
        raise IllegalProgramError(f"{where}: a {kind} needs its first input; recompile the model")
    weights_at = _WEIGHTS_AT.get(kind)
    if weights_at is not None and (len(instruction.inputs) <= weights_at or instruction.inputs[weights_at] is None):
        raise IllegalProgramError(f"{where}: a {kind} needs its weights as input {weights_at}; recompile the model")
    problem = attributes_problem(kind, instruction.attrs)
    if problem:
        raise IllegalProgramError(f"{where}: {problem}; recompile the model")
    rule = _window_problem if kind in _WINDOW or kind == "deconv" else _SHAPE_RULES.get(kind)
    problem = rule(instruction) if rule is not None else None
    if problem:
        raise IllegalProgramError(f"{where}: {problem}; recompile the model")


def attributes_problem(kind: str, attrs: dict[str, Any]) -> str | None:
    """What is wrong with the attributes of a `kind` kernel, if anything (types and bounds)."""
    for name, value in attrs.items():
        problem = _attribute_problem(kind, name, value)
        if problem:
            return f"attribute {name} {_show(value)}: {problem}"
    return None


def _attribute_problem(kind: str, name: str, value: Any) -> str | None:
    expected = ATTRIBUTE_TYPES.get(name)
    if expected is None or value is None:
        return None  # no kernel reads it / absent
    listed = expected.endswith("s")
    element = expected[:-1] if listed else expected
    what = f"a list of {_NAMES[element]}s" if listed else f"{'an' if element == 'int' else 'a'} {_NAMES[element]}"
    if listed and type(value) is not list:
        return f"expected {what}"
    items: list[Any] = value if listed else [value]
    for item in items:
        if not _is(element, item):
            return f"expected {what}"
        if element in ("int", "number") and type(item) is int and not -_INT64 <= item < _INT64:
            return "outside the 64-bit integers"
    low = AT_LEAST.get(name)
    cropping = kind == "pad" and name == "pads"
    if low is not None and element == "int" and not cropping and any(item < low for item in items):
        return f"{'each value' if listed else 'it'} must be at least {low}"
    return None


_NAMES = {"int": "integer", "number": "number", "bool": "boolean", "str": "string"}


def _is(element: str, item: Any) -> bool:
    kind = type(item)
    if element == "int":
        return kind is int or kind is bool  # kernels take true and false as 1 and 0
    if element == "number":
        return kind is int or kind is float
    if element == "bool":
        return kind is bool or (kind is int and item in (0, 1))
    return kind is str


def _window_problem(instruction: Compute) -> str | None:
    """The window of a conv, deconv or pooling: one entry per spatial dim, fitting the padded
    input and giving the output's spatial shape (pooling's ceil_mode one more), the filter's
    kernel_shape (conv, deconv); im2col's columns under the tensor size limit."""
    x, out = instruction.inputs[0], instruction.outputs[0]
    attrs, kind = instruction.attrs, instruction.kind
    if x is None or len(x.view) < 3 or len(out.view) != len(x.view):
        return f"a {kind} of a {len(x.view) if x else 0}-d input and a {len(out.view)}-d output"
    spatial = len(x.view) - 2
    kernel_shape = attrs.get("kernel_shape")
    if kernel_shape is None or len(kernel_shape) != spatial:
        return f"kernel_shape {_show(kernel_shape)} for {spatial} spatial dims"
    strides = attrs.get("strides") or [1] * spatial
    dilations = attrs.get("dilations") or [1] * spatial
    pads = attrs.get("pads") or [0] * (2 * spatial)
    if len(strides) != spatial or len(dilations) != spatial or len(pads) != 2 * spatial:
        return f"strides {_show(strides)}, dilations {_show(dilations)}, pads {_show(pads)} for {spatial} spatial dims"
    weights = instruction.inputs[1] if kind in ("conv", "deconv") else None
    if weights is not None and list(weights.view[2:]) != list(kernel_shape):
        return f"kernel_shape {list(kernel_shape)} but filter {list(weights.view)}"
    group = attrs.get("group") or 1
    if kind in ("conv", "deconv") and (x.view[1] % group or out.view[1] % group):
        return f"group {group} does not divide {x.view[1]} input and {out.view[1]} output channels"
    output_padding = attrs.get("output_padding") or [0] * spatial
    for i in range(spatial):
        size, want = x.view[2 + i], out.view[2 + i]
        extent = (kernel_shape[i] - 1) * dilations[i] + 1
        begin, end, stride = pads[i], pads[i + spatial], strides[i]
        if kind == "deconv":  # the kernel crops `begin` and keeps the output's size; a slice may drop more at the end
            full = (size - 1) * stride + extent + (output_padding[i] if i < len(output_padding) else 0)
            got = full - begin - end
            ok = 0 <= full - begin - want <= end + extent + stride
        else:
            padded = size + begin + end
            got = (padded - extent) // stride + 1 if padded >= extent else 0
            ok = got == want or (kind != "conv" and bool(attrs.get("ceil_mode")) and got + 1 == want)
        if not ok:
            return (f"spatial dim {i}: input {size}, kernel {kernel_shape[i]}, stride {stride}, dilation "
                    f"{dilations[i]}, pads {begin}/{end} give {got}, not the output's {want}")
    taps = math.prod(kernel_shape)
    columns = [math.prod(out.view[2:]) * out.view[0], taps * (x.view[1] // group if kind == "conv" else 1)]
    if kind == "deconv":
        columns = [math.prod(x.view[2:]) * x.view[0], taps * out.view[1]]
    if math.prod(columns) * 8 > max_tensor_bytes():
        try:
            check_tensor_size(f"the {kind}'s im2col columns", columns, 8)
        except ResourceLimitError as e:
            return str(e)
    return None


def _sizes_problem(instruction: Compute, what: str, sizes: list[int]) -> str | None:
    out = instruction.outputs[0]
    if math.prod(out.view) != math.prod(sizes):  # the write takes any shape of the output's size
        return f"{what} make {sizes}, not the output's {list(out.view)}"
    return None


def _pad_problem(instruction: Compute) -> str | None:
    x, pads = instruction.inputs[0], instruction.attrs.get("pads") or []
    rank = len(x.view) if x is not None else 0
    if len(pads) != 2 * rank:
        return f"{len(pads)} pads for a {rank}-d input"
    assert x is not None
    return _sizes_problem(instruction, "the pads", [d + pads[i] + pads[i + rank] for i, d in enumerate(x.view)])


def _tile_problem(instruction: Compute) -> str | None:
    x, repeats = instruction.inputs[0], instruction.attrs.get("repeats") or []
    if x is None or len(repeats) != len(x.view) or min(repeats, default=0) < 0:
        return f"repeats {_show(repeats)} for a {len(x.view) if x else 0}-d input"
    return _sizes_problem(instruction, "the repeats", [d * r for d, r in zip(x.view, repeats, strict=True)])


def _upsample_problem(instruction: Compute) -> str | None:
    x, attrs = instruction.inputs[0], instruction.attrs
    if x is None or len(x.view) != 4 or attrs.get("scale_h") is None or attrs.get("scale_w") is None:
        return "an upsample needs a 4-d input, scale_h and scale_w"
    n, c, h, w = x.view
    return _sizes_problem(instruction, "scale_h and scale_w", [n, c, h * attrs["scale_h"], w * attrs["scale_w"]])


# Ops whose kernel makes its output from the attributes (allocating it before anything could
# compare it with the output tensor): the attributes must give the output's shape.
_SHAPE_RULES = {"pad": _pad_problem, "tile": _tile_problem, "upsample": _upsample_problem}


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
