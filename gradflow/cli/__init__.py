"""Every `gradflow` subcommand: train, generate, chat, graph, gradcheck.

The top of the stack: it may import any part of gradflow and is the only part of the library that
imports gradflow.models (the example architectures), to build the model a command asks for.
"""

from gradflow.cli.main import main

__all__ = ["main"]
