"""A layered (Sugiyama-style) drawing of a dataflow graph: layers top to bottom, few crossings.

Used by `tpu-xdsl report` to draw a model's layers. The steps, each linear or close to it
so that a 500-op model lays out in a fraction of a second:

1. layer = longest path from the inputs (so every edge points down);
2. an edge that skips layers gets a chain of dummy points, one per layer it crosses, that
   take part in the ordering like nodes, so long edges run between nodes, not through them;
3. order within each layer: a few down and up sweeps of the barycenter heuristic;
4. x: a few passes pulling each node towards the mean x of its neighbours, keeping the
   order and the minimum gaps (the mean of the leftmost and rightmost placements that
   honour the gaps honours them too).

No xDSL and no drawing here: nodes in, coordinates and edge polylines out.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

SWEEPS = 4  # down + up barycenter sweeps; more rarely removes another crossing
X_PASSES = 4


@dataclass
class Layout:
    """Node centers (`x`) and tops (`y`), one polyline per edge in the order given (from the
    bottom of its producer to the top of its consumer, through its dummy points; empty for
    an edge that points backwards), the drawing's size."""

    x: dict[Hashable, float]
    y: dict[Hashable, float]
    depth: dict[Hashable, int]
    edges: list[list[tuple[float, float]]]
    width: float
    height: float


def layers_by_longest_path(nodes: Sequence[Hashable], edges: Sequence[tuple[Hashable, Hashable]]) -> dict:
    """Each node's depth: 0 for nodes without producers, else 1 + the deepest producer.
    Edges that would close a cycle (a consumer listed before its producer) are ignored."""
    index = {node: i for i, node in enumerate(nodes)}
    preds: dict[Hashable, list[Hashable]] = {node: [] for node in nodes}
    for u, v in edges:
        if index[u] < index[v]:
            preds[v].append(u)
    depth: dict[Hashable, int] = {}
    for node in nodes:  # program order is a topological order of the forward edges
        depth[node] = 1 + max((depth[u] for u in preds[node]), default=-1)
    return depth


def layered_layout(
    nodes: Sequence[Hashable],
    edges: Sequence[tuple[Hashable, Hashable]],
    node_width: float = 170,
    node_height: float = 38,
    layer_gap: float = 34,
    node_gap: float = 22,
    dummy_width: float = 8,
    margin: float = 16,
) -> Layout:
    """Lay out `nodes` (in program order: producers before consumers) and `edges`
    (producer, consumer) top to bottom."""
    depth = layers_by_longest_path(nodes, edges)
    index = {node: i for i, node in enumerate(nodes)}

    # Dummy chains: item ids are ("node", n) and ("dummy", edge number, step).
    item_depth: dict[tuple, int] = {("node", n): depth[n] for n in nodes}
    width: dict[tuple, float] = {("node", n): node_width for n in nodes}
    up: dict[tuple, list[tuple]] = {item: [] for item in item_depth}
    down: dict[tuple, list[tuple]] = {item: [] for item in item_depth}
    chains: list[list[tuple]] = []
    for e, (u, v) in enumerate(edges):
        if index[u] >= index[v]:
            chains.append([])
            continue
        chain: list[tuple] = [("node", u)]
        for step in range(depth[u] + 1, depth[v]):
            dummy = ("dummy", e, step)
            item_depth[dummy], width[dummy] = step, dummy_width
            up[dummy], down[dummy] = [], []
            chain.append(dummy)
        chain.append(("node", v))
        for a, b in itertools.pairwise(chain):
            down[a].append(b)
            up[b].append(a)
        chains.append(chain)

    layers: list[list[tuple]] = [[] for _ in range(max(item_depth.values(), default=-1) + 1)]
    for item, d in item_depth.items():  # nodes first, in program order; dummies after
        layers[d].append(item)
    position = {item: i for layer in layers for i, item in enumerate(layer)}

    def reorder(layer: list[tuple], neighbours: dict[tuple, list[tuple]]) -> None:
        def key(item: tuple) -> float:
            near = neighbours[item]
            return sum(position[n] for n in near) / len(near) if near else position[item]

        layer.sort(key=key)
        for i, item in enumerate(layer):
            position[item] = i

    for _ in range(SWEEPS):
        for layer in layers[1:]:
            reorder(layer, up)
        for layer in reversed(layers[:-1]):
            reorder(layer, down)
    for layer in layers[1:]:
        reorder(layer, up)

    x: dict[tuple, float] = {}
    for layer in layers:
        at = 0.0
        for item in layer:
            x[item] = at + width[item] / 2
            at += width[item] + node_gap

    def gap(a: tuple, b: tuple) -> float:
        return (width[a] + width[b]) / 2 + node_gap

    def place(layer: list[tuple], neighbours: dict[tuple, list[tuple]]) -> None:
        wanted = [
            sum(x[n] for n in neighbours[item]) / len(neighbours[item]) if neighbours[item] else x[item]
            for item in layer
        ]
        left = wanted[:]
        for i in range(1, len(layer)):
            left[i] = max(wanted[i], left[i - 1] + gap(layer[i - 1], layer[i]))
        right = wanted[:]
        for i in range(len(layer) - 2, -1, -1):
            right[i] = min(wanted[i], right[i + 1] - gap(layer[i], layer[i + 1]))
        for i, item in enumerate(layer):
            x[item] = (left[i] + right[i]) / 2

    for _ in range(X_PASSES):
        for layer in layers[1:]:
            place(layer, up)
        for layer in reversed(layers[:-1]):
            place(layer, down)

    shift = margin - min((x[item] - width[item] / 2 for item in x), default=0.0)
    for item in x:
        x[item] += shift
    row = node_height + layer_gap
    top = {item: margin + d * row for item, d in item_depth.items()}

    polylines = []
    for chain in chains:
        if not chain:
            polylines.append([])
            continue
        first, last = chain[0], chain[-1]
        points = [(x[first], top[first] + node_height)]
        for dummy in chain[1:-1]:
            points += [(x[dummy], top[dummy]), (x[dummy], top[dummy] + node_height)]
        points.append((x[last], top[last]))
        polylines.append(points)

    right_edge = max((x[item] + width[item] / 2 for item in x), default=0.0)
    return Layout(
        x={n: x[("node", n)] for n in nodes},
        y={n: top[("node", n)] for n in nodes},
        depth=depth,
        edges=polylines,
        width=right_edge + margin,
        height=margin * 2 + len(layers) * row - layer_gap,
    )
