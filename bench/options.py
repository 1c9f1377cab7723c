"""The command line every benchmark on a database shares."""

from __future__ import annotations

import argparse
import os


def database_parser(doc: str) -> argparse.ArgumentParser:
    """A parser whose help is the benchmark's docstring, with --database-url: a server where the
    benchmark may create its own scratch databases (default: as scripts/test finds one)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "WARMPOOL_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    return parser
