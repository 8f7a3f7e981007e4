"""An mkdocs hook: the notebooks' math rendered with no network, by a MathJax the site carries.

The notebooks write their math as TeX ($...$, $$...$$), which MathJax turns into formulas in the
browser. Loaded from a CDN, an offline reader sees raw TeX; so the site carries MathJax 2 itself,
from the jupyter-server-mathjax package (the docs extra in pyproject.toml), copied to
assets/mathjax/ when the site is built. mkdocs.yml names it by its path in the site (SCRIPT); each
notebook page, at its own depth, gets the path from where it stands. The package ships MathJax's
STIX-Web fonts, not its TeX ones, so the pages are told to use those.
"""

import shutil
from pathlib import Path

import jupyter_server_mathjax
from mkdocs.utils import get_relative_url

MATHJAX = Path(jupyter_server_mathjax.__file__).parent / "static"
FOLDER = "assets/mathjax"
SCRIPT = f"{FOLDER}/MathJax.js"  # mkdocs.yml's custom_mathjax_url is this, then ?config=...
NOT_USED = ("jax/output/SVG",)  # the pages typeset with the HTML-CSS output
FONTS = (
    '<script type="text/x-mathjax-config">'
    'MathJax.Hub.Config({"HTML-CSS": {availableFonts: [], webFont: "STIX-Web", imageFont: null}});'
    "</script>"
)


def on_post_page(output, page, config):
    mark = f'<script src="{SCRIPT}?'
    if mark not in output:
        return output
    here = get_relative_url(SCRIPT, page.url)
    return output.replace(mark, f'{FONTS}\n<script src="{here}?')


def on_post_build(config):
    target = Path(config.site_dir) / FOLDER
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(MATHJAX, target, ignore=lambda folder, names: [n for n in names if _unused(Path(folder) / n)])


def _unused(path):
    return any(path == MATHJAX / part for part in NOT_USED) or path.suffix == ".py"
