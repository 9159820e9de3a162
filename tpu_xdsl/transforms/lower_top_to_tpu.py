"""lower-top-to-tpu: TOP ops to their chip-level TPU counterparts in F32, F16, BF16 or INT8.

    lower-top-to-tpu{mode=INT8 chip=bm1684x asymmetric=false qtable=q.txt quant_input=false
                     quant_output=false per_tensor_activations=false round_mode=half_up}

Pattern families, one per kind of op (`tpu_xdsl/transforms/lowering/`),
rewrite the ops of @main in program order, so each finds its operands
already lowered:

- float (`float_ops`): the same op in the storage type (F32/F16/BF16);
- INT8 (`int8_conv`, `int8_eltwise`, `int8_pool`): per-channel weights,
  int32 bias, multiplier/shift requantization, lookup tables, scale-keeping
  data movement. INT8 reads the calibrated ranges of the TOP tensors
  (`import-calibration`). Symmetric INT8 gives tensors of rank 2 and 4 one
  scale per channel (axis 1) from the table's per-channel ranges where their
  consumers can take them (convs and matmuls fold them into their weights,
  the others into per-channel multipliers and tables); other tensors, and all
  with `per_tensor_activations` (TPU-MLIR's scheme), S = threshold / 128;
  asymmetric: uint8 with a zero point, per tensor.

The chip's capability table decides which modes exist. A quantize table
(`qtable`, lines `op_name MODE`) sets the mode of single ops; ops INT8 cannot
run fall back to the chip's most precise float mode, reported. `tpu.cast`
ops convert at every change of type: in and out of INT8, between float types,
and at the outputs back to f32 (INT8 outputs stay INT8 with `quant_output`;
`quant_input` makes the model's inputs INT8). Tensor names stay, so every TPU
tensor compares with its TOP tensor by name; an output's cast back to f32 takes the
output's (ONNX) name and the value it converts a derived one (`{name}_float16`,
`_bfloat16`, `_int8`), so users find the outputs of every stage by the names they know.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint, Rewriter

from tpu_xdsl.calibration.model_scales import is_model_calibrated, model_float_ops
from tpu_xdsl.device.chip import check_mode, chip_config
from tpu_xdsl.dialects.module import input_ops, main_func, rename_result, tensor_names
from tpu_xdsl.dialects.quant_types import (
    calibration_of,
    is_quantized,
    qparams_of,
    quantized_type,
)
from tpu_xdsl.feeds import HELD_AS
from tpu_xdsl.kernels.dtypes import element_type, numpy_dtype
from tpu_xdsl.kernels.op_kinds import EXACT_ON_CODES
from tpu_xdsl.kernels.quant import activation_qparams
from tpu_xdsl.transforms.lowering.context import (
    FLOAT_MODES,
    Fallback,
    LoweringContext,
    LoweringError,
    is_float_tensor,
    value_name,
)
from tpu_xdsl.transforms.lowering.float_ops import FloatOpLowering
from tpu_xdsl.transforms.lowering.int8_conv import (
    ConvInt8,
    DeconvInt8,
    MatMulInt8,
    ScaleInt8,
)
from tpu_xdsl.transforms.lowering.int8_eltwise import EltwiseInt8, LutInt8
from tpu_xdsl.transforms.lowering.int8_pool import (
    AvgPoolInt8,
    ConcatInt8,
    DataMovementInt8,
    MaxPoolInt8,
    ReduceInt8,
)
from tpu_xdsl.transforms.lowering.quantize_table import read_quantize_table
from tpu_xdsl.transforms.matching import sync_function_type
from tpu_xdsl.transforms.top_dce import TopDce

__all__ = ["FLOAT_MODES", "LowerTopToTpuPass", "LoweringError", "lower_top_to_tpu"]

_KEEP = {"top.input", "top.weight", "top.none"}
INT8_PATTERNS = (
    ConvInt8, DeconvInt8, MatMulInt8, ScaleInt8, LutInt8, EltwiseInt8,
    MaxPoolInt8, AvgPoolInt8, ReduceInt8, ConcatInt8, DataMovementInt8,
)


LOWERED_STATE = "TPU_LOWERED"
# The round modes lowering offers: the project's own, and TOSA's (see kernels.quant).
LOWERING_ROUND_MODES = ("half_away_from_zero", "half_up")


def lowered_chip(module: ModuleOp, accepted: Collection[str], takes: str, error: type[Exception]) -> str:
    """The chip a TPU module was lowered for, once its module.state is one of `accepted`.
    For the passes after this one; `takes` says what the pass takes, e.g. "tpu-assign-memory
    takes a TPU module", and `error` is the pass's error class."""
    state = module.attributes.get("module.state")
    if not isinstance(state, StringAttr) or state.data not in accepted:
        shown = state.data if isinstance(state, StringAttr) else "missing"
        raise error(
            f"module.state is {shown}: {takes} ({LOWERED_STATE}); "
            "lower it with tpu-xdsl deploy or the lower-top-to-tpu pass first"
        )
    chip = module.attributes.get("module.chip")
    if not isinstance(chip, StringAttr):
        raise error("the module names no chip (module.chip): lower it with tpu-xdsl deploy --chip")
    return chip.data


