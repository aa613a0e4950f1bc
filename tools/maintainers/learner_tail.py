"""The learner edition's cells that differ from the course's, run in the course notebook's own kernel (issue 31).

A learner notebook (``tools/student.py``) is its source notebook without the solution cells, with the cell after
each one cleared. Before the first solution every learner cell is the source's cell, run on the same state, so
the course's nbval run proves it (``tests/test_student.py`` holds the cells equal). From the first solution on
the learner's state differs: the answers stay ``None``, a stubbed function raises ``NotImplementedError``, an
experiment whose knob is unset does not run. Those cells are the notebook's **tail**.

``tests/notebooks/harness.py`` appends the tail to each notebook's nbval items: after the course's last cell, in the
same kernel, nbval runs the learner's cells from the tail's start to the end, compared as the learner edition
compares them (a cleared cell runs unexecuted, so without comparison; a kept cell against its committed output),
named ``notebooks/05_communication.ipynb::Learner cell 17`` (the number of the course's ``Cell 17``). That is a
second or two per notebook, instead of a second nbval run of the whole learner notebook.

The premise: when the tail starts, the kernel holds the course's *final* state, not the learner's state at the
tail's first cell. The two differ only in the names that a course cell from the tail's start on binds, so no
tail cell may read such a name before a tail cell (or an earlier statement) binds it again.
:func:`premise_violations` checks that on the cells' code (:func:`cell_names`); :func:`tail` starts the tail at
the latest cell where it holds (normally the placeholder before the first solution) and refuses a notebook where
it holds nowhere. What names cannot show -- a removed cell's files or processes that a later cell reads -- the
notebooks must not do (a solution cell binds values; it launches nothing that a later kept cell reads).
"""

from __future__ import annotations

import ast

import nbformat

from tools import student


def _scope_reads(node: ast.AST, params: set[str]) -> set[str]:
    """Names a function, lambda or comprehension reads from outside itself (its own locals left out)."""
    local = set(params)
    reads: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            local.add(child.id)
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) and child.id not in local:
            reads.add(child.id)
    return reads


def _statement_names(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    """(names the statement binds at the top level, names it reads) for one top-level statement."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        params = ({a.arg for a in ast.walk(stmt.args) if isinstance(a, ast.arg)}
                  if not isinstance(stmt, ast.ClassDef) else set())
        return {stmt.name}, _scope_reads(stmt, params)
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in stmt.names}, set()
    bound: set[str] = set()
    reads: set[str] = set()
    inner: set[int] = set()
    for child in ast.walk(stmt):
        if isinstance(child, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            params = {a.arg for a in ast.walk(child.args) if isinstance(a, ast.arg)} if isinstance(
                child, ast.Lambda) else set()
            reads |= _scope_reads(child, params)
            inner |= {id(n) for n in ast.walk(child)}
    for child in ast.walk(stmt):
        if isinstance(child, ast.Name) and id(child) not in inner:
            (reads if isinstance(child.ctx, ast.Load) else bound).add(child.id)
    return bound, reads


def _flow(stmts: list[ast.stmt], bound: set[str]) -> set[str]:
    """Names the statements read before they bind them, in execution order; ``bound`` gains what they bind.

    Compound statements are followed inside (a ``for`` binds its target before its body reads it); a branch's
    bindings count as made (the learner's cells bind their names unconditionally).
    """
    early: set[str] = set()

    def read(*nodes: ast.AST | None) -> None:
        for node in nodes:
            if node is not None:
                early.update(_statement_names(ast.Expr(value=node))[1] - bound)   # type: ignore[arg-type]

    def bind(node: ast.AST | None) -> None:
        if node is not None:
            bound.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))

    for stmt in stmts:
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            read(stmt.iter)
            bind(stmt.target)
            early |= _flow(stmt.body + stmt.orelse, bound)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                read(item.context_expr)
                bind(item.optional_vars)
            early |= _flow(stmt.body, bound)
        elif isinstance(stmt, (ast.If, ast.While)):
            read(stmt.test)
            early |= _flow(stmt.body + stmt.orelse, bound)
        elif isinstance(stmt, ast.Try):
            early |= _flow(stmt.body, bound)
            for handler in stmt.handlers:
                read(handler.type)
                if handler.name:
                    bound.add(handler.name)
                early |= _flow(handler.body, bound)
            early |= _flow(stmt.orelse + stmt.finalbody, bound)
        else:
            names, reads = _statement_names(stmt)
            early |= reads - bound
            bound |= names
    return early


def _parse(source: str) -> list[ast.stmt]:
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    return ast.parse(code).body


def cell_names(source: str, bound: set[str] | None = None) -> tuple[set[str], set[str]]:
    """(names a code cell binds, names it reads before binding them); IPython magics and shell lines dropped.

    Args:
        source: a code cell's source.
        bound: names already bound before the cell (their reads do not count); updated in place.

    Returns:
        The names the cell binds, and the names it reads first.
    """
    before = set(bound or ())
    after = set(before)
    early = _flow(_parse(source), after)
    if bound is not None:
        bound |= after
    return after - before, early


def _code_cells(nb: nbformat.NotebookNode) -> list[int]:
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def premise_violations(nb: nbformat.NotebookNode, start: int) -> list[str]:
    """Tail cells that would read a course value instead of the learner's, if the tail started at cell ``start``.

    Args:
        nb: the course (source) notebook.
        start: index (in ``nb.cells``) of the tail's first cell.

    Returns:
        ``"cell 38 reads ['fit']"`` per offending learner cell (empty when the premise holds).
    """
    changed = set()   # bound by a course cell from start on: the kernel holds the course's final value
    for index in _code_cells(nb):
        if index >= start:
            changed |= cell_names(nb.cells[index].source)[0]
    learner, changes = student.learner_notebook(nb)
    kept = [i for i in range(len(nb.cells)) if i not in changes.removed]
    rebound: set[str] = set()
    found = []
    for index, cell in zip(kept, learner.cells):
        if index < start or cell.cell_type != "code":
            continue
        stale = cell_names(cell.source, rebound)[1] & changed
        if stale:
            found.append(f"cell {index} reads {sorted(stale)}")
    return found


def tail(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    """The learner cells to run after the course's last cell: (code-cell number in the course, learner cell).

    Args:
        nb: the course (source) notebook.

    Returns:
        The tail's code cells (empty when the notebook has no solution cell).

    Raises:
        ValueError: the premise (module docstring) holds at no start: which cells read which names.
    """
    learner, changes = student.learner_notebook(nb)
    solutions = [i for i in changes.removed if nb.cells[i].cell_type == "code"]
    if not solutions:
        return []
    codes = _code_cells(nb)
    candidates = [i for i in reversed(codes) if i <= solutions[0] and i not in changes.removed] or [solutions[0]]
    violations: list[str] = []
    for start in [solutions[0]] + candidates:
        violations = premise_violations(nb, start)
        if not violations:
            break
    else:
        raise ValueError("the learner's cells read values that the course's later cells set, from any start: "
                         + "; ".join(violations) + ". Give such a name its own value in the learner's cells.")
    kept = [i for i in range(len(nb.cells)) if i not in changes.removed]
    number = {index: n for n, index in enumerate(codes)}
    return [(number[index], cell) for index, cell in zip(kept, learner.cells)
            if index >= start and cell.cell_type == "code"]
