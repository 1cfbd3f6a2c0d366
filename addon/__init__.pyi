# For type checkers: `webarena_live` re-exports the evaluator's public API (its list is
# evaluator/__init__.pyi).
from .evaluator import *  # noqa: F403
from .evaluator import __version__ as __version__
