"""The mutation benchmark's own parts (benchmarks/mutation*.py): the mutator makes the variants it
names, the oracle tells a wrong backward from a rewritten right one, and a few classic wrong
variants are failed by today's checks. The whole benchmark runs as a CI stage of its own."""

import ast
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if not (BENCHMARKS / "mutation.py").exists():
    pytest.skip("the benchmarks are not beside the tests (an installed run)", allow_module_level=True)
sys.path.insert(0, str(BENCHMARKS))
try:
    from mutation import checked, compiled
    from mutation_ast import variants
    from mutation_oracle import differs
finally:  # off the path again: benchmarks/kernels.py must not answer a later `import kernels` (transformers asks)
    sys.path.remove(str(BENCHMARKS))

from gradflow.exercises.catalog import BY_NAME, EXERCISES  # noqa: E402

TINY = textwrap.dedent('''
    def f(a, b, c):
        """a docstring, never mutated"""
        x = a.sum(axis=-1, keepdims=True)
        if a < b and not c:
            return -x + b * 2
        for i in range(3):
            if i == 1:
                break
        return np.sqrt(x @ b.T)[:, None]
''')


def test_the_mutator_makes_each_kind_of_variant():
    said = {v.change for v in variants(TINY)}
    expected = {
        "a.sum(axis=-1, keepdims=True) -> a.mean(axis=-1, keepdims=True)",  # a call's family
        "axis=-1 -> axis=0",
        "axis=-1 -> axis=-2",
        "a.sum(axis=-1, keepdims=True) -> a.sum(keepdims=True)",  # axis dropped
        "keepdims=True -> keepdims=False",
        "a < b -> a <= b",
        "a < b and (not c) -> a < b or not c",
        "not c -> c",
        "-x -> x",
        "-x + b * 2 -> -x - b * 2",
        "-x + b * 2 -> -x",  # a term dropped
        "-x + b * 2 -> b * 2",
        "2 -> 3",
        "x @ b.T -> b.T @ x",  # operands swapped
        "x @ b.T -> x @ b.T.swapaxes(-1, -2)",  # a transpose added
        "b.T -> b",  # and removed
        "np.sqrt(x @ b.T) -> x @ b.T",
        "np.sqrt(x @ b.T)[:, None] -> np.sqrt(x @ b.T)",  # the subscript dropped
        "break -> pass",
        "return np.sqrt(x @ b.T)[:, None] -> return None",
        "x = a.sum(axis=-1, keepdims=True) -> pass",
    }
    assert expected <= said, sorted(expected - said)
    assert not any("docstring" in v.change for v in variants(TINY))


def test_every_variant_of_every_exercise_parses_and_differs_from_the_reference():
    for exercise in EXERCISES:
        reference = ast.unparse(ast.parse(exercise.piece.source()))
        found = variants(exercise.piece.source())
        assert found, exercise.name
        assert len({v.source for v in found}) == len(found)
        for v in found:
            assert ast.unparse(ast.parse(v.source)) != reference, (exercise.name, str(v))


MUL = BY_NAME["mul_backward"]


def test_the_oracle_tells_a_rewritten_backward_from_a_wrong_one():
    rewritten = "def backward(ctx, grad):\n    a, b = ctx.saved_tensors\n    return b * grad, a * grad\n"
    wrong = "def backward(ctx, grad):\n    a, b = ctx.saved_tensors\n    return grad * a, grad * b\n"
    assert differs(MUL, compiled(MUL.piece, rewritten), seed=1) is None
    assert differs(MUL, compiled(MUL.piece, wrong), seed=1) is not None


def test_the_oracle_judges_an_order_by_its_rule():
    topo = BY_NAME["topological_order"]
    reversed_order = topo.piece.source().replace("return order[::-1]", "return order")
    assert differs(topo, topo.piece.function, seed=2) is None
    assert differs(topo, compiled(topo.piece, reversed_order), seed=2) is not None


def _variant(exercise, change):
    return next(v for v in variants(exercise.piece.source()) if v.change == change)


@pytest.mark.parametrize(
    "name, change",
    [
        ("mul_backward", "a, b = ctx.saved_tensors -> b, a = ctx.saved_tensors"),  # the operands swapped
        ("softmax_backward", "keepdims=True -> keepdims=False"),
        ("matmul_backward", "np.swapaxes(b2, -1, -2) -> b2"),
    ],
)
def test_todays_checks_kill_these_variants(name, change):
    exercise = BY_NAME[name]
    fn = compiled(exercise.piece, _variant(exercise, change).source)
    assert differs(exercise, fn, seed=3) is not None
    assert checked(exercise, fn, seed=3).startswith("killed")
