"""Cross-layer weight equalization (`calibrate --we`): Nagel et al. 2019, "Data-Free
Quantization Through Weight Equalization and Bias Correction", section 4.1.

For two convolutions in a chain, conv1 -> f -> conv2, where f is positively homogeneous
per channel (f(x / s) = f(x) / s for s > 0: identity, ReLU, LeakyReLU, PReLU, max and
average pooling), output channel c of conv1 can be divided by s_c and input channel c of
conv2 multiplied by s_c without changing the float model. With r1_c the range (max |w|)
of conv1's weights of output channel c and r2_c that of conv2's weights reading input
channel c, s_c = sqrt(r1_c r2_c) / r2_c gives both the same range sqrt(r1_c r2_c): a
channel whose weights were 100x smaller than its neighbours' no longer gets a hundredth
of the int8 levels, and the activation between the two convs (scaled by 1 / s_c) becomes
as even as the weights, which is what per-tensor activation scales need. Chains share
convs (conv1 -> conv2 -> conv3), so the pairs are equalized in turn until the scales
settle (the paper iterates too).

A fused ReLU6 (relu_limit > 0) clips at one value for every channel; scaled channels
would need one clip each (6 / s_c), which the op cannot hold, so such pairs are left
alone (counted in the report). Depthwise and grouped convs take part: input channel c of
conv2 is read by the output channels of its group only; so do transposed convs of one
group (a detector's or segmenter's upsampling head: conv -> ReLU -> deconv).

Only weights change (conv1's weights and bias, conv2's weights), in the module's weight
table; a weight shared by several ops leaves its pair alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tpu_xdsl.dialects.module import main_func, tensor_names
from tpu_xdsl.weights import is_weight, weight_name, weights_of

# Ops between the two convs that commute with a positive per-channel scale.
HOMOGENEOUS_OPS = ("top.relu", "top.leaky_relu", "top.prelu", "top.max_pool", "top.avg_pool")
MAX_ITERATIONS = 50
# Equalization has settled when no scale of a round moves further than this from 1.
SETTLED = 1e-4
# A channel whose weight range is below this fraction of the largest of its conv is dead.
DEAD_RANGE = 1e-6


@dataclass(frozen=True)
class ConvPair:
    """conv1 -> (homogeneous ops) -> conv2, equalized along conv1's output channels."""

    first: Operation
    second: Operation

    @property
    def names(self) -> str:
        return f"{_name(self.first)} -> {_name(self.second)}"

    def __repr__(self) -> str:
        return f"ConvPair({self.names})"


@dataclass
class EqualizationReport:
    pairs: list[ConvPair] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> pairs left alone
    iterations: int = 0
    # max over pairs and their live channels of max(r1_c / r2_c, r2_c / r1_c): 1 when equal
    mismatch_before: float = 1.0
    mismatch_after: float = 1.0

    def lines(self) -> list[str]:
        if not self.pairs:
            why = "; ".join(f"{n} {reason}" for reason, n in self.skipped.items())
            return [(f"note: --we found no conv -> conv chain to equalize{f' ({why})' if why else ''}; "
                    "the module's weights are unchanged")]
        lines = [(f"weight equalization: {len(self.pairs)} conv pair(s) in {self.iterations} round(s); "
                 f"largest range ratio of a channel's weights in its two convs {self.mismatch_before:.4g} -> "
                 f"{self.mismatch_after:.4g}")]
        for reason, n in self.skipped.items():
            lines.append(f"note: --we left {n} pair(s) alone: {reason}")
        return lines


def _name(op: Operation) -> str:
    return (tensor_names(op) or [op.name])[0]


def _int_attr(op: Operation, name: str, default: int) -> int:
    value = op.attributes.get(name)
    return default if value is None else int(value.value.data)  # type: ignore[attr-defined]


def _float_attr(op: Operation, name: str, default: float) -> float:
    value = op.attributes.get(name)
    return default if value is None else float(value.value.data)  # type: ignore[attr-defined]


def _clips(op: Operation) -> bool:
    """Whether `op` applies a ReLU clipped at a limit (ReLU6)."""
    relu = op.name == "top.relu" or bool(_int_attr(op, "do_relu", 0))
    return relu and _float_attr(op, "relu_limit", -1.0) > 0


