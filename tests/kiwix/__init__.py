"""kiwix-serve (Debian's kiwix-tools, the server of WebArena's wikipedia site) with a small ZIM built by
libzim, as the application under test of tests/e2e/test_kiwix_e2e.py."""
