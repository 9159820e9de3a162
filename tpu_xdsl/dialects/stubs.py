"""Generate `.pyi` stubs for the IRDL-built dialects so typed code sees their ops.

Run `python -m tpu_xdsl.dialects.stubs` after editing an IRDL file; a test
fails while the committed stubs differ from what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

from xdsl.ir import Dialect
from xdsl.irdl import AttrConstraint, VarConstraint
from xdsl.utils.dialect_stub import DialectStubGenerator

from tpu_xdsl.dialects.irdl_loader import FieldConstraint, FirstOf


class IrdlStubGenerator(DialectStubGenerator):
    """xDSL's stub generator, taught the loader's own constraint classes."""

    def _generate_constraint_type(self, constraint: AttrConstraint) -> str:
        match constraint:
            case FieldConstraint():
                return self._generate_constraint_type(constraint.constr)
            case VarConstraint():
                return self._generate_constraint_type(constraint.constraint)
            case FirstOf():
                names = dict.fromkeys(
                    self._generate_constraint_type(c) for c in constraint.alternatives
                )
                return " | ".join(names)
            case _:
                return super()._generate_constraint_type(constraint)


def stub_text(dialect: Dialect) -> str:
    header = (
        f'"""Typing stub for the {dialect.name} dialect, generated from '
        f'irdl/{dialect.name}.irdl by tpu_xdsl.dialects.stubs; do not edit."""\n'
    )
    return header + IrdlStubGenerator(dialect).generate_dialect_stubs()


def stub_paths() -> dict[str, Path]:
    here = Path(__file__).parent
    return {"top": here / "top.pyi", "tpu": here / "tpu.pyi"}


def main() -> int:
    from tpu_xdsl.dialects import Top, Tpu

    for dialect in (Top, Tpu):
        path = stub_paths()[dialect.name]
        path.write_text(stub_text(dialect))
        print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
