"""The README and the docs site: no link points at a file or an anchor that does not exist, every
page is in the site's nav, and the README stays short enough to take in at one sitting.

Pure Python, so it runs in the normal suite without mkdocs: links are read from the Markdown
(outside code), and anchors are the slugs Python-Markdown's toc extension gives headings, as the
site builds them. `mkdocs build --strict` (in .ci/run) checks the site again as mkdocs sees it.
Skipped where the docs are not beside the tests (the installed wheel's run, the sdist).
"""

import importlib
import importlib.util
import json
import os
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
README = ROOT / "README.md"
README_MAX_LINES = 210

pytestmark = pytest.mark.skipif(not MKDOCS_YML.is_file(), reason="not run from a checkout")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::(\w+))?"\s*$')
AUTODOC = re.compile(r"^::: ([\w.]+)")


def expand_snippets(text):
    """The page as the snippets extension hands it on: `--8<-- "file:section"` replaced by that
    section of the file (between its `[start:section]` and `[end:section]` markers)."""
    lines = []
    for line in text.splitlines():
        found = SNIPPET.match(line)
        if not found:
            lines.append(line)
            continue
        path, section = found.groups()
        included = (ROOT / path).read_text(encoding="utf-8")
        if section:
            start, end = f"[start:{section}]", f"[end:{section}]"
            assert start in included and end in included, f"{path} has no section {section!r}"
            included = included.split(start, 1)[1].split("\n", 1)[1].split(end, 1)[0].rsplit("\n", 1)[0]
        lines += included.splitlines()
    return "\n".join(lines)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        found = FENCE.match(line)
        if fence is None and found:
            fence = found.group(1)
        elif fence is not None:
            if found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence):
                fence = None
        else:
            yield number, line


def slugify(heading):
    """The id Python-Markdown's toc extension gives a heading: the text as rendered (code, emphasis
    and link markup gone), accents dropped, everything but word characters, spaces and hyphens
    removed, lower case, runs of spaces and hyphens made one hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path):
    """The ids a page's headings get (a repeated one gets _1, _2, ... as toc numbers them), and the
    identifiers its `::: name` lines document (the API reference's anchors start with them)."""
    text = expand_snippets(path.read_text(encoding="utf-8"))
    ids, documented = set(), set()
    for _, line in prose_lines(text):
        heading = HEADING.match(line)
        if heading:
            slug, n = slugify(heading.group(2)), 1
            unique = slug
            while unique in ids:
                unique, n = f"{slug}_{n}", n + 1
            ids.add(unique)
        autodoc = AUTODOC.match(line)
        if autodoc:
            documented.add(autodoc.group(1))
    return ids, documented


def has_anchor(path, anchor):
    ids, documented = anchors(path)
    return anchor in ids or any(anchor == name or anchor.startswith(name + ".") for name in documented)


def links(path):
    """(line number, target) of every link and image in a Markdown file; one in code is an example."""
    text = expand_snippets(path.read_text(encoding="utf-8"))
    return [(n, target) for n, line in prose_lines(text) for target in LINK.findall(INLINE_CODE.sub("", line))]


def broken(path, target):
    """Why a link from `path` to `target` leads nowhere, or None when it arrives."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not checked here
        return None
    file_part, _, anchor = target.partition("#")
    destination = (path.parent / file_part).resolve() if file_part else path
    if not destination.exists():
        return "no such file"
    if anchor:
        if destination.suffix != ".md":
            return "an anchor into a file that is not Markdown"
        if not has_anchor(destination, anchor):
            return f"no heading with the id {anchor!r} in {destination.name}"
    return None


def markdown_files():
    return [README, *sorted(DOCS.rglob("*.md"))]


def nav_entries():
    """The pages mkdocs.yml's nav lists, as paths inside docs/ (the notebooks are tutorials/*.ipynb
    there: docs/hooks/notebooks.py mounts the repository's tutorials/ folder at that place)."""
    text = MKDOCS_YML.read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s*-\s+(?:\"[^\"]*\":\s*|[^:\n]+:\s+)?([\w./-]+\.(?:md|ipynb))\s*$", nav, re.M)


def nav_target(entry):
    return ROOT / entry if entry.startswith("tutorials/") else DOCS / entry


# --- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_arrives(path):
    problems = [f"line {n}: ({target}): {why}" for n, target in links(path) if (why := broken(path, target))]
    assert problems == [], f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_every_nav_entry_exists_and_every_page_is_in_the_nav():
    entries = nav_entries()
    assert "index.md" in entries, "the nav has no home page"
    missing = [entry for entry in entries if not nav_target(entry).is_file()]
    assert missing == [], f"mkdocs.yml's nav lists pages that do not exist: {missing}"
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    pages |= {f"tutorials/{p.name}" for p in (ROOT / "tutorials").glob("*.ipynb")}
    assert sorted(pages - set(entries)) == [], "pages the nav does not list"


def test_mkdocs_yml_names_files_that_exist():
    text = MKDOCS_YML.read_text(encoding="utf-8").split("\nnav:\n", 1)[0]
    named = re.findall(r"([\w.-]+(?:/[\w.-]+)*\.(?:py|css|md))\b", text)
    assert named, "mkdocs.yml names no hook"
    missing = [name for name in named if not ((ROOT / name).is_file() or (DOCS / name).is_file())]
    assert missing == [], f"mkdocs.yml names files that do not exist: {missing}"


def test_the_readme_takes_one_sitting():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the guides in docs/ hold the rest"


def test_slugs_are_the_ones_toc_makes():
    assert slugify("Two tiers of kernels") == "two-tiers-of-kernels"
    assert slugify("Fused functions: `gradflow.nn.functional`") == "fused-functions-gradflownnfunctional"
    assert slugify("A gradient checked by hand, in 60 seconds") == "a-gradient-checked-by-hand-in-60-seconds"
    assert slugify("SmolLM2: a real pretrained model") == "smollm2-a-real-pretrained-model"
    assert slugify("Speed -- and  memory") == "speed-and-memory"


def test_a_broken_link_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## A section\n\n[fine](#a-section) [gone](#no-section) [nowhere](missing.md)\n"
        "```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n",
        encoding="utf-8",
    )
    found = {target: broken(page, target) for _, target in links(page)}
    assert found["#a-section"] is None
    assert "no heading with the id 'no-section'" in found["#no-section"]
    assert found["missing.md"] == "no such file"
    assert len(found) == 3  # the links in code are examples, not links


