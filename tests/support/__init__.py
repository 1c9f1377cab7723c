"""Test helpers: finding a Postgres, per-test databases from a migrated template, tools."""
