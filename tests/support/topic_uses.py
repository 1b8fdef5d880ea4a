"""Which topics a process's code reads and writes, found by reading its source (`ast`): what
the process registry's rows are held to (tests/unit/webgym_common/test_process_topics.py).

The code of a process is what its entry function reaches by name: the functions, classes
and module-level names it refers to, and theirs in turn, across the modules of its own
top-level package (producers, processors or consumers) and of webgym_common. A class
reached brings all of its methods; a method of an object the code is handed, whose class
it never names, is not followed. Not followed either: webgym_common.topics and
webgym_common.processes (the registries name every topic), and anything else (the standard
library, other packages).

Each `Topic.X` in that code is classified by the call it is an argument of (CALLS, a table
of call names) as a read, a write or neither (a name, a spec, the suffix: NEITHER). A topic
held in a list or a variable first (`SOURCES = [...]`, `topics = [...]`) is classified by
the calls its name is passed to, a comprehension over it by the call it makes of each
element. A faust topic (`faust_topic`) is read unless the code sends on it. Any other place
of a `Topic.X` is an error naming file and line: the table is extended rather than the use
missed. The dead-letter topic is left out: every process may dead-letter what it cannot
read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

READ, WRITE, NEITHER = "read", "write", "neither"
# Calls by their name (the function's or the method's), and what a topic passed to them is.
CALLS = {
    "EventConsumer": READ,  # webgym_common.stream.bus: the bus layer's consumer
    "read_compacted": READ,  # webgym_common.stream.readers: a compacted topic as a table
    "read_events": READ,
    "events_since": READ,  # PartitionLog: one partition from a point in time
    "ReliableApp": READ,  # a faust app's sources
    "faust_topic": READ,  # an agent's input; a write when the code sends on it
    "publish": WRITE,  # EventProducer.publish
    "Publish": WRITE,  # webgym_common.stream.handlers: a record in a handler's effects
    "deliver": WRITE,  # producers.browser.retries: publish until a deadline
    "topic": NEITHER,  # EventProducer.topic: the full name, for a log line
    "topic_name": NEITHER,
    "topic_specs": NEITHER,  # topic_specs(...)[Topic.X]: its partitions, its retention
}
NOT_FOLLOWED = {"webgym_common.topics", "webgym_common.processes"}
DEAD_LETTERS = "DLQ"


class UnclassifiedUse(Exception):
    """A `Topic.X` in a place the table does not classify."""


@dataclass(frozen=True)
class Uses:
    reads: frozenset[str]  # Topic member names, e.g. "EPISODES"
    writes: frozenset[str]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    defs: dict[str, list[ast.stmt]] = field(default_factory=dict)  # top-level name -> its nodes
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # -> (module, name)
    reached: dict[str, list[ast.stmt]] = field(default_factory=dict)

    @classmethod
    def parse(cls, name: str, path: Path) -> Module:
        tree = ast.parse(path.read_text(), str(path))
        m = cls(name, path, tree)
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                m.parents[child] = node
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for stmt in tree.body:
            for target in defined_names(stmt):
                m.defs.setdefault(target, []).append(stmt)
            if isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:  # relative: from the package, up level - 1
                    parts = package.split(".")[:len(package.split(".")) - stmt.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in stmt.names:
                    m.imports[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        m.imports[alias.asname] = (alias.name, None)
        return m

    def where(self, node: ast.AST) -> str:
        return f"{self.name.replace('.', '/')}.py:{getattr(node, 'lineno', '?')}"


def defined_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else (
        [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


class Reader:
    """The modules of one process's code, parsed once, reached from its entry."""

    def __init__(self, package: str, roots: Sequence[Path] = (ROOT,)) -> None:
        self.scope = {package, "webgym_common"}
        self.roots = roots
        self.modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        if name not in self.modules:
            self.modules[name] = None
            if name.split(".")[0] in self.scope and name not in NOT_FOLLOWED:
                rel = Path(*name.split("."))
                for path in (p for root in self.roots
                             for p in (root / rel.with_suffix(".py"), root / rel / "__init__.py")):
                    if path.exists():
                        self.modules[name] = Module.parse(name, path)
                        break
        return self.modules[name]

    def reach(self, module: str, name: str) -> None:
        """Follow `name` of `module` and everything it refers to."""
        todo = [(module, name)]
        while todo:
            m, n = self.resolve(*todo.pop())
            if m is None or n is None or n in m.reached:
                continue
            m.reached[n] = m.defs[n]
            for stmt in m.defs[n]:
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Name) and node.id != n:
                        todo.append((m.name, node.id))

    def resolve(self, module: str, name: str) -> tuple[Module | None, str | None]:
        """Where `name` of `module` is defined: a top-level name of a module in scope, or a
        whole module (every top-level name reached) when the name is a module."""
        for _ in range(10):  # through re-exports (a package's __init__ importing a name)
            m = self.module(module)
            if m is None:
                return None, None
            if name in m.defs:
                return m, name
            if name not in m.imports:
                return None, None
            module, imported = m.imports[name]
            if imported is None or self.module(f"{module}.{imported}") is not None:
                whole = self.module(module if imported is None else f"{module}.{imported}")
                if whole is not None:
                    for top in whole.defs:
                        self.reach(whole.name, top)
                return None, None
            name = imported
        return None, None

    def topic_nodes(self) -> Iterator[tuple[Module, ast.Attribute]]:
        for m in filter(None, self.modules.values()):
            for stmts in m.reached.values():
                for stmt in stmts:
                    for node in ast.walk(stmt):
                        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                                and node.value.id == "Topic" and node.attr.isupper()):
                            yield m, node


