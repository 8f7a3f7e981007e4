"""The names errors and drawings give: an op's, a tensor's, and the module an op ran in.

A learner can act on "backward: linear's saved input 1 (blocks.0.ffn.fc1.weight of shape (64, 16))
was modified in place", not on a numpy traceback from deep inside an op. So

  an op       is called by its class name in snake_case (RMSNorm -> rms_norm), unless it sets `name`;
  a tensor    by its .name, else its name as a parameter of the modules around the op
              (blocks.0.ffn.fc1.weight), else "a tensor of shape (64, 16)";
  a module    by its dotted path in the outermost module (blocks.2.attn): module_scope, entered by
              every Module call that records a graph, tells each op it runs which modules are running
              (node.scope, outermost first), through the engine's extension point (hooks.py);
  an error    raised by numpy inside an op's forward is raised again as the op's own (op_error).
"""

import re

from gradflow.engine.hooks import Watcher, watchers

# a word starts at a capital after any other character (LogSumExp), or at the capital that ends an
# acronym and begins a word (RMS|Norm), so an acronym stays one word
_WORD_START = re.compile(r"(?<=[^A-Z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def op_name(class_name):
    """An op's name, its class name in snake_case: LogSumExp -> log_sum_exp, RMSNorm -> rms_norm."""
    return _WORD_START.sub("_", class_name).lower()


class _Scopes(Watcher):
    """The modules whose forward is running, outermost first: each op records them as node.scope."""

    modules = ()

    def forward_begins(self, node):
        node.scope = self.modules


_SCOPES = _Scopes()


class module_scope:
    """Ops run inside belong to `module` (and to the modules around it), for drawings and errors.

    A class rather than a generator-based context manager: it is entered on every module call. The
    watcher is on while at least one module's forward runs.
    """

    __slots__ = ("module", "outer")

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        self.outer = _SCOPES.modules
        _SCOPES.modules = self.outer + (self.module,)
        if not self.outer:
            watchers.append(_SCOPES)

    def __exit__(self, *exc):
        _SCOPES.modules = self.outer
        if not self.outer:
            watchers.remove(_SCOPES)


def describe(t, scope=()):
    """How errors name a tensor: 'weight of shape (4, 3)' (its .name, or its name as a parameter of the
    modules in `scope`), else 'a tensor of shape (4, 3)'; a view also names the tensor it views."""
    name = t.name or _parameter_name(t, scope)
    text = f"{name} of shape {t.shape}" if name else f"a tensor of shape {t.shape}"
    return text if t._base is None else f"{text}, a view of {describe(t._base, scope)}"


def _parameter_name(t, scope):
    """t's dotted name among the parameters of the modules in scope (outermost first), or None. The
    op's own module is searched first, so a shared weight is called by the name it has there."""
    if not scope:
        return None
    tree = list(scope[0].named_modules())
    prefixes = {id(m): prefix for prefix, m in tree}
    for m in [*reversed(scope), *(m for _, m in tree)]:
        for name, p in m._parameters.items():
            if p is t:
                prefix = prefixes.get(id(m), "")
                return f"{prefix}.{name}" if prefix else name
    return None


def module_path(scope):
    """The dotted name of the innermost module of `scope` in the outermost one (e.g. blocks.2.attn),
    the outermost's class name for an op in its own forward, None outside any module."""
    if not scope:
        return None
    names = {id(m): name for name, m in scope[0].named_modules()}
    return names.get(id(scope[-1])) or type(scope[0]).__name__


def op_error(name, error, tensors):
    """A numpy error raised inside op `name`'s forward, as the op's own: naming the op and its input shapes."""
    message = str(error)
    if not message.startswith(f"{name}:"):
        shapes = ", ".join("None" if t is None else str(tuple(t.shape)) for t in tensors)
        message = f"{name}: {message} (input shapes {shapes})"
    if isinstance(error, IndexError) and not isinstance(error, ValueError):
        return IndexError(message)
    return (ValueError if isinstance(error, ValueError) else TypeError)(message)
