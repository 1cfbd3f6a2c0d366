"""DokuWiki (from Debian's package) as the application under test of tests/e2e/test_wiki_e2e.py."""