def _weight_readers(module: ModuleOp) -> Counter[str]:
    """Weight entry -> how many ops read it (through any `top.weight` naming it)."""
    readers: Counter[str] = Counter()
    for op in module.walk():
        if op.name == "top.weight":
            readers[weight_name(op)] += len(list(op.results[0].uses))
    return readers


def _sole_user(value: SSAValue) -> Operation | None:
    users = [use.operation for use in value.uses]
    return users[0] if len(users) == 1 else None


def find_pairs(module: ModuleOp) -> tuple[list[ConvPair], Counter[str]]:
    """Every conv1 -> (homogeneous ops) -> conv2 chain whose scaling leaves the float
    model unchanged, and the reasons other conv -> conv chains were left alone."""
    pairs: list[ConvPair] = []
    skipped: Counter[str] = Counter()
    readers = _weight_readers(module)

    def sole_weight(value: SSAValue) -> bool:  # changing it changes nothing else
        return is_weight(value) and readers[weight_name(value.owner)] == 1  # type: ignore[arg-type]

    for first in main_func(module).body.block.ops:
        if not _equalizable(first):
            continue
        value, second, clipped = first.results[0], None, _clips(first)
        while (user := _sole_user(value)) is not None and user.name in HOMOGENEOUS_OPS:
            if user.operands[0] is not value or len(user.results) != 1:
                break
            clipped = clipped or _clips(user)
            value = user.results[0]
        user = _sole_user(value)
        if user is not None and _equalizable(user) and user.operands[0] is value:
            second = user
        if second is None:
            continue
        if clipped:
            skipped["a ReLU6 (clip) between the convs cannot take per-channel scales"] += 1
            continue
        if not (sole_weight(first.operands[1]) and sole_weight(second.operands[1])):
            skipped["a weight shared with other ops"] += 1
            continue
        bias = first.operands[2]
        if bias.owner.name != "top.none" and not sole_weight(bias):  # type: ignore[union-attr]
            skipped["a bias that is not a weight of its own"] += 1
            continue
        pairs.append(ConvPair(first, second))
    return pairs, skipped


def _equalizable(op: Operation) -> bool:
    """A conv (any groups) or a transposed conv of one group (filter [C_in, C_out, k...]:
    its channels are axis 1 out and axis 0 in)."""
    return op.name == "top.conv" or (op.name == "top.deconv" and _int_attr(op, "group", 1) == 1)


def _by_output_channel(op: Operation, w: np.ndarray) -> np.ndarray:
    """The filter as [output channels, rest] (a view order, not a copy of the numbers)."""
    if op.name == "top.deconv":
        w = np.moveaxis(w, 1, 0)
    return w.reshape(w.shape[0], -1)


