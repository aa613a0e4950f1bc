"""The course website in headless Chromium, network blocked: every page loads, every figure shows, links work.

The site (tools/site.py) is built into a scratch folder and served by a local ``http.server`` on the loopback
interface. Every request that does not go to that server is aborted and recorded, and every failed request
is recorded too: the test demands zero of both. Chromium is the ``browser`` fixture of conftest.py.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _load_site_tool():
    spec = importlib.util.spec_from_file_location("course_site_tool", ROOT / "tools" / "site.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["course_site_tool"] = module
    spec.loader.exec_module(module)
    return module


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="module")
def served_site(course_site: Path) -> Iterator[tuple[str, list]]:
    """(base URL, notebook pages) of the site served on 127.0.0.1: the session's build (``course_site``,
    tests/conftest.py, which tests/test_site.py reads too), its pages named as tools/site.py's build names them."""
    dest = course_site
    tool = _load_site_tool()
    pages = [tool.Page(path, path.stem + ".html", *tool.describe(nbformat.read(path, as_version=4), path.stem))
             for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(dest)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", pages
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert not thread.is_alive(), "the site's http.server thread did not stop"


@pytest.fixture
def page(browser, served_site: tuple[str, list]) -> Iterator[tuple[object, dict[str, list[str]]]]:
    """A new page whose every request outside the site is aborted; ``problems`` lists them and failures."""
    base, _ = served_site
    problems: dict[str, list[str]] = {"blocked": [], "failed": [], "http_errors": []}
    tab = browser.new_page()

    def route(route) -> None:
        if route.request.url.startswith(base) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            problems["blocked"].append(route.request.url)
            route.abort()

    tab.route("**/*", route)
    tab.on("requestfailed", lambda request: problems["failed"].append(f"{request.url}: {request.failure}"))
    tab.on("response", lambda response: response.status >= 400 and problems["http_errors"].append(
        f"{response.status} {response.url}"))
    yield tab, problems
    tab.close()


def _check_page(tab, item) -> None:
    """The notebook page ``tab`` shows: its figures all loaded and visible, its title the notebook's."""
    tab.wait_for_load_state("networkidle")
    images = tab.eval_on_selector_all(
        "main img", "els => els.map(e => ({w: e.naturalWidth, done: e.complete}))")
    broken = [i for i, image in enumerate(images) if not image["done"] or image["w"] <= 0]
    assert images, f"{item.html_name}: no figure on the page (every course notebook has one)"
    assert not broken, f"{item.html_name}: images {broken} of {len(images)} are not visible"
    assert tab.locator("main h1").first.inner_text().strip() == item.title


def test_every_notebook_page_loads_offline_with_its_figures_along_the_links(page, served_site) -> None:
    """One walk (issue 31: each page is loaded once, was three times in two tests): from the index through every
    notebook by its ``next`` link, each page checked for its figures and title, its ``prev`` link pointing at the
    page before (clicked once, from the last page), then back to the index and on to a script page."""
    tab, problems = page
    base, pages = served_site
    assert len(pages) >= 7
    response = tab.goto(base + "index.html", wait_until="load")
    assert response is not None and response.ok, "index.html"
    tab.get_by_role("link", name=pages[0].title, exact=True).click()
    for number, item in enumerate(pages):
        if number:
            tab.locator("nav.top a[rel=next]").click()
        tab.wait_for_url(base + item.html_name)
        _check_page(tab, item)
        prev = tab.locator("nav.bottom a[rel=prev]")
        if number:
            assert prev.get_attribute("href") == pages[number - 1].html_name, item.html_name
        else:
            assert prev.count() == 0, "the first notebook has no previous link"
    assert tab.locator("nav.top a[rel=next]").count() == 0, "the last notebook has no next link"
    tab.locator("nav.bottom a[rel=prev]").click()
    tab.wait_for_url(base + pages[-2].html_name)
    tab.locator("nav.top a", has_text="Index").click()
    tab.wait_for_url(base + "index.html")
    first_script = tab.locator("a[href^='scripts/'][href$='.html']").first
    name = first_script.inner_text()
    first_script.click()
    assert tab.locator("h1").inner_text() == f"source_code/{name}"
    assert "Horovod" in tab.content() or "tf." in tab.content()
    assert problems == {"blocked": [], "failed": [], "http_errors": []}, problems


def test_a_remote_request_would_be_caught(page, served_site) -> None:
    """The guard itself: a page that asks for a CDN script is reported (so zero above means zero)."""
    tab, problems = page
    base, _ = served_site
    tab.goto(base + "index.html", wait_until="load")
    tab.evaluate("""() => new Promise(done => { const s = document.createElement('script');
        s.src = 'https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js'; s.onerror = done; s.onload = done;
        document.head.appendChild(s); })""")
    assert problems["blocked"] == ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"]
    problems["blocked"].clear()
    problems["failed"].clear()
