"""What the ``--scale-lr`` tests share (issue 52): the four cases of the course's rule, and a check that a script's
learning rate comes from its ``learning_rate`` function, which calls ``schedules.scaled_lr``.

The rule's cases are ``(optimizer, N, rate from --lr 0.001)``: linear for SGD, by the square root for Adam.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

RULE_CASES = [("sgd", 2, 0.002), ("adam", 2, 0.001 * math.sqrt(2)), ("adam", 4, 0.002), ("sgd", 1, 0.001)]


def lr_problems(script: Path) -> list[str]:
    """Where ``script`` sets a rate other than through the rule: every assignment to ``lr`` must be a call of
    ``learning_rate(...)``, ``learning_rate`` must call ``scaled_lr``, and no line may multiply ``args.lr`` itself
    (``args.lr * replicas``, ``args.lr * math.sqrt(world)``). An empty list: the printed ``lr`` is the rule's."""
    tree = ast.parse(script.read_text())
    problems = []
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    rule = functions.get("learning_rate")
    if rule is None or not any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None))
                               == "scaled_lr" for n in ast.walk(rule)):
        problems.append(f"{script.name}: no learning_rate() that calls schedules.scaled_lr")
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "lr" for t in node.targets):
            called = node.value.func if isinstance(node.value, ast.Call) else None
            if not (isinstance(called, ast.Name) and called.id == "learning_rate"):
                problems.append(f"{script.name}:{node.lineno}: lr = {ast.unparse(node.value)}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and "args.lr" in ast.unparse(node):
            problems.append(f"{script.name}:{node.lineno}: {ast.unparse(node)} scales the rate by hand")
    return problems