def _lowered_names(module: ModuleOp) -> list[str]:
    """The tensor names of the ops lowering gives a mode: those a quantize table may name."""
    ops = main_func(module).body.block.ops
    return [n for o in ops if o.name not in _KEEP and o.name.startswith("top.") for n in tensor_names(o)]


def check_quantize_table(module: ModuleOp, path: str, chip_name: str) -> None:
    """Read the quantize table at `path` for `module`: a one-line error for a line it cannot use."""
    read_quantize_table(path, _lowered_names(module), chip_config(chip_name))


def lower_top_to_tpu(
    module: ModuleOp,
    mode: str,
    chip_name: str = "bm1684x",
    asymmetric: bool = False,
    qtable: str | Mapping[str, str] | None = None,
    quant_input: bool = False,
    quant_output: bool = False,
    per_tensor_activations: bool = False,
    round_mode: str = "",
) -> LoweringReport:
    """Lower `module` in place; reports the ops that fell back from INT8 to a float mode.
    `qtable` is a quantize table's path, or its lines as a mapping (trusted: a search's).
    `round_mode` (one of ROUND_MODES) sets how INT8 ops and quantizing casts round; empty:
    half away from zero (half to even for a pre-quantized model)."""
    chip = chip_config(chip_name)
    mode = check_mode(chip, mode)
    if round_mode and round_mode not in LOWERING_ROUND_MODES:
        raise LoweringError(
            f"round mode '{round_mode}': choose {' or '.join(LOWERING_ROUND_MODES)} "
            "(half_up rounds as TOSA's rescale does)"
        )
    state = module.attributes.get("module.state")
    if isinstance(state, StringAttr) and not state.data.startswith("TOP"):
        raise LoweringError(f"module.state is {state.data}: lower-top-to-tpu takes a TOP module")
    names = _lowered_names(module)
    if isinstance(qtable, Mapping):
        table = dict(qtable)
    else:
        table = read_quantize_table(qtable, names, chip) if qtable else {}
    int8 = mode == "INT8" or "INT8" in table.values()
    if int8 and not _is_calibrated(module):
        raise LoweringError(
            "INT8 needs calibrated tensor ranges and the module has none: give the calibration table "
            "(tpu-xdsl deploy --calibration-table, or the import-calibration pass first); "
            "tpu-xdsl calibrate writes it"
        )
    report = LoweringReport()
    declared = list(main_func(module).function_type.outputs.data)  # the model's own output types
    model_scales = int8 and is_model_calibrated(module)
    if model_scales:  # a pre-quantized model: what it keeps in float stays float
        report.notes.extend(_keep_model_float_ops(module, table, chip))
    if table:
        _move_in_float_between_float_ops(module, table)
    _hold_integer_inputs(module)
    per_channel = int8 and not per_tensor_activations and not asymmetric
    if per_channel and not _has_channel_ranges(module):
        per_channel = False
        if not model_scales:  # a pre-quantized model's scales are per tensor: nothing to say
            report.notes.append(
                "activation scales are per tensor: the calibration table has no per-channel ranges "
                "(tables from tpu-xdsl calibrate have them)"
            )
    ctx = LoweringContext(module, chip, mode, asymmetric, table, per_channel)
    if (quant_input or quant_output) and not int8:
        raise LoweringError(f"quant_input/quant_output keep INT8 at the model's boundary; mode {mode} has none")
    if quant_input:
        _quantize_inputs(module, asymmetric)
    patterns: list[RewritePattern] = [p(ctx) for p in INT8_PATTERNS] if int8 else []
    patterns.append(FloatOpLowering(ctx))
    block = main_func(module).body.block
    for op in list(block.ops):
        if op.parent is None or op.name in _KEEP or not op.name.startswith("top."):
            continue
        rewriter = PatternRewriter(op)
        for pattern in patterns:
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                break
    _cast_outputs(ctx, quant_output, declared)
    if round_mode and int8:
        _set_round_mode(module, round_mode)
    elif model_scales:
        _set_round_mode(module, "half_to_even")

    ctx.erase_unused_conversions()
    TopDce().apply(Context(), module)  # the f32 weights that were converted, and the scales of erased conversions
    sync_function_type(main_func(module))
    module.attributes["module.state"] = StringAttr(LOWERED_STATE)
    module.attributes["module.chip"] = StringAttr(chip.name)
    module.attributes["module.mode"] = StringAttr(mode)
    if int8:
        scheme = "asymmetric" if asymmetric else ("symmetric, per-channel activations" if per_channel else "symmetric")
        module.attributes["module.quantization"] = StringAttr(scheme)
    report.fallbacks = ctx.fallbacks
    return report


