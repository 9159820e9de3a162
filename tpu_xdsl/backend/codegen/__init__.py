"""Codegen: an addressed TPU module (`tpu-assign-memory`) -> a device program (`TpuModel`).

Op by op, in program order:

- data movement that only reorders elements (reshape, permute, slice, expand,
  depth2space, split, concat without rescaling, pad, tile) becomes DMA copies
  DDR -> DDR through strided views (`dma`, `strided`);
- every other op computes in local memory over slices of its output sized so
  that the slices fit (`allocation`: N first, then H with the halos of windows,
  then C), per slice DMA loads, one compute, one DMA store (`slices`); a float
  conv too large even so is also cut along its input channels (`channel_parts`);
- LSTM and GRU split over the lanes by hidden unit (`backend.recurrent`);
- a `tpu.group` runs as a 3-stage pipeline over its steps (`groups`).

`driver` walks the module and builds the model; `state` holds what they share.
DDR hazards need no tokens: every DDR access is on the DMA queue, which runs
in program order. Local-memory hazards between the two engines are explicit
dependencies. A group's adjacent weights load as one lane image where that is
faster (`constants`, which lays the coefficients out again at the end). Last,
`dma_order` reorders the DMA queue where the timing model says the program
gets faster, every hazard kept (found from what each instruction reads and
writes). With layer groups, `codegen` emits the program each way of loading
the groups' weights (`driver.POLICIES`) and keeps the fastest.
"""

from tpu_xdsl.backend.codegen.driver import Codegen, codegen
from tpu_xdsl.backend.codegen.state import CodegenError, op_macs

__all__ = ["Codegen", "CodegenError", "codegen", "op_macs"]
