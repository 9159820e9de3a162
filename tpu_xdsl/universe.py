"""Registers the TOP and TPU dialects and the project's passes with xDSL's plugin system."""

from xdsl.ir import Dialect
from xdsl.universe import Universe


def _top() -> Dialect:
    from tpu_xdsl.dialects import Top

    return Top


def _tpu() -> Dialect:
    from tpu_xdsl.dialects import Tpu

    return Tpu


def _passes():
    from tpu_xdsl.transforms import get_all_passes

    return get_all_passes()


TPU_XDSL_UNIVERSE = Universe(
    all_dialects={"top": _top, "tpu": _tpu},
    all_passes=dict(_passes()),
)
