"""Import rules: recurrent."""

from __future__ import annotations
