"""The snapshot as columns: per-node arrays that batch Filter and Score read at once.

Row i describes `infos[i]`, in the snapshot's node order. Resource columns hold
allocatable and requested amounts; labels, taints and images are indexed so that a
selector or a toleration is evaluated once per distinct value (or distinct taint
set), not once per node. `update(name)` re-reads one node's row after it changed
(a pod assumed or removed, a new node version), so a worker keeps its columns in
step with its snapshot in O(changed nodes); adding or removing a node reshapes them
(`reshaped`: rows copied by array indexing, only new nodes read).

Columns other than the fixed ones are built on first use (a resource, label key or
image some pod asked about) and kept up to date from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from shared.api.models import Taint
from shared.framework.selectors import (
    OBJECT_NAME_FIELD,
    ParsedNodeSelector,
    ParsedTerm,
    PreferredTerms,
    Requirement,
    parse_int64,
)

if TYPE_CHECKING:
    from shared.framework.types import NodeInfo

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

_ABSENT = -1  # label code of a node without the key
# Resource amounts are exact integers of any size; columns hold int64. An amount beyond
# this bound is clamped and marks the columns `oversized`, and batch plugins then leave
# resource checks to the per-node path, which computes in Python's integers.
SAFE_AMOUNT = 2**62
# Per-node counts of pods matching some selector, kept for the selectors asked about
# most recently (each is recounted on its node whenever a row changes).
MAX_POD_COUNT_COLUMNS = 16
PodCounter = Callable[["NodeInfo"], int]
# The per-node arrays every NodeColumns has (filled by _fill_fixed).
_FIXED_ROWS = (
    "num_pods",
    "nonzero_cpu",
    "nonzero_memory",
    "unschedulable",
    "has_ports",
    "taint_group",
)
TaintKey = tuple[tuple[str, str, str], ...]


class LabelColumn:
    """One label key: a code per node (-1: key absent) and the vocabulary of values."""

    def __init__(self, n: int) -> None:
        self.codes = np.full(n, _ABSENT, dtype=np.int64)
        self.code_of: dict[str, int] = {}
        self.values: list[str] = []
        self._ints: tuple[IntArray, BoolArray] | None = None  # for Gt / Lt

    def taken(self, rows: IntArray) -> LabelColumn:
        """A copy with the codes of `rows`, in that order (reshaped columns)."""
        col = LabelColumn(0)
        col.codes = self.codes[rows]
        col.code_of, col.values = dict(self.code_of), list(self.values)
        return col

    def code(self, value: str) -> int:
        code = self.code_of.get(value)
        if code is None:
            code = self.code_of[value] = len(self.values)
            self.values.append(value)
            self._ints = None
        return code

    def set(self, i: int, value: str | None) -> None:
        self.codes[i] = _ABSENT if value is None else self.code(value)

    def equals_any(self, values: Iterable[str]) -> BoolArray:
        """Nodes whose value is one of `values` (absent never matches)."""
        codes = [self.code_of[v] for v in values if v in self.code_of]
        if not codes:
            return np.zeros(len(self.codes), dtype=np.bool_)
        if len(codes) == 1:
            return self.codes == codes[0]
        table = np.zeros(len(self.values) + 1, dtype=np.bool_)
        table[np.asarray(codes) + 1] = True
        return table[self.codes + 1]

    def present(self) -> BoolArray:
        return self.codes != _ABSENT

    def lookup(self, values: dict[str, int] | dict[str, float], default: float = 0) -> FloatArray:
        """values[node's value] for every node; `default` where the node has no value
        or its value is not in `values`."""
        table = np.full(len(self.values) + 1, default, dtype=np.float64)
        for value, amount in values.items():
            code = self.code_of.get(value)
            if code is not None:
                table[code] = amount
        return table[self.codes]  # code -1 reads the extra last entry

    def compare(self, bound: int, greater: bool) -> BoolArray:
        """Gt / Lt: values that parse as int64 and compare; others never match."""
        if self._ints is None:
            parsed = [parse_int64(v) for v in self.values]
            ints = np.array([p if p is not None else 0 for p in parsed], dtype=np.int64)
            valid = np.array([p is not None for p in parsed], dtype=np.bool_)
            self._ints = (ints, valid)
        ints, valid = self._ints
        table = np.zeros(len(self.values) + 1, dtype=np.bool_)
        table[1:] = valid & ((ints > bound) if greater else (ints < bound))
        return table[self.codes + 1]


class ImageColumn:
    """One image name: its size on each node that has it (presence kept apart: size 0 is
    a legal size)."""

    def __init__(self, n: int) -> None:
        self.size = np.zeros(n, dtype=np.int64)
        self.present = np.zeros(n, dtype=np.bool_)

    def taken(self, rows: IntArray) -> ImageColumn:
        col = ImageColumn(0)
        col.size, col.present = self.size[rows], self.present[rows]
        return col


def _taint_key(taints: Sequence[Taint]) -> TaintKey:
    return tuple((t.key, t.value, t.effect) for t in taints)


class NodeColumns:
    """Columns over `infos` (nodes that exist; the snapshot's order)."""

    def __init__(self, infos: Sequence[NodeInfo]) -> None:
        self.infos = list(infos)
        self.n = n = len(self.infos)
        self.index = {info.name: i for i, info in enumerate(self.infos)}
        self.version = 0  # bumped on every row update, for caches keyed on the columns
        self.oversized = False  # some resource amount did not fit a column (SAFE_AMOUNT)
        # Bounds of every amount ever stored (never lowered): a plugin can tell from them
        # alone that its arithmetic cannot overflow, without reducing a column per pod.
        self.amount_bound = 0
        self.negative = False
        self.num_pods = np.zeros(n, dtype=np.int64)
        self.nonzero_cpu = np.zeros(n, dtype=np.int64)
        self.nonzero_memory = np.zeros(n, dtype=np.int64)
        self.unschedulable = np.zeros(n, dtype=np.bool_)
        self.has_ports = np.zeros(n, dtype=np.bool_)
        self.taint_group = np.zeros(n, dtype=np.int64)
        self.taint_groups: list[list[Taint]] = []
        self._taint_group_of: dict[TaintKey, int] = {}
        self._alloc: dict[str, IntArray] = {}
        self._requested: dict[str, IntArray] = {}
        self._labels: dict[str, LabelColumn] = {}
        self._images: dict[str, ImageColumn] = {}
        self._image_names: list[dict[str, int]] = [{} for _ in range(n)]
        self._pod_counts: dict[Hashable, tuple[IntArray, PodCounter]] = {}
        self._everyone: BoolArray | None = None
        # The node object each row was read from: a row whose NodeInfo still has it
        # re-reads only its pods.
        self._row_nodes: list[object] = [None] * n
        for name in (CPU, MEMORY, PODS):
            self.allocatable(name)
            self.requested(name)
        for i in range(n):
            self._fill_fixed(i)

    # --- rows -------------------------------------------------------------------

    def update(self, name: str) -> bool:
        """Re-read the row of node `name` from its NodeInfo; False if not a row here.
        What comes from the node object (allocatable, labels, taints, images) is read
        again only when the object is another one: most updates are pods coming and
        going."""
        i = self.index.get(name)
        if i is None:
            return False
        info = self.infos[i]
        self._fill_pods(i)
        if self._row_nodes[i] is not info.raw_node:
            self._fill_node(i)
        for res, col in self._requested.items():
            col[i] = self._amount(info.requested.get(res, 0))
        for counts, counter in self._pod_counts.values():
            counts[i] = counter(info)
        self.version += 1
        return True

    def update_pods(self, names: Iterable[str]) -> None:
        """Re-read what their pods make of the rows of nodes `names` (pod count, sums,
        ports, pod counts), their node objects unchanged (a refresh applied pod changes
        to their NodeInfos in place): one write per column for all of them, not one per
        node and column, and nothing of the node object read again."""
        rows = []
        for name in names:
            i = self.index.get(name)
            if i is None:
                continue
            if self._row_nodes[i] is not self.infos[i].raw_node:
                self.update(name)  # another node object: the whole row
            else:
                rows.append(i)
        if not rows:
            return
        infos = [self.infos[i] for i in rows]
        self.num_pods[rows] = [len(info.pods) for info in infos]
        self.has_ports[rows] = [bool(info.used_ports) for info in infos]
        self._put(self.nonzero_cpu, rows, [info.nonzero_cpu for info in infos])
        self._put(self.nonzero_memory, rows, [info.nonzero_memory for info in infos])
        for res, col in self._requested.items():
            self._put(col, rows, [info.requested.get(res, 0) for info in infos])
        for counts, counter in self._pod_counts.values():
            counts[rows] = [counter(info) for info in infos]
        self.version += 1

    def _put(self, col: IntArray, rows: list[int], values: list[int]) -> None:
        """col[rows] = values, each through `_amount` unless all are within what the
        columns already hold (then `_amount` would change nothing)."""
        if min(values) < 0 or max(values) > min(self.amount_bound, SAFE_AMOUNT):
            values = [self._amount(v) for v in values]
        col[rows] = values

    def reshaped(self, infos: Sequence[NodeInfo]) -> NodeColumns:
        """Columns over `infos` (nodes added, removed or reordered) that copy the row of
        every NodeInfo this one already holds (the same object) and read only the
        others, so a change to the set of nodes costs array copies, not a rebuild.
        Columns built on first use carry over."""
        infos = list(infos)
        if not self.n or not infos:
            return NodeColumns(infos)
        rows = [self.index.get(info.name, -1) for info in infos]
        fresh = [
            i
            for i, (info, r) in enumerate(zip(infos, rows, strict=True))
            if r < 0 or self.infos[r] is not info
        ]
        src = np.array([max(r, 0) for r in rows], dtype=np.int64)  # fresh rows: refilled
        new = object.__new__(NodeColumns)
        new.infos, new.n = infos, len(infos)
        new.index = {info.name: i for i, info in enumerate(infos)}
        new.version = self.version + 1
        new.oversized, new.amount_bound, new.negative = (
            self.oversized,
            self.amount_bound,
            self.negative,
        )
        for name in _FIXED_ROWS:
            setattr(new, name, getattr(self, name)[src])
        new.taint_groups = list(self.taint_groups)
        new._taint_group_of = dict(self._taint_group_of)
        new._alloc = {res: col[src] for res, col in self._alloc.items()}
        new._requested = {res: col[src] for res, col in self._requested.items()}
        new._labels = {key: col.taken(src) for key, col in self._labels.items()}
        new._images = {name: col.taken(src) for name, col in self._images.items()}
        new._image_names = [self._image_names[r] for r in src.tolist()]
        new._pod_counts = {
            key: (counts[src], counter) for key, (counts, counter) in self._pod_counts.items()
        }
        new._row_nodes = [self._row_nodes[r] for r in src.tolist()]
        new._everyone = None
        for i in fresh:
            new._row_nodes[i] = None  # read whole
            new.update(infos[i].name)
        return new

    def replace(self, info: NodeInfo) -> bool:
        """A new NodeInfo object for an existing row (a refreshed node)."""
        i = self.index.get(info.name)
        if i is None:
            return False
        self.infos[i] = info
        return self.update(info.name)

    def _fill_fixed(self, i: int) -> None:
        self._fill_pods(i)
        self._fill_node_fixed(i)

    def _fill_pods(self, i: int) -> None:
        info = self.infos[i]
        self.num_pods[i] = info.num_pods
        self.nonzero_cpu[i] = self._amount(info.nonzero_cpu)
        self.nonzero_memory[i] = self._amount(info.nonzero_memory)
        self.has_ports[i] = bool(info.used_ports)

    def _fill_node(self, i: int) -> None:
        """The row's columns that come from the node object."""
        self._fill_node_fixed(i)
        info = self.infos[i]
        for res, col in self._alloc.items():
            col[i] = self._amount(info.allocatable.get(res, 0))
        for key, lcol in self._labels.items():
            lcol.set(i, info.labels.get(key))
        sizes = self._image_names[i] = info.image_sizes
        for image, icol in self._images.items():
            icol.size[i] = sizes.get(image, 0)
            icol.present[i] = image in sizes

    def _fill_node_fixed(self, i: int) -> None:
        info = self.infos[i]
        spec = info.node.spec
        self.unschedulable[i] = spec.unschedulable
        self.taint_group[i] = self._taint_group_id(spec.taints)
        self._row_nodes[i] = info.raw_node

    def _taint_group_id(self, taints: list[Taint]) -> int:
        key = _taint_key(taints)
        gid = self._taint_group_of.get(key)
        if gid is None:
            gid = self._taint_group_of[key] = len(self.taint_groups)
            self.taint_groups.append(list(taints))
        return gid

    # --- columns built on first use -----------------------------------------------

    def allocatable(self, resource: str) -> IntArray:
        col = self._alloc.get(resource)
        if col is None:
            col = self._alloc[resource] = self._column(lambda i: i.allocatable.get(resource, 0))
        return col

    def requested(self, resource: str) -> IntArray:
        col = self._requested.get(resource)
        if col is None:
            col = self._requested[resource] = self._column(lambda i: i.requested.get(resource, 0))
        return col

    def has_allocatable(self, resource: str) -> BoolArray:
        return np.fromiter(
            (resource in info.allocatable for info in self.infos), dtype=np.bool_, count=self.n
        )

    def _column(self, value: Callable[[NodeInfo], int]) -> IntArray:
        amounts = (self._amount(value(info)) for info in self.infos)
        return np.fromiter(amounts, dtype=np.int64, count=self.n)

    def _amount(self, value: int) -> int:
        if value > self.amount_bound:
            self.amount_bound = value
        elif value < 0:
            self.negative = True
        if -SAFE_AMOUNT <= value <= SAFE_AMOUNT:
            return value
        self.oversized = True
        return SAFE_AMOUNT if value > 0 else -SAFE_AMOUNT

    def label(self, key: str) -> LabelColumn:
        col = self._labels.get(key)
        if col is None:
            col = self._labels[key] = LabelColumn(self.n)
            for i, info in enumerate(self.infos):
                value = info.labels.get(key)
                if value is not None:
                    col.set(i, value)
        return col

    def image(self, name: str) -> ImageColumn:
        col = self._images.get(name)
        if col is None:
            if not self._images:  # first image asked about: index every node's images
                self._image_names = [info.image_sizes for info in self.infos]
            col = self._images[name] = ImageColumn(self.n)
            for i, sizes in enumerate(self._image_names):
                if name in sizes:
                    col.size[i] = sizes[name]
                    col.present[i] = True
        return col

    def pod_counts(self, key: Hashable, counter: PodCounter) -> IntArray:
        """counter(node) for every node: how many of its pods match what `key` names
        (the same key must always come with an equivalent counter)."""
        entry = self._pod_counts.pop(key, None)  # re-inserted: most recent last
        if entry is None:
            if len(self._pod_counts) >= MAX_POD_COUNT_COLUMNS:
                del self._pod_counts[next(iter(self._pod_counts))]
            counts = np.fromiter((counter(i) for i in self.infos), np.int64, count=self.n)
            entry = (counts, counter)
        self._pod_counts[key] = entry
        return entry[0]

    def domain_sums(self, key: str, rows: IntArray, counts: IntArray) -> dict[str, int]:
        """Sum of `counts` at `rows` per value of label `key`, in the order the values
        first appear among the rows (rows must all have the label)."""
        col = self.label(key)
        codes = col.codes[rows]
        if len(codes) == 0:
            return {}
        sums = np.bincount(codes, weights=counts[rows], minlength=len(col.values))
        uniq, first = np.unique(codes, return_index=True)
        ordered = uniq[np.argsort(first)].tolist()
        return {col.values[c]: int(sums[c]) for c in ordered}

    @property
    def everyone(self) -> BoolArray:
        """All rows, read-only: the mask a batch Filter returns when it rejects no node,
        so that the runner can skip it without looking."""
        mask = self._everyone
        if mask is None or len(mask) != self.n:
            mask = self._everyone = np.ones(self.n, dtype=np.bool_)
            mask.flags.writeable = False
        return mask

    def name_mask(self, names: Iterable[str]) -> BoolArray:
        mask = np.zeros(self.n, dtype=np.bool_)
        rows = [self.index[name] for name in names if name in self.index]
        mask[rows] = True
        return mask

    def per_taint_group(
        self, value: Callable[[list[Taint]], int], rows: IntArray | None = None
    ) -> IntArray:
        """value(taints) for each node (or each of `rows`), once per distinct taint set."""
        table = np.fromiter(
            (value(taints) for taints in self.taint_groups),
            dtype=np.int64,
            count=len(self.taint_groups),
        )
        size = self.n if rows is None else len(rows)
        if len(table) == 0:
            return np.zeros(size, dtype=np.int64)
        if len(table) == 1:  # every node has the same taints (often none)
            return np.full(size, table[0], dtype=np.int64)
        return table[self.taint_group if rows is None else self.taint_group[rows]]


# --- selectors over columns (the batch twins of selectors.py's matches) -------------


class NodeRows(Sequence["NodeInfo"]):
    """The NodeInfos at some rows of the columns, listed only if a plugin walks them
    (most PreScore plugins never do, and listing thousands costs more than scoring)."""

    def __init__(self, nodes: NodeColumns, rows: IntArray) -> None:
        self._infos = nodes.infos
        self._rows = rows
        self._list: list[NodeInfo] | None = None

    def _items(self) -> list[NodeInfo]:
        if self._list is None:
            self._list = [self._infos[r] for r in self._rows.tolist()]
        return self._list

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, i: slice) -> list[NodeInfo]: ...

    def __getitem__(self, i: int | slice) -> NodeInfo | list[NodeInfo]:
        return self._items()[i]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self._items())


