"""The TPU dialect's op and attribute classes, built from irdl/tpu.irdl (typed in tpu.pyi)."""

from tpu_xdsl.dialects import Tpu

globals().update({cls.__name__: cls for cls in (*Tpu.operations, *Tpu.attributes)})
