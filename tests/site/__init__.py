"""A small test web site and the helpers of the live end-to-end tests.

The helpers assert; registering them here, before any of them is imported,
lets pytest rewrite those asserts into readable failure messages.
"""

import pytest

pytest.register_assert_rewrite("tests.site.agents", "tests.site.harness", "tests.site.live_fixtures")
