"""The README and the docs site: no link points at a file or an anchor that does not exist, every
page is in the site's nav, and the README stays short enough to take in at one sitting.

Pure Python, so it runs in the normal suite without mkdocs: links are read from the Markdown
(outside code), and anchors are the slugs Python-Markdown's toc extension gives headings, as the
site builds them. `mkdocs build --strict` (in .ci/run) checks the site again as mkdocs sees it.
Skipped where the docs are not beside the tests (the installed wheel's run, the sdist).
"""

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
