"""Exercises graded by gradflow's own checks: the learner writes a piece of gradflow, gradflow grades it.

Each exercise is one piece of gradflow's code (an op's backward, the backward walk's order, Adam's
step, a BPE merge, ...), handed out as its signature and docstring over a blank and graded by
running the learner's version in place of gradflow's: compared call by call with gradflow's own,
gradient-checked by finite differences on the gradcheck table's inputs, and inside a whole model.
Everything is read from the engine's code when it is shown, so the exercises cannot drift from it.
`gradflow exercises` (gradflow/cli/exercises.py) drives them; catalog.py lists them in order.
"""

from gradflow.exercises.catalog import CAPSTONE_TRACKS, EXERCISES, TRACKS, Exercise, find
from gradflow.exercises.diagnose import Failed

__all__ = ["CAPSTONE_TRACKS", "EXERCISES", "TRACKS", "Exercise", "Failed", "find"]
