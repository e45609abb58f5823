"""stability: stability analysis of delayed-gradient (pipeline-parallel) training dynamics.

Submodules are imported on use, so that the command line starts fast; see the README for the
map of rooms (rules → linear → spectrum → boundary → faces).
"""

__version__ = "0.1.0"
