"""An mkdocs hook: the notebooks of tutorials/ become pages of the site at tutorials/<name>/.

The notebooks live beside the package, where the test suite runs them; the site reads them from
there, so no copy sits in docs/. mkdocs-jupyter renders them with the outputs they carry (nothing
is executed at build time), so this hook must add them before that plugin wraps the files.

The pages of docs/ link to a notebook by its path in the repository (`../tutorials/<name>` from
docs/), so the link also works where the Markdown is read as it is; on the site the notebooks sit
one folder lower, inside the site, and those links lose one `../`.

A notebook page's contents (the left column) are read from its rendered headings, ids and text as
the page has them: mkdocs-jupyter reads them from the Markdown again, where a heading's code or math
is dropped ("5. : the modules") and its anchor is not the one the rendered heading got.
"""

import html
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File
from mkdocs.structure.toc import get_toc

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "tutorials"
LINK_TO_TUTORIALS = re.compile(r"\]\(\.\./((?:\.\./)*)tutorials/")
HEADING = re.compile(r'<h([1-6]) id="([^"]+)">(.*?)</h\1>', re.S)
TAG = re.compile(r"<[^>]+>")


@event_priority(50)  # before mkdocs-jupyter's on_files (priority 0), which turns .ipynb files into pages
def on_files(files, config):
    for notebook in sorted(TUTORIALS.glob("*.ipynb")):
        # a file of the repository seen from its top folder, so it keeps the path tutorials/<name>
        files.append(File(f"tutorials/{notebook.name}", str(ROOT), config.site_dir, config.use_directory_urls))
    return files


def on_page_markdown(markdown, page, config, files):
    return LINK_TO_TUTORIALS.sub(r"](\1tutorials/", markdown)


def contents(rendered):
    """The table of contents of a rendered page, as mkdocs' toc tokens: each heading's level, id and
    text (its permalink's mark left out), nested under the heading above it of a lower level."""
    tokens, open_headings = [], []
    for level, anchor, inner in HEADING.findall(rendered):
        text = html.unescape(TAG.sub("", inner.split('<a class="anchor-link"')[0])).strip()
        token = {"level": int(level), "id": anchor, "name": text, "children": []}
        while open_headings and open_headings[-1]["level"] >= token["level"]:
            open_headings.pop()
        (open_headings[-1]["children"] if open_headings else tokens).append(token)
        open_headings.append(token)
    return tokens


def on_page_context(context, page, config, nav):
    if page.file.src_uri.endswith(".ipynb"):
        page.toc = get_toc(contents(page.content))
    return context


def on_serve(server, config, builder):
    server.watch(str(TUTORIALS))  # `mkdocs serve` rebuilds when a notebook changes
    return server
