"""Run every ONNX conformance case outside pytest and group the failures by cause.

    python -m tests.conformance.triage [--write]

Prints each group with its cases; `--write` rewrites expected_failures.py from
the result (review the diff: every group needs a reason a reader accepts).
"""

from __future__ import annotations

import argparse
import collections
import sys
import traceback
import warnings
from pathlib import Path

from tests.conformance import test_onnx_models, test_onnx_node
from tests.conformance.harness import run_case

# Op types of ONNX's training, sequence/optional/map, string and ML domains.
TRAINING = {"Adagrad", "Adam", "Momentum", "Gradient", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}
NON_TENSOR = {"SequenceEmpty", "SequenceInsert", "SequenceAt", "SequenceConstruct", "SequenceErase", "SequenceLength",
              "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
              "OptionalGetElement"}
STRINGS = {"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch", "TfIdfVectorizer", "LabelEncoder"}


def classify(model, error: BaseException) -> str:
    ops = {n.op_type for n in model.graph.node}
    name = type(error).__name__
    text = str(error).splitlines()[0] if str(error) else name
    if ops & TRAINING:
        return "training operators (gradients, optimizers, losses) are not inference"
    if ops & NON_TENSOR:
        return "sequences and optionals (also as If/Loop values) are not tensors with static shapes"
    if (
        ops & STRINGS
        or "string" in text.lower()
        or "dtype('<U" in text
        or "dtype('O')" in text
        or "dtype object" in text
    ):
        return "string tensors are not supported"
    if "no IR element type" in text or "target element type" in text:
        return "float8, float4, int4, uint4, int2 and e8m0 element types are not TOP element types"
    if "zero-size array to reduction" in text:
        return "reductions over zero-size tensors (max/min of an empty set)"
    if name == "UnsupportedOpError":
        op = text.split("ONNX op ", 1)[1].split(" ", 1)[0] if "ONNX op " in text else "?"
        return f"unsupported op: {op}"
    if name in ("ImportRuleError", "ShapeBindingError"):
        return "outside what the import rules handle (run-time shapes or attributes): " + _short(text)
    if isinstance(error, AssertionError):
        return _numerics_reason(model, str(error))
    return f"interpreter/internal {name}: " + _short(text)


def _numerics_reason(model, message: str) -> str:
    from onnx import TensorProto

    input_types = {i.type.tensor_type.elem_type for i in model.graph.input}
    if input_types & {TensorProto.FLOAT16, TensorProto.BFLOAT16}:
        return ("16-bit float results round differently: TOP computes in float32, "
                "the reference in float16/bfloat16 steps")
    if TensorProto.DOUBLE in input_types:
        return "float64 data beyond float32 range or precision: TOP computes in float32"
    if {n.op_type for n in model.graph.node} == {"Mod"}:
        return "Mod with an infinite divisor: a - b*floor(a/b) gives NaN where ONNX gives a"
    return "numerics differ beyond rtol/atol: " + _short(message.strip().splitlines()[0] if message.strip() else "")


def _short(text: str) -> str:
    import re

    text = re.sub(r"node '[^']*'", "node", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text[:90]


def cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in test_onnx_node.NODE_CASES:
            yield case.name, case.model, case.data_sets, case.rtol, case.atol
        import onnx

        for param in [*test_onnx_models._data_dir_cases("pytorch-converted"),
                      *test_onnx_models._data_dir_cases("pytorch-operator"),
                      *test_onnx_models._data_dir_cases("simple")]:
            case_dir = param.values[0]
            model = onnx.load(str(case_dir / "model.onnx"))
            data = [test_onnx_models._load_data_set(d) for d in sorted(case_dir.glob("test_data_set_*"))]
            yield case_dir.name, model, data, 1e-3, 1e-7


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    groups: dict[str, list[str]] = collections.defaultdict(list)
    passed = 0
    for name, model, data, rtol, atol in cases():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_case(model, data, rtol, atol)
            passed += 1
        except Exception as e:  # noqa: BLE001 - triage records every kind of failure
            groups[classify(model, e)].append(name)
            if args.verbose:
                traceback.print_exc()
    total = passed + sum(len(v) for v in groups.values())
    print(f"{passed} of {total} pass")
    for reason, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(names):5d}  {reason}")
    if args.write:
        path = Path(__file__).with_name("expected_failures.py")
        text = path.read_text()
        head = text.split("EXPECTED_FAILURES", 1)[0]
        tail = text.split("\n\n\ndef reason_for", 1)[1]
        lines = ["EXPECTED_FAILURES: dict[str, list[str]] = {"]
        for reason, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"    {reason!r}: [")
            lines.extend(f"        {n!r}," for n in sorted(names))
            lines.append("    ],")
        lines.append("}")
        path.write_text(head + "\n".join(lines) + "\n\n\ndef reason_for" + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