def _keep_model_float_ops(module: ModuleOp, table: dict[str, str], chip) -> list[str]:
    """Put the ops a pre-quantized model computes in float (`model_scales.model_float_ops`)
    in the chip's most precise float mode, unless the quantize table says otherwise; the
    note naming them."""
    mode = next(m for m in FLOAT_MODES if chip.supports(m))
    kept = [name for name in model_float_ops(module) if name not in table]
    table.update({name: mode for name in kept})
    if not kept:
        return []
    shown = ", ".join(kept[:4]) + (f" and {len(kept) - 4} more" if len(kept) > 4 else "")
    return [f"{len(kept)} op(s) run in {mode} as the pre-quantized model computes them in float: {shown}"]


def _move_in_float_between_float_ops(module: ModuleOp, table: dict[str, str]) -> None:
    """A data-movement op the quantize table does not name (a reshape, concat, slice, max
    pool: exact on INT8 codes, so never a candidate of its own) whose every computed operand
    comes from ops the table puts in one float mode moves them in that mode: quantizing
    them to INT8 only to move the codes would round what the table keeps in float, and a
    concatenation of differently scaled inputs (a detector's boxes beside its scores) to
    one scale; in a BF16 model, a reshape between two F32 ops would round to bf16 what both
    keep in F32. Chains of such ops follow their first producer. One that moves only
    weights or the model's inputs takes the mode its users share: in the base mode it would
    round what float ops read (bf16 in a BF16 model)."""
    undecided = []
    for op in main_func(module).body.block.ops:
        names = tensor_names(op)
        if op.name.removeprefix("top.") not in EXACT_ON_CODES or not names or any(n in table for n in names):
            continue
        producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)
                     and v.owner.name not in ("top.weight", "top.none", "top.input")]
        if not producers:
            undecided.append(op)
        elif (mode := _shared_mode(producers, table)) is not None:
            table[names[0]] = mode
    for op in reversed(undecided):  # a chain of them: its last op's users decide first
        if (mode := _shared_mode([use.operation for r in op.results for use in r.uses], table)) is not None:
            table[tensor_names(op)[0]] = mode


def _shared_mode(ops: Sequence[Operation], table: dict[str, str]) -> str | None:
    """The float mode the quantize table gives every op of `ops` (by its first named tensor),
    None when they do not all have one and the same."""
    modes = set()
    for op in ops:
        found = [table[n] for n in tensor_names(op) if n in table]
        modes.add(found[0] if found else None)
    mode = modes.pop() if len(modes) == 1 else None
    return mode if mode in FLOAT_MODES else None


def _set_round_mode(module: ModuleOp, mode: str) -> None:
    """Quantizing casts and requantizing ops round by `mode`. A pre-quantized model rounds as
    ONNX's QuantizeLinear and onnxruntime's requantization do, half to even (photo pixels
    scaled by 2/255 fall exactly half-way between codes: the mode changes every one);
    half_up is TOSA's rescale (SINGLE_ROUND), so an export to TOSA computes the same codes."""
    for op in main_func(module).body.block.ops:
        quantizing = op.name == "tpu.cast" and is_quantized(op.results[0].type)
        if quantizing or "round_mode" in op.attributes:
            op.attributes["round_mode"] = StringAttr(mode)


def _has_channel_ranges(module: ModuleOp) -> bool:
    return any(
        (c := calibration_of(r.type)) is not None and c.ranges is not None
        for op in main_func(module).body.block.ops
        for r in op.results
    )


def _is_calibrated(module: ModuleOp) -> bool:
    return any(calibration_of(r.type) is not None for op in main_func(module).body.block.ops for r in op.results)


def _hold_integer_inputs(module: ModuleOp) -> None:
    """The model's bool and int64 inputs (token ids, masks) in the types TPU ops hold them in
    (int8, int32: `feeds.HELD_AS`); a run converts the values it is given."""
    for op in input_ops(module):
        result = op.results[0]
        t = result.type
        held = HELD_AS.get(numpy_dtype(t.element_type)) if isinstance(t, TensorType) else None
        if held is None:
            continue
        kind = TensorType(element_type(held), t.get_shape(), t.encoding)  # type: ignore[attr-defined]
        Rewriter.replace_value_with_new_type(op.operands[0], kind)  # the block argument
        Rewriter.replace_value_with_new_type(result, kind)
    sync_function_type(main_func(module))


