"""Build the course website (``make site``): static HTML in ``build/site/``, from the committed outputs.

Usage::

    .venv/bin/python tools/site.py                  # -> build/site/ (open build/site/index.html)
    .venv/bin/python tools/site.py --out /srv/www   # anywhere else

Nothing is executed: each notebook is converted as committed (nbconvert's HTML exporter, no execute
preprocessor), so the site shows the numbers of the run that produced the committed outputs. The site works
offline: the page template (tools/site_templates/course/) drops nbconvert's require.js, MathJax, Mermaid
and widget-manager scripts, which it would load from CDNs; TeX stays as text; figures are the PNG outputs
embedded as ``data:`` URIs; an interactive widget shows a "runs in the lab" note (:func:`static_widgets`). Every page has index /
previous / next links; the scripts of ``source_code/`` get a highlighted page each (``scripts/NAME.html``)
and their plain text (``scripts/NAME.py.txt``); a notebook's links to another notebook or to a script
(`` `source_code/NAME.py` ``) lead to their pages (:func:`local_links`). ``tests/test_site.py`` checks the HTML,
``tests/browser/test_site_offline.py`` opens it in Chromium with the network blocked.

Introduced for docs/instructors.md (issue 18); not part of ``course_lib`` (learners do not need it).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = Path(__file__).resolve().parent / "site_templates"
COURSE_TITLE = "Hands-on distributed deep learning with TensorFlow"
CSS = """
.course-nav { display: flex; gap: 1.5em; align-items: center; padding: 0.6em 1.2em; background: #f3f5f7;
  border-bottom: 1px solid #d0d7de; font-family: sans-serif; font-size: 14px; }
.course-nav.bottom { border-top: 1px solid #d0d7de; border-bottom: none; margin-top: 2em; }
.course-nav a { text-decoration: none; color: #0550ae; }
.course-nav .spacer { flex: 1; }
.course-widget-note { border-left: 4px solid #bf8700; background: #fff8c5; padding: 0.2em 1em; }
body.course-page { font-family: sans-serif; max-width: 60em; margin: 0 auto; padding: 0 1em 2em; }
body.course-page li { margin: 0.4em 0; }
"""
NOTEBOOK_LINK = re.compile(r"\]\((\.\./notebooks/|\./)?(\d\d_\w+)\.ipynb(#[^)]*)?\)")
SCRIPT_LINK = re.compile(r"\]\((?:\.\./)?source_code/(\w+\.py)\)")
SCRIPT_MENTION = re.compile(r"(?<!\[)`source_code/(\w+\.py)`")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ('<div class="course-widget-note"><p><strong>Interactive widget: it runs in the lab.</strong> Open '
               "this notebook in JupyterLab (<code>make lab</code>, or your classroom's hub) and run the cells above "
               "to use it; a static page cannot.</p></div>")


@dataclass(frozen=True)
class Page:
    """One notebook of the site: its source, output file name, title and one-line summary."""

    source: Path
    html_name: str
    title: str
    summary: str


def describe(nb: nbformat.NotebookNode, fallback: str) -> tuple[str, str]:
    """A notebook's title (its first ``# `` heading) and first paragraph after it."""
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    lines = first.splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), fallback)
    paragraphs = [p.strip() for p in "\n".join(line for line in lines if not line.startswith("#")).split("\n\n")]
    summary = next((" ".join(p.split()) for p in paragraphs if p), "")
    return title, summary


def static_widgets(nb: nbformat.NotebookNode) -> int:
    """Replace each widget output of ``nb`` (in place) by the "runs in the lab" note; returns how many.

    The committed notebooks keep no widget state (tools/maintainers/run_notebooks.py drops it), so a widget could not be
    rendered offline anyway; without this, nbconvert would print the widget's repr (``IntSlider(...)``).
    """
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                output["data"] = {"text/html": WIDGET_NOTE}
                count += 1
    return count


def local_links(nb: nbformat.NotebookNode, notebooks: set[str], scripts: set[str]) -> None:
    """Point a markdown cell's links at the site's pages (in place): ``](NN_x.ipynb)`` to ``NN_x.html``, and
    each mention of a script in backquotes (source_code/NAME.py) or ``](../source_code/NAME.py)``, to its page."""
    def notebook(match: re.Match[str]) -> str:
        stem = match.group(2)
        return f"]({stem}.html{match.group(3) or ''})" if stem in notebooks else match.group(0)

    def script(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"[`source_code/{name}`](scripts/{name}.html)" if name in scripts else match.group(0)

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = NOTEBOOK_LINK.sub(notebook, cell.source)
            source = SCRIPT_LINK.sub(lambda m: f"](scripts/{m.group(1)}.html)" if m.group(1) in scripts
                                     else m.group(0), source)
            cell.source = SCRIPT_MENTION.sub(script, source)


def _nav(pages: list[Page], index: int | None, prefix: str, where: str) -> str:
    links = [f'<a href="{prefix}index.html">Index</a>']
    if index is not None and index > 0:
        prev = pages[index - 1]
        links.append(f'<a rel="prev" href="{prefix}{prev.html_name}">&larr; {html.escape(prev.title)}</a>')
    links.append('<span class="spacer"></span>')
    if index is not None and index + 1 < len(pages):
        nxt = pages[index + 1]
        links.append(f'<a rel="next" href="{prefix}{nxt.html_name}">{html.escape(nxt.title)} &rarr;</a>')
    return f'<nav class="course-nav {where}">' + " ".join(links) + "</nav>"


def _script_page(path: Path, pages: list[Page]) -> str:
    formatter = HtmlFormatter(linenos="table", cssclass="highlight")
    body = highlight(path.read_text(), PythonLexer(), formatter)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{path.name}</title>'
            f"<style>{CSS}{formatter.get_style_defs('.highlight')}</style></head>"
            f'<body class="course-page">{_nav(pages, None, "../", "top")}'
            f'<h1>source_code/{path.name}</h1><p><a href="{path.name}.txt">plain text</a> &middot; run it as its '
            f"header says (How to run).</p>{body}{_nav(pages, None, '../', 'bottom')}</body></html>\n")


def _index_page(pages: list[Page], scripts: list[Path]) -> str:
    items = "".join(f'<li><a href="{p.html_name}">{html.escape(p.title)}</a>{markdown2html_mistune(p.summary)}</li>'
                    for p in pages)
    script_items = "".join(f'<li><a href="scripts/{s.name}.html">{s.name}</a> '
                           f'(<a href="scripts/{s.name}.txt">text</a>)</li>' for s in scripts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{COURSE_TITLE}</title>'
            f'<style>{CSS}</style></head><body class="course-page">{_nav(pages, None, "", "top")}'
            f"<h1>{COURSE_TITLE}</h1><p>The notebooks as committed, with the outputs of the run that produced "
            "them (this site runs nothing). To run them, and to use the widgets and exercises, open the course in "
            "JupyterLab (<code>make lab</code>) or your classroom's hub.</p>"
            f"<h2>Notebooks</h2><ol start=\"0\">{items}</ol><h2>Training scripts</h2><ul>{script_items}</ul>"
            "</body></html>\n")


def build(dest: Path, root: Path = ROOT) -> list[Page]:
    """Write the site of the course folder ``root`` into ``dest`` (replaced if it exists).

    Args:
        dest: the output folder (``build/site``); must not be the course folder or hold it.
        root: the course folder.

    Returns:
        The notebook pages, in course order.

    Raises:
        ValueError: ``dest`` would replace the course folder.
    """
    dest, root = dest.resolve(), root.resolve()
    if dest == root or root.is_relative_to(dest):
        raise ValueError(f"--out {dest} would replace the course folder: choose a folder such as build/site")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "scripts").mkdir(parents=True)
    notebooks = [(path, nbformat.read(path, as_version=4))
                 for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    pages = [Page(path, path.stem + ".html", *describe(nb, path.stem)) for path, nb in notebooks]
    scripts = sorted((root / "source_code").glob("*.py"))
    exporter = HTMLExporter(template_name="course", extra_template_basedirs=[str(TEMPLATES)])
    for index, (page, (_, nb)) in enumerate(zip(pages, notebooks)):
        resources = {"metadata": {"name": page.title},
                     "course": {"css": CSS, "nav_top": _nav(pages, index, "", "top"),
                                "nav_bottom": _nav(pages, index, "", "bottom")}}
        static_widgets(nb)
        local_links(nb, {p.source.stem for p in pages}, {s.name for s in scripts})
        body, _ = exporter.from_notebook_node(nb, resources=resources)
        (dest / page.html_name).write_text(body)
    for script in scripts:
        shutil.copy2(script, dest / "scripts" / f"{script.name}.txt")
        (dest / "scripts" / f"{script.name}.html").write_text(_script_page(script, pages))
    (dest / "index.html").write_text(_index_page(pages, scripts))
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site", help="output folder (default: build/site)")
    args = parser.parse_args(argv)
    try:
        pages = build(args.out)
    except ValueError as exc:
        print(f"site: ERROR: {exc}", file=sys.stderr)
        return 2
    print(f"site: {len(pages)} notebooks written to {args.out}; open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
