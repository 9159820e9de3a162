"""The debugger behind `tpu-xdsl debug` (in the spirit of TPU-MLIR's tdb): one stage of a
model stepped op by op (TOP/TPU, on the xDSL interpreter) or instruction by instruction
(.tpumodel, on the device model), the other stages run whole as references.

- `points`: where a stepped stage can stop, and what a breakpoint matches;
- `cursors`: a stage run one op or instruction at a time;
- `session`: the stages, the input, the cursor, breakpoints and reference runs;
- `commands`: the command loop (run, step, next, break, print, compare, diff, ...);
- `terminal`: commands from a script or from the terminal (history, completion).
"""

from tpu_xdsl.inspect.debug.commands import COMMANDS, PROMPT, Debugger
from tpu_xdsl.inspect.debug.cursors import DebugError, DeviceCursor, InterpreterCursor
from tpu_xdsl.inspect.debug.points import Point, device_points, module_points
from tpu_xdsl.inspect.debug.session import Session
from tpu_xdsl.inspect.debug.terminal import HISTORY_ENV, run_script, run_terminal

__all__ = [
    "COMMANDS",
    "HISTORY_ENV",
    "PROMPT",
    "DebugError",
    "Debugger",
    "DeviceCursor",
    "InterpreterCursor",
    "Point",
    "Session",
    "device_points",
    "module_points",
    "run_script",
    "run_terminal",
]
