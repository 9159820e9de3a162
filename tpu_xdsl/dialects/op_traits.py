"""Class members IRDL cannot express (traits such as terminators), keyed by op name.

The op classes are generated from IRDL, so traits here name ops by their
qualified name rather than by class (xDSL's `HasParent` needs a class).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation
from xdsl.irdl import traits_def
from xdsl.traits import IsTerminator, OpTrait
from xdsl.utils.exceptions import VerifyException


@dataclass(frozen=True)
class HasParentNamed(OpTrait):
    """The op's parent op is named `parent` (a detached op is not checked)."""

    parent: str

    def verify(self, op: Operation) -> None:
        parent = op.parent_op()
        if parent is not None and parent.name != self.parent:
            raise VerifyException(
                f"'{op.name}' expects parent op '{self.parent}', not '{parent.name}'"
            )


@dataclass(frozen=True)
class YieldsResults(OpTrait):
    """Each single-block region ends in `terminator`, whose operands match the
    op's results in number and types."""

    terminator: str

    def verify(self, op: Operation) -> None:
        for region in op.regions:
            block = region.last_block
            last = None if block is None else block.last_op
            if last is None or last.name != self.terminator:
                found = "nothing" if last is None else f"'{last.name}'"
                raise VerifyException(
                    f"'{op.name}' body must end in '{self.terminator}', found {found}"
                )
            yielded = last.operand_types
            results = op.result_types
            if len(yielded) != len(results):
                raise VerifyException(
                    f"'{op.name}' has {len(results)} results but its "
                    f"'{self.terminator}' yields {len(yielded)} "
                    f"value{'' if len(yielded) == 1 else 's'}"
                )
            for i, (y, r) in enumerate(zip(yielded, results)):
                if y != r:
                    raise VerifyException(
                        f"'{op.name}' result {i} has type {r} but its "
                        f"'{self.terminator}' yields {y}"
                    )


OP_MEMBERS: Mapping[str, Mapping[str, Any]] = {
    "tpu.yield": {"traits": traits_def(IsTerminator(), HasParentNamed("tpu.group"))},
    "tpu.group": {"traits": traits_def(YieldsResults("tpu.yield"))},
}
