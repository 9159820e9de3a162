"""The TOSA attributes and type whose printed forms IRDL's parametric form cannot give:
`!tosa.shape<N>` and `#tosa.resize_mode<M>`. xDSL's `#tosa.rounding_mode<M>` and
`#tosa.nan_mode<M>` print as MLIR does and are reused as they are."""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr
from xdsl.dialects.tosa import NanMode, NanModeAttr, RoundingMode, RoundingModeAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import ParametrizedAttribute, TypeAttribute
from xdsl.irdl import BaseAttr, irdl_attr_definition, param_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum


@irdl_attr_definition
class ShapeType(ParametrizedAttribute, TypeAttribute):
    """`!tosa.shape<N>`: a shape of rank N, the value of `tosa.const_shape`."""

    name = "tosa.shape"

    rank_: IntAttr = param_def(BaseAttr(IntAttr))  # pyright: ignore[reportAssignmentType]

    def __init__(self, rank: int):
        super().__init__(IntAttr(rank))

    @property
    def rank(self) -> int:
        return self.rank_.data

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.rank}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[IntAttr]:
        with parser.in_angle_brackets():
            return (IntAttr(parser.parse_integer(allow_boolean=False, allow_negative=False)),)


class ResizeMode(StrEnum):
    NEAREST_NEIGHBOR = "NEAREST_NEIGHBOR"
    BILINEAR = "BILINEAR"


@irdl_attr_definition
class ResizeModeAttr(EnumAttribute[ResizeMode]):
    """`#tosa.resize_mode<NEAREST_NEIGHBOR|BILINEAR>`."""

    name = "tosa.resize_mode"

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.data)

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> ResizeMode:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(ResizeMode)


TOSA_ATTRIBUTES = (ShapeType, ResizeModeAttr, RoundingModeAttr, NanModeAttr)

__all__ = [
    "TOSA_ATTRIBUTES",
    "NanMode",
    "NanModeAttr",
    "ResizeMode",
    "ResizeModeAttr",
    "RoundingMode",
    "RoundingModeAttr",
    "ShapeType",
]
