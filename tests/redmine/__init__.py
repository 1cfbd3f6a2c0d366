"""Redmine (Debian's package, Rails with SQLite and puma) as the application under test of
tests/e2e/test_redmine_e2e.py: a Rails application whose activity pages answer a browser's
revalidation with 304, as GitLab's and the map site's Rails may."""