# --- the notebooks as the site renders them ---------------------------------------------------------

NOTEBOOK_PAGES = DOCS / "hooks" / "notebooks.py"
MATHJAX_HOOK = DOCS / "hooks" / "mathjax.py"
MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)  # display first, then inline; both may span lines
CODE = re.compile(r"<pre\b.*?</pre>|<code\b.*?</code>", re.S)
TEXT_CELL = re.compile(r'<div class="[^"]*jp-MarkdownOutput[^"]*"[^>]*>(.*?)</div>', re.S)  # one cell's text


def docs_tool(module):
    """A package of the docs extra: skipped without it, unless GRADFLOW_REQUIRE_DOCS=1 (CI's docs stage)."""
    if os.environ.get("GRADFLOW_REQUIRE_DOCS") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def hook(path):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mathjax_url():
    return re.search(r'custom_mathjax_url:\s*"([^"]+)"', MKDOCS_YML.read_text(encoding="utf-8")).group(1)


@pytest.fixture(scope="module")
def rendered_text(tmp_path_factory):
    """The text cells of every notebook, rendered as mkdocs-jupyter renders a page: one page, to be quick."""
    nb2html = docs_tool("mkdocs_jupyter.nbconvert2").nb2html
    cells = []
    for path in sorted((ROOT / "tutorials").glob("*.ipynb")):
        cells += [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown"]
    notebook = tmp_path_factory.mktemp("notebooks") / "text.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return nb2html(str(notebook), custom_mathjax_url=mathjax_url())


def missing_anchors(rendered, hrefs):
    ids = set(re.findall(r'\bid="([^"]+)"', rendered))
    return sorted({h for h in hrefs if h and h not in ids})


def toc_anchors(toc):
    for item in toc:
        yield item.url.removeprefix("#")
        yield from toc_anchors(item.children)


def unrendered_tex(rendered):
    """TeX that MathJax cannot typeset whole: a formula that Markdown took apart (a tag inside it: a list
    item, emphasis) or a $ left without its pair."""
    text = CODE.sub("", rendered).replace("\\$", "")
    broken = [m.group(0)[:80] for m in MATH.finditer(text) if "<" in m.group(0)]
    return broken + [rest[:80] for rest in MATH.sub("", text).split("$")[1:]]


def test_every_anchor_of_a_rendered_notebook_arrives_and_its_contents_too(rendered_text):
    get_toc = docs_tool("mkdocs.structure.toc").get_toc
    assert missing_anchors(rendered_text, re.findall(r'href="#([^"]*)"', rendered_text)) == []
    toc = get_toc(hook(NOTEBOOK_PAGES).contents(rendered_text))
    anchors = list(toc_anchors(toc))
    assert len(anchors) >= 9 * 3, "a contents entry per section of each notebook"
    assert missing_anchors(rendered_text, anchors) == []
    names = [item.title for item in toc]
    assert any("`" not in n and "models/gpt.py" in n for n in names), "a heading's code stays in its entry"


def test_the_contents_mkdocs_jupyter_reads_from_the_markdown_would_be_caught(rendered_text):
    plugin = docs_tool("mkdocs_jupyter.plugin")
    tokens, _ = plugin._get_nb_toc_tokens(str(ROOT / "tutorials" / "08_reading_gpt_line_by_line.ipynb"), 6)
    ids = [t["id"] for token in tokens for t in [token, *token["children"]]]
    assert missing_anchors(rendered_text, ids), "its anchors drop a heading's code, the page's keep it"


def test_the_notebooks_tex_reaches_mathjax_whole(rendered_text):
    cells = TEXT_CELL.findall(rendered_text)
    assert len(cells) > 50, "the text cells as the page shows them"
    assert [problem for cell in cells for problem in unrendered_tex(cell)] == []
    assert unrendered_tex("<p>$a +\n</p><ul><li>b$</li></ul> and $c$") == ["$a +\n</p><ul><li>b$"]
    assert unrendered_tex("<p>$a$ costs $5</p>") == ["5</p>"]


def test_math_renders_with_no_network(rendered_text):
    url = mathjax_url()
    assert not re.match(r"\w+://", url), f"mkdocs.yml loads MathJax from {url}: offline, the pages show raw TeX"
    mathjax = hook(MATHJAX_HOOK)
    assert url.startswith(mathjax.SCRIPT + "?"), "the site carries MathJax where mkdocs.yml loads it from"
    assert (mathjax.MATHJAX / "MathJax.js").is_file()
    for name in re.search(r"config=([\w,-]+)", url).group(1).split(","):
        assert (mathjax.MATHJAX / "config" / f"{name}.js").is_file(), f"MathJax's config {name} is not shipped"
    assert f'<script src="{url}"' in rendered_text
