"""An mkdocs hook: the notebooks of tutorials/ become pages of the site at tutorials/<name>/.

The notebooks live beside the package, where the test suite runs them; the site reads them from
there, so no copy sits in docs/. mkdocs-jupyter renders them with the outputs they carry (nothing
is executed at build time), so this hook must add them before that plugin wraps the files.

The pages of docs/ link to a notebook by its path in the repository (`../tutorials/<name>` from
docs/), so the link also works where the Markdown is read as it is; on the site the notebooks sit
one folder lower, inside the site, and those links lose one `../`.
"""

import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "tutorials"
LINK_TO_TUTORIALS = re.compile(r"\]\(\.\./((?:\.\./)*)tutorials/")


@event_priority(50)  # before mkdocs-jupyter's on_files (priority 0), which turns .ipynb files into pages
def on_files(files, config):
    for notebook in sorted(TUTORIALS.glob("*.ipynb")):
        # a file of the repository seen from its top folder, so it keeps the path tutorials/<name>
        files.append(File(f"tutorials/{notebook.name}", str(ROOT), config.site_dir, config.use_directory_urls))
    return files


def on_page_markdown(markdown, page, config, files):
    return LINK_TO_TUTORIALS.sub(r"](\1tutorials/", markdown)


def on_serve(server, config, builder):
    server.watch(str(TUTORIALS))  # `mkdocs serve` rebuilds when a notebook changes
    return server
