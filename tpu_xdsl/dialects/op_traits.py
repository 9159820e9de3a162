"""Class members IRDL cannot express (traits such as terminators), keyed by op name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OP_MEMBERS: Mapping[str, Mapping[str, Any]] = {}
