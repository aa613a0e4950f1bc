"""Tests of course_lib.lessons.common.measured: masked forms and verdicts that can come out False."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from course_lib.lessons.common import measured
from tests.test_sanitize import sanitize


def test_approx_is_masked_but_its_neighbours_are_not():
    assert measured.approx(0.5234) == "≈0.52"
    assert sanitize(f"efficiency {measured.approx(0.52)}") == sanitize(f"efficiency {measured.approx(1.13)}")
    assert sanitize("efficiency ≈0.52, threshold 0.25") != sanitize("efficiency ≈0.52, threshold 0.01")


def test_measured_view_formats_only_the_measured_columns():
    table = pd.DataFrame({"devices": [1, 2], "global_batch": [64, 128], "efficiency": [1.0, 0.5234]})
    view = measured.measured_view(table, ["efficiency"])
    assert list(view["efficiency"]) == ["≈1.00", "≈0.52"]
    assert list(view["global_batch"]) == [64, 128] and table["efficiency"].iloc[1] == 0.5234
    other = measured.measured_view(table.assign(efficiency=[1.0, 0.9]), ["efficiency"])
    assert sanitize(view.to_string()) == sanitize(other.to_string())          # a measured column is masked
    assert sanitize(view.to_html()) == sanitize(other.to_html())
    changed = measured.measured_view(table.assign(global_batch=[64, 256]), ["efficiency"])
    assert sanitize(view.to_string()) != sanitize(changed.to_string())        # a deterministic one is not
    padded = measured.measured_view(table, ["efficiency"], width=8)
    assert list(padded["efficiency"]) == ["   ≈1.00", "   ≈0.52"]
    with pytest.raises(KeyError, match="no column 'speedup'"):
        measured.measured_view(table, ["speedup"])


@pytest.mark.parametrize("value, half, threshold, verdict", [
    (0.52, 0.04, 0.25, "True"),
    (0.20, 0.04, 0.25, "False"),
    (0.27, 0.04, 0.25, "cannot tell"),
    (0.25, 0.0, 0.25, "True"),            # an exact value on the threshold is at least the threshold
    (0.2499, 0.0, 0.25, "False"),
    (908.0, 503.0, 0.0, "True"),
    (-77.4, 174.0, 0.0, "cannot tell"),
])
def test_at_least_decides_with_the_interval(value, half, threshold, verdict):
    assert measured.at_least(value, half, threshold) == verdict


def test_at_least_rejects_a_negative_interval():
    with pytest.raises(ValueError, match="half_width"):
        measured.at_least(1.0, -0.1, 0.5)


def test_in_words_says_each_verdict_in_the_words_given():
    assert [measured.in_words(v, "yes", "no") for v in (True, False, None)] == ["yes", "no", "cannot tell"]
    assert [measured.in_words(v, "yes", "no") for v in ("True", "False", "cannot tell")] == ["yes", "no", "cannot tell"]
    assert measured.in_words(None, "faster", "slower", "inside the noise") == "inside the noise"
    assert measured.in_words(measured.at_least(1.2, 0.1, 1.0), "above", "below") == "above"
    with pytest.raises(ValueError, match="a verdict is True, False or 'cannot tell'"):
        measured.in_words("maybe", "yes", "no")


#: The keys of a table that words a verdict by itself: the decision's values, or their printed forms.
_VERDICT_KEYS = [{True, False, None}, {"True", "False", "cannot tell"}]


def verdict_tables(source: str) -> list[int]:
    """Lines of ``source`` where a dict literal maps a verdict's three values to words (``in_words`` does that)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if any(keys == wanted for wanted in _VERDICT_KEYS):
                found.append(node.lineno)
    return sorted(found)


def test_no_lessons_module_words_a_verdict_by_itself():
    """The words of a verdict have one home, ``measured.in_words``: a {True/False/None: words} table elsewhere fails."""
    lessons = Path(measured.__file__).parent
    tables = {str(p.relative_to(lessons)): lines for p in sorted(lessons.rglob("*.py"))
              if (lines := verdict_tables(p.read_text(encoding="utf-8")))}
    assert tables == {}, f"word these verdicts with course_lib.lessons.common.measured.in_words: {tables}"
    planted = 'said = {True: "faster", False: "slower", None: "cannot tell"}[v]\nx = {"True": 1, "False": 2, "cannot tell": 3}'
    assert verdict_tables(planted) == [1, 2]
    assert verdict_tables('said = {True: "faster", False: "slower"}[v]') == []
