"""Where things are in the checkout, for tests in any folder."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SUPPORT = TESTS / "support"
EXAMPLES = REPO / "examples"
