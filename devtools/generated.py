"""A generated file's command line: write it, or with --check say whether it is stale.

Used by the generators of one file each (devtools.settings_doc, devtools.chart), whose
output is committed and compared in CI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(prog: str, doc: str | None, target: Path, render: Callable[[], str],
                   argv: list[str] | None = None) -> int:
    """`python -m <prog> [--check] [--out FILE]`: 0 written or up to date, 1 stale (--check)."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the file differs (writes nothing)")
    parser.add_argument("--out", type=Path, default=target, help="the file to write")
    args = parser.parse_args(argv)
    text = render()
    current = args.out.read_text() if args.out.is_file() else ""
    if current == text:
        print(f"{args.out} is up to date")
        return 0
    if args.check:
        print(f"{args.out} is stale: run python -m {prog}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0
