"""Registers the TOP and TPU dialects and the project's passes with xDSL's plugin system."""

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.universe import Universe


def _top() -> Dialect:
    from tpu_xdsl.dialects import Top

    return Top


def _tpu() -> Dialect:
    from tpu_xdsl.dialects import Tpu

    return Tpu


def _tosa() -> Dialect:
    from tpu_xdsl.dialects.tosa import Tosa

    return Tosa


# Dialects the project's own tools (tpu-opt, `ir_io`) use in place of xDSL's of the same
# name. Not in the universe: xdsl-opt refuses two dialects of one name.
REPLACED_DIALECTS = {"tosa": _tosa}


def _passes():
    from tpu_xdsl.transforms import get_all_passes

    return get_all_passes()


TPU_XDSL_UNIVERSE = Universe(
    all_dialects={"top": _top, "tpu": _tpu},
    all_passes=dict(_passes()),
)


def register_project_dialects(ctx: Context) -> None:
    """Register TOP, TPU and the project's TOSA in `ctx`, replacing xDSL's TOSA."""
    registered = ctx._registered_dialects  # pyright: ignore[reportPrivateUsage]
    for name, factory in {**TPU_XDSL_UNIVERSE.all_dialects, **REPLACED_DIALECTS}.items():
        registered[name] = factory