def topic_uses(entry: str, roots: Sequence[Path] = (ROOT,)) -> Uses:
    """What the code reached from `entry` ("module:function") reads and writes."""
    module, function = entry.split(":")
    reader = Reader(module.split(".")[0], roots)
    found = reader.module(module)
    if found is None or function not in found.defs:
        raise LookupError(f"{entry}: no such function")
    reader.reach(module, function)
    reads, writes = set(), set()
    for m, node in reader.topic_nodes():
        if node.attr == DEAD_LETTERS:
            continue
        kinds = classify(m, node, set())
        if READ in kinds:
            reads.add(node.attr)
        if WRITE in kinds:
            writes.add(node.attr)
    return Uses(frozenset(reads), frozenset(writes))


def call_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def classify(m: Module, node: ast.expr, seen: set[ast.AST]) -> set[str]:
    """What the value at `node` (a topic, or a collection holding topics) is used for."""
    child: ast.AST = node
    while (parent := m.parents.get(child)) is not None:
        if isinstance(parent, ast.Attribute) and parent.attr == "value":
            return {NEITHER}  # Topic.X.value: the suffix, in a message
        if isinstance(parent, ast.Call) and child is not parent.func:
            return {by_call(m, parent)}
        if isinstance(parent, ast.keyword):
            child = parent
            continue
        if isinstance(parent, ast.Subscript) and child is parent.slice:
            if isinstance(parent.value, ast.Call) and call_name(parent.value) in CALLS:
                return {CALLS[str(call_name(parent.value))]}
            break
        if isinstance(parent, ast.comprehension) and child is parent.iter:
            comp = m.parents[parent]
            element = getattr(comp, "elt", None)
            if isinstance(element, ast.Call):
                return {by_call(m, element)}
            break
        if isinstance(parent, ast.Assign | ast.AnnAssign) and child is parent.value:
            return by_name(m, parent, seen)
        if isinstance(parent, ast.List | ast.Tuple | ast.Set | ast.BoolOp | ast.IfExp
                      | ast.Starred | ast.Subscript | ast.Lambda):
            child = parent
            continue
        break
    raise UnclassifiedUse(f"{m.where(node)}: a topic where the table says nothing "
                          f"({ast.unparse(m.parents.get(node, node))})")


def by_call(m: Module, call: ast.Call) -> str:
    name = call_name(call)
    if name not in CALLS:
        raise UnclassifiedUse(f"{m.where(call)}: a topic passed to {name}(), which the table "
                              f"does not classify ({ast.unparse(call)})")
    if name == "faust_topic" and sent_on(m, call):
        return WRITE
    return CALLS[name]


def sent_on(m: Module, call: ast.Call) -> bool:
    """Whether the code sends on what `call` made: `<x>.send(...)` for a name it is
    assigned to (`self.topic = faust_topic(...)`, then `self.topic.send(...)`)."""
    stmt: ast.AST = call
    while not isinstance(stmt, ast.stmt):
        stmt = m.parents[stmt]
    if not isinstance(stmt, ast.Assign):
        return False
    names = {n.id if isinstance(n, ast.Name) else n.attr for t in stmt.targets
             for n in ast.walk(t) if isinstance(n, ast.Name | ast.Attribute)}
    for node in ast.walk(m.tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "send"):
            target = node.func.value
            if (isinstance(target, ast.Name) and target.id in names
                    or isinstance(target, ast.Attribute) and target.attr in names):
                return True
    return False


def by_name(m: Module, assign: ast.Assign | ast.AnnAssign, seen: set[ast.AST]) -> set[str]:
    """A collection of topics given a name: what each use of the name does with it, within
    the function that assigned it (or the module, for a module-level name)."""
    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    if not names or assign in seen:
        raise UnclassifiedUse(f"{m.where(assign)}: topics assigned to {ast.unparse(targets[0])}")
    seen.add(assign)
    scope: ast.AST = assign
    while not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
        scope = m.parents[scope]
    within = [scope] if not isinstance(scope, ast.Module) else [
        stmt for stmts in m.reached.values() for stmt in stmts]
    kinds: set[str] = set()
    for node in (n for top in within for n in ast.walk(top)):
        if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            kinds |= classify(m, node, seen)
    if not kinds:
        raise UnclassifiedUse(f"{m.where(assign)}: topics assigned to {sorted(names)}, "
                              "never used")
    return kinds


def difference(process: str, reads: Sequence[str], writes: Sequence[str], uses: Uses) -> str:
    """What a row declares (Topic member names) and its code does not, and the other way
    round, one line each; "" when they agree."""
    lines = []
    for verb, declared, found in (("reads", set(reads), uses.reads),
                                  ("writes", set(writes), uses.writes)):
        lines += [f"{process}: its code {verb} {t}, its row does not say so"
                  for t in sorted(found - declared)]
        lines += [f"{process}: its row says it {verb} {t}, its code does not"
                  for t in sorted(declared - found)]
    return "\n".join(lines)
