"""Tools for looking at a computation: graph drawing, the op profiler, the gradcheck case table.

They read the engine and nn (a Module names the boxes in a drawing) and import nothing above
them; the command line (gradflow.cli) drives them.
"""
