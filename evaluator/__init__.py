"""webarena-live's evaluator: WebArena-Verified verdicts from a task, a trace and a response.

Pure Python; never imports mitmproxy. The public API is the list in `__init__.pyi`: each name is
loaded on first use (lazy_loader), so importing one submodule (or `__version__`, which
`evaluator.results` needs while it is itself being imported) does not pull in the whole library.
"""

import lazy_loader

__version__ = "0.1.0"
"""The one version of the distribution (pyproject.toml reads it from here)."""

__getattr__, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)
__all__ = sorted([*_names, "__version__"])