def _quantize_inputs(module: ModuleOp, asymmetric: bool) -> None:
    """The model's calibrated float inputs become INT8 (the argument and `top.input`)."""
    for op in input_ops(module):
        result = op.results[0]
        calibration = calibration_of(result.type)
        if calibration is None:
            raise LoweringError(f"input '{value_name(result)}' has no calibrated range; quant_input needs one")
        qparams = activation_qparams(calibration.threshold, calibration.min, calibration.max, asymmetric)
        quantized = quantized_type(result.type.get_shape(), qparams)  # type: ignore[attr-defined]
        Rewriter.replace_value_with_new_type(op.operands[0], quantized)  # the block argument
        Rewriter.replace_value_with_new_type(result, quantized)
    sync_function_type(main_func(module))


def _cast_outputs(ctx: LoweringContext, quant_output: bool, declared: Sequence[Attribute]) -> None:
    """Every output back in its `declared` float type (f32, or the f16 of a float16 model's
    output) and INT8 ones in f32, INT8 ones kept with `quant_output`. The cast takes the
    output's name, so the model's outputs keep their ONNX names in every stage; the
    value it converts gets a derived one, named by its type as the casts between modes are
    (`{name}_float16`, `_bfloat16`, `_int8`, `_uint8`)."""
    ret = main_func(ctx.module).body.block.last_op
    assert ret is not None
    taken = {n for op in main_func(ctx.module).body.block.ops for n in tensor_names(op)}
    casts: dict[SSAValue, SSAValue] = {}
    for i, value in enumerate(list(ret.operands)):
        t = value.type
        if not isinstance(t, TensorType):
            continue
        qparams = qparams_of(t, ctx.weights)
        if qparams is not None and quant_output:
            continue
        want = np.dtype(np.float32)
        model_type = declared[i] if i < len(declared) else None
        if qparams is None and isinstance(model_type, TensorType) and is_float_tensor(model_type):
            want = numpy_dtype(model_type.element_type)
        if qparams is None and (not is_float_tensor(t) or numpy_dtype(t.element_type) == want):
            continue
        if value in casts:
            ret.operands[i] = casts[value]
            continue
        name = value_name(value, f"output{i}")
        if isinstance(value.owner, Operation) and value.owner.name != "top.input":
            internal = _unique(f"{name}_{numpy_dtype(t.element_type)}", taken)
            rename_result(value, internal)
        else:  # an input returned as it is keeps its name: the output gets a derived one
            name = _unique(f"{name}_{'f32' if want == np.float32 else want}", taken)
        target = TensorType(element_type(want), t.get_shape())
        cast = ctx.cast_op(value, target, name, qparams)
        for reader in cast.operands[1:]:
            Rewriter.insert_op(reader.owner, InsertPoint.before(ret))  # type: ignore[arg-type]
        Rewriter.insert_op(cast, InsertPoint.before(ret))
        ret.operands[i] = casts[value] = cast.results[0]


def _unique(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`, ... when a tensor of the module has it; then taken."""
    found, count = name, 1
    while found in taken:
        count += 1
        found = f"{name}_{count}"
    taken.add(found)
    return found


@dataclass
class LoweringReport:
    """What a lowering did that the user should know: ops that fell back from INT8 to a
    float mode, and notes."""

    fallbacks: list[Fallback] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return self.notes + report_fallbacks(self.fallbacks)


def report_fallbacks(fallbacks: list[Fallback]) -> list[str]:
    """One line per mode and reason: which ops fell back from INT8."""
    groups: dict[tuple[str, str], list[Fallback]] = {}
    for f in fallbacks:
        groups.setdefault((f.mode, f.reason), []).append(f)
    lines = []
    for (mode, reason), items in groups.items():
        shown = ", ".join(f"{f.name} ({f.op})" for f in items[:4])
        more = f" and {len(items) - 4} more" if len(items) > 4 else ""
        lines.append(f"{len(items)} op(s) run in {mode} instead of INT8 ({reason}): {shown}{more}")
    return lines


@dataclass(frozen=True)
class LowerTopToTpuPass(ModulePass):
    """Rewrite every TOP op of @main into its TPU op in `mode` (F32, F16, BF16, INT8) for `chip`."""

    name = "lower-top-to-tpu"

    mode: str = "F32"
    chip: str = "bm1684x"
    asymmetric: bool = False
    qtable: str = ""
    quant_input: bool = False
    quant_output: bool = False
    per_tensor_activations: bool = False
    round_mode: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        report = lower_top_to_tpu(
            op, self.mode, self.chip, self.asymmetric, self.qtable or None, self.quant_input, self.quant_output,
            self.per_tensor_activations, self.round_mode,
        )
        for line in report.lines():
            print(f"note: {line}", file=sys.stderr)

