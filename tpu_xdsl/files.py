"""Files written whole or not at all (no xDSL: the device package uses this too)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, write, binary: bool = False) -> None:
    """Call `write(file)` on a temporary file beside `path`, then rename it into place.

    Readers never see a partial file, and a failure leaves nothing behind. The
    file gets the usual permissions (0666 less the umask), not mkstemp's 0600.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