def scales_from_ranges(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """s_c = sqrt(r1_c r2_c) / r2_c. A dead channel (a range below DEAD_RANGE of the
    largest on its side, zero included) keeps 1: its weights are rounding noise (ppocr_det
    has first-conv channels of 1e-34), and scaling them up by 1e17 would scale its bias
    (and so its activation) up as much, which no int8 scale survives."""
    r1, r2 = np.asarray(r1, np.float64), np.asarray(r2, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sqrt(r1 * r2) / r2
    live = (r1 > DEAD_RANGE * r1.max(initial=0.0)) & (r2 > DEAD_RANGE * r2.max(initial=0.0))
    return np.where(live & (r1 > 0) & (r2 > 0) & np.isfinite(s), s, 1.0)


def input_ranges(w2: np.ndarray, group2: int) -> np.ndarray:
    """r2_c for each input channel c of a conv with weights w2 [O, C / group2, ...]:
    channel c = g * (C / group2) + j is read by the rows of group g, column j."""
    per_group_in, out_per_group = w2.shape[1], w2.shape[0] // group2
    grouped = np.abs(w2.reshape(group2, out_per_group, per_group_in, -1)).max(axis=(1, 3))
    return grouped.reshape(-1).astype(np.float64)


def pair_scales(w1: np.ndarray, w2: np.ndarray, group2: int) -> np.ndarray:
    """The scales of conv1 (weights w1 [C, ...]) read by conv2 (weights w2
    [O, C / group2, ...], `group2` groups)."""
    r1 = np.abs(w1.reshape(w1.shape[0], -1)).max(axis=1).astype(np.float64)
    return scales_from_ranges(r1, input_ranges(w2, group2))


def _pair_ranges(module: ModuleOp, pair: ConvPair) -> tuple[np.ndarray, np.ndarray]:
    """r1 (the first op's weight range per output channel) and r2 (the second's per input
    channel)."""
    weights = weights_of(module)
    w1 = np.asarray(weights[weight_name(pair.first.operands[1].owner)], np.float64)  # type: ignore[arg-type]
    w2 = np.asarray(weights[weight_name(pair.second.operands[1].owner)], np.float64)  # type: ignore[arg-type]
    r1 = np.abs(_by_output_channel(pair.first, w1)).max(axis=1)
    if pair.second.name == "top.deconv":
        return r1, np.abs(w2.reshape(w2.shape[0], -1)).max(axis=1)
    return r1, input_ranges(w2, _int_attr(pair.second, "group", 1))


def _mismatch(r1: np.ndarray, r2: np.ndarray) -> float:
    if r1.shape != r2.shape:
        return 1.0
    live = (r1 > DEAD_RANGE * r1.max(initial=0.0)) & (r2 > DEAD_RANGE * r2.max(initial=0.0))
    if not live.any():
        return 1.0
    ratio = r1[live] / r2[live]
    return float(np.max(np.maximum(ratio, 1 / ratio)))


def _apply(module: ModuleOp, pair: ConvPair) -> float:
    """Equalize one pair in the weight table; returns max |log s_c| (how far it moved)."""
    weights = weights_of(module)
    w1_name, w2_name = weight_name(pair.first.operands[1].owner), weight_name(pair.second.operands[1].owner)  # type: ignore[arg-type]
    w1 = np.asarray(weights[w1_name], np.float64)
    w2 = np.asarray(weights[w2_name], np.float64)
    first_axis = 1 if pair.first.name == "top.deconv" else 0
    channels = w1.shape[first_axis]
    r1 = np.abs(_by_output_channel(pair.first, w1)).max(axis=1)
    if pair.second.name == "top.deconv":  # input channels on axis 0
        if w2.shape[0] != channels:
            return 0.0
        s = scales_from_ranges(r1, np.abs(w2.reshape(channels, -1)).max(axis=1))
        weights[w2_name] = (w2 * s.reshape((-1,) + (1,) * (w2.ndim - 1))).astype(np.float32)
    else:
        group2 = _int_attr(pair.second, "group", 1)
        if w2.shape[0] % group2 or w2.shape[1] * group2 != channels:
            return 0.0  # shapes that do not chain (the verifier would have said so)
        s = scales_from_ranges(r1, input_ranges(w2, group2))
        # Input channel c of conv2 is column c % per_group_in of the rows of group c // per_group_in.
        out_per_group, per_group_in = w2.shape[0] // group2, w2.shape[1]
        scaled = w2.reshape(group2, out_per_group, per_group_in, -1) * s.reshape(group2, 1, per_group_in)[..., None]
        weights[w2_name] = scaled.reshape(w2.shape).astype(np.float32)
    shape1 = [1] * w1.ndim
    shape1[first_axis] = -1
    weights[w1_name] = (w1 / s.reshape(shape1)).astype(np.float32)
    bias = pair.first.operands[2]
    if is_weight(bias):
        b_name = weight_name(bias.owner)  # type: ignore[arg-type]
        b = np.asarray(weights[b_name], np.float64)
        weights[b_name] = (b / s.reshape(b.shape)).astype(np.float32)
    return float(np.max(np.abs(np.log(s)))) if s.size else 0.0


def equalize(module: ModuleOp) -> EqualizationReport:
    """Equalize every conv pair of `module` in its weight table (in place), in rounds
    until the scales settle (at most MAX_ITERATIONS)."""
    pairs, skipped = find_pairs(module)
    report = EqualizationReport(pairs=pairs, skipped=skipped)
    if not pairs:
        return report

    def mismatch() -> float:
        return max(_mismatch(*_pair_ranges(module, p)) for p in pairs)

    report.mismatch_before = mismatch()
    for iteration in range(1, MAX_ITERATIONS + 1):
        moved = max(_apply(module, pair) for pair in pairs)
        report.iterations = iteration
        if moved < SETTLED:
            break
    report.mismatch_after = mismatch()
    return report
