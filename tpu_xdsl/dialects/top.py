"""The TOP dialect's op and attribute classes, built from irdl/top.irdl (typed in top.pyi)."""

from tpu_xdsl.dialects import Top

globals().update({cls.__name__: cls for cls in (*Top.operations, *Top.attributes)})
