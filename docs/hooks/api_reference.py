"""A griffe extension for the API reference (mkdocstrings reads gradflow's source through griffe).

Two things the defaults would get wrong:
- gradflow's docstrings are plain text, not Google or NumPy style: formulas aligned in columns
  (Adam's update, a backward's derivation), `*` for products, `x[...]` for indexing. Read as
  Markdown they would lose their line breaks and turn products into italics, so each one is shown
  as written, in a fixed-width block (class "docstring", styled in docs/stylesheets/extra.css).
- The example models live in the top-level models/ folder and install as gradflow.models
  (pyproject.toml's package-dir). Reading the source, griffe finds no gradflow/models, so the
  folder is loaded and mounted there, under the name a user imports.
"""

import re

import griffe


class GradflowAPI(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            text = obj.docstring.value
            fence = "~" * max([3, *(len(run) + 1 for run in re.findall("~+", text))])  # longer than any in the text
            obj.docstring.value = f"{fence}{{.text .docstring}}\n{text}\n{fence}"

    def on_package(self, *, pkg, loader, **kwargs):
        if pkg.name == "gradflow":
            pkg.set_member("models", loader.load("models", try_relative_path=False))
