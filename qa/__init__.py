"""Executable proof of planted bugs (sandboxed pytest, Jest and pgTAP runs), verdicts, and the
review workflow."""
