"""The course website (``make site`` = tools/site.py): every notebook as committed, offline, navigable.

These tests read the HTML; tests/browser/test_site_offline.py opens the same site in Chromium with the network
blocked (what a reader sees, and that no request leaves the machine).
"""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("course_site", ROOT / "tools" / "site.py")
course_site = importlib.util.module_from_spec(_spec)
sys.modules["course_site"] = course_site
_spec.loader.exec_module(course_site)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SCRIPTS = sorted((ROOT / "source_code").glob("*.py"))
# Anything that makes a browser fetch from elsewhere: scripts, styles, fonts, frames, images.
REMOTE = re.compile(r"""(<script[^>]*\bsrc=|<link[^>]*\bhref=["']?(https?:)?//|<(img|iframe|source|video|audio)"""
                    r"""[^>]*\bsrc=["']?(https?:)?//|@import|url\(["']?(https?:)?//)""", re.I)


@pytest.fixture(scope="module")
def site(course_site: Path) -> Path:
    """The site ``make site``'s command built (tests/conftest.py: one build for this file and the browser's)."""
    return course_site


@pytest.mark.slow  # > 2 s: left out of `make check`
def test_one_page_per_notebook_and_script(site: Path) -> None:
    assert sorted(p.name for p in site.glob("*.html")) == sorted(["index.html"] + [p.stem + ".html"
                                                                                 for p in NOTEBOOKS])
    for script in SCRIPTS:
        assert (site / "scripts" / f"{script.name}.txt").read_text() == script.read_text()
        assert (site / "scripts" / f"{script.name}.html").is_file()
    index = (site / "index.html").read_text()
    for path in NOTEBOOKS:
        title, _ = course_site.describe(nbformat.read(path, as_version=4), path.stem)
        assert f'href="{path.stem}.html">{html.escape(title)}</a>' in index
    for script in SCRIPTS:
        assert f'href="scripts/{script.name}.html"' in index


def test_nothing_is_loaded_from_elsewhere(site: Path) -> None:
    offending = []
    for page in site.rglob("*.html"):
        text = page.read_text()
        offending += [f"{page.relative_to(site)}: {m.group(0)}" for m in REMOTE.finditer(text)]
    assert not offending, "the site would load these from the network:\n" + "\n".join(offending[:20])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_page_shows_the_committed_outputs(site: Path, path: Path) -> None:
    """Figures embedded as PNG data, tables kept, the last stdout line there verbatim (nothing re-run)."""
    nb = nbformat.read(path, as_version=4)
    page = (site / f"{path.stem}.html").read_text()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert page.count('src="data:image/png;base64,') == len(pngs), "every figure, embedded"
    assert page.count("<table") >= sum("<table" in o.get("data", {}).get("text/html", "") for o in outputs)
    assert page.count("runs in the lab") == len(widgets)
    streams = [o.text for o in outputs if o.output_type == "stream" and o.name == "stdout" and o.text.strip()]
    assert streams, "a notebook of the course prints something"
    last = streams[-1].strip().splitlines()[-1]
    assert html.escape(last, quote=False) in page, f"committed output missing: {last!r}"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def _links(page: str) -> list[dict[str, str | None]]:
    parser = _Links()
    parser.feed(page)
    return parser.links


def test_navigation_chains_the_notebooks(site: Path) -> None:
    """Index / prev / next on every page; every local link resolves; notebooks link the scripts they name."""
    names = [p.stem + ".html" for p in NOTEBOOKS]
    script_links = 0
    for i, name in enumerate(names):
        page = (site / name).read_text()
        links = _links(page)
        hrefs = {a["href"] for a in links if a.get("href") and ":" not in a["href"] and "#" not in a["href"]}
        assert "index.html" in hrefs
        prev = {a["href"] for a in links if a.get("rel") == "prev"}
        nxt = {a["href"] for a in links if a.get("rel") == "next"}
        assert prev == (set() if i == 0 else {names[i - 1]}), name
        assert nxt == (set() if i == len(names) - 1 else {names[i + 1]}), name
        missing = [h for h in hrefs if not (site / h).exists()]
        assert not missing, f"{name} links to missing pages: {missing}"
        script_links += sum(h.startswith("scripts/") for h in hrefs)
    assert script_links >= 3, "the notebooks name scripts (`source_code/NAME.py`): their mentions link the pages"


def test_out_may_not_replace_the_course() -> None:
    with pytest.raises(ValueError, match="would replace the course folder"):
        course_site.build(ROOT.parent)
