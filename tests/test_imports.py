"""webinfer's imports flow one way: no module imports itself back through others (a cycle), neither does a
subpackage (runtime/ -> llm/ -> runtime/ is one, whichever modules carry it), the run side (runtime/, llm/,
format/, tasks/, artifact.py, page.py) imports only run-side and shared standard-library modules, never the builder,
and graph/ never imports codegen/. Read from the source with `ast`, so imports inside functions count as much
as those at the top (tests/runtime/test_stdlib_only.py runs the run side with numpy, onnx, ... unimportable)."""

from __future__ import annotations

import ast
import functools
import os

import webinfer

PKG = os.path.dirname(os.path.abspath(webinfer.__file__))

# What the run side (it runs in Pyodide, standard library only) may import from webinfer.
RUN_SIDE = ("webinfer.runtime", "webinfer.llm", "webinfer.format", "webinfer.artifact", "webinfer.page",
            "webinfer.page_cpu", "webinfer.page_recover", "webinfer.tasks")
SHARED = ("webinfer", "webinfer.errors", "webinfer.dtypes", "webinfer.dims")


def modules() -> dict[str, str]:
    """Dotted name -> file, for every module of the package (a package is its `__init__`)."""
    found = {}
    for root, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, f), os.path.dirname(PKG))[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                found[".".join(rel)] = os.path.join(root, f)
    return found


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every import statement, at any depth, except under `if TYPE_CHECKING:` (it never runs)."""
    for node in ast.iter_child_nodes(tree):
        if _type_checking(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


@functools.cache
def _tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _source_of(node: ast.ImportFrom, name: str, is_pkg: bool) -> str:
    """The dotted module a `from ... import` in module ``name`` reads from (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = name.split(".")[: len(name.split(".")) - node.level + is_pkg]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {imported webinfer module: line} (read once; callers do not change it)."""
    mods = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        is_pkg = path.endswith("__init__.py")
        edges: dict[str, int] = {}
        for node in _imports(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                src = _source_of(node, name, is_pkg)
                # `from pkg import mod` imports the submodule; `from mod import name` imports mod.
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            for t in targets:
                while t and t not in mods:  # `import webinfer.x.y` of a name inside a module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges.setdefault(t, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    # a function-level relative import, and a module-level one, both resolved to the module they load
    assert "webinfer.runtime.native" in graph["webinfer.runtime.inference"]
    assert "webinfer.errors" in graph["webinfer.artifact"]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    lines = []
    for comp in found:
        for m in comp:
            lines += [f"  {m} -> {t} (line {ln})" for t, ln in graph[m].items() if t in comp]
    assert not found, f"{len(found)} import cycle(s) inside webinfer/:\n" + "\n".join(lines)


def _packages(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, tuple]]:
    """The graph between webinfer's top-level subpackages and modules (webinfer.runtime, webinfer.dims, ...),
    each edge with the first import that makes it (module, module, line)."""
    def top(m: str) -> str:
        return ".".join(m.split(".")[:2])

    out: dict[str, dict[str, tuple]] = {}
    for m, edges in sorted(graph.items()):
        out.setdefault(top(m), {})
        for t, ln in edges.items():
            if top(t) != top(m):
                out[top(m)].setdefault(top(t), (m, t, ln))
    return out


def test_no_cycles_between_subpackages():
    packages = _packages(import_graph())
    found = cycles(packages)
    lines = [f"  {a} -> {b}: {m} imports {t} (line {ln})" for comp in found for a in comp
             for b, (m, t, ln) in packages[a].items() if b in comp]
    assert not found, f"{len(found)} import cycle(s) between webinfer's subpackages:\n" + "\n".join(lines)


def test_graph_does_not_import_codegen():
    bad = [f"{m} imports {t} (line {ln})" for m, edges in import_graph().items() if _within(m, ("webinfer.graph",))
           for t, ln in edges.items() if _within(t, ("webinfer.codegen",))]
    assert not bad, "\n".join(bad)


def test_run_side_imports_no_build_side_module():
    graph = import_graph()
    bad = [f"{m} imports {t} (line {ln})" for m, edges in graph.items() if _within(m, RUN_SIDE)
           for t, ln in edges.items() if not _within(t, RUN_SIDE) and t not in SHARED]
    assert not bad, "the run side (standard library, Pyodide) must not import the builder:\n" + "\n".join(bad)


def _private_uses(name: str, path: str, mods: dict[str, str]):
    """(webinfer module, private name, line) for each `from mod import _x` and each `mod._x` through a module
    alias, in one module's source."""
    is_pkg, tree = path.endswith("__init__.py"), _tree(path)
    aliases: dict[str, str] = {}
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in mods})
            continue
        src = _source_of(node, name, is_pkg)
        for a in node.names:
            if f"{src}.{a.name}" in mods:
                aliases[a.asname or a.name] = f"{src}.{a.name}"
            elif a.name.startswith("_") and not a.name.startswith("__") and src in mods:
                yield src, a.name, node.lineno
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            yield aliases[node.value.id], node.attr, node.lineno


def test_no_private_name_crosses_a_subpackage():
    """A private name (`_x`) is a module's own or its package's: another subpackage that needs it gets a public
    name, so that a module's public surface is what the rest of webinfer can lean on."""
    mods = modules()

    def package(m: str) -> str:
        return m.rpartition(".")[0] if not mods[m].endswith("__init__.py") else m

    bad = [f"{m} uses {src}.{attr} (line {ln})" for m, path in sorted(mods.items())
           for src, attr, ln in _private_uses(m, path, mods) if package(src) != package(m)]
    assert not bad, "\n".join(bad)