def requirement_mask(cols: NodeColumns, req: Requirement) -> BoolArray:
    col = cols.label(req.key)
    op = req.operator
    if op == "In":
        return col.equals_any(req.values)
    if op == "NotIn":
        return ~col.equals_any(req.values)
    if op == "Exists":
        return col.present()
    if op == "DoesNotExist":
        return ~col.present()
    return col.compare(req.bound, greater=op == "Gt")


def match_labels_mask(cols: NodeColumns, wanted: dict[str, str]) -> BoolArray:
    """labels.SelectorFromSet: every key present with an equal value."""
    mask = np.ones(cols.n, dtype=np.bool_)
    for key, value in wanted.items():
        mask &= cols.label(key).equals_any((value,))
    return mask


def term_mask(cols: NodeColumns, term: ParsedTerm) -> BoolArray:
    if term.errors:
        return np.zeros(cols.n, dtype=np.bool_)
    mask = np.ones(cols.n, dtype=np.bool_)
    for req in term.labels or ():
        mask &= requirement_mask(cols, req)
    for field in term.fields or ():
        # Only metadata.name is a node field; a requirement on another never equals.
        if field.key == OBJECT_NAME_FIELD:
            equal = cols.name_mask((field.value,))
        else:
            equal = np.full(cols.n, field.value == "", dtype=np.bool_)
        mask &= equal if field.equal else ~equal
    return mask


def node_selector_mask(cols: NodeColumns, selector: ParsedNodeSelector) -> BoolArray:
    mask = np.zeros(cols.n, dtype=np.bool_)
    for term in selector.terms:
        mask |= term_mask(cols, term)
    return mask


def preferred_terms_scores(cols: NodeColumns, preferred: PreferredTerms) -> IntArray:
    total = np.zeros(cols.n, dtype=np.int64)
    for weight, term in preferred.terms:
        total += np.where(term_mask(cols, term), weight, 0)
    return total
