"""Command line of the course library: ``python -m course_lib doctor``.

Introduced in notebooks/00_setup.ipynb.
"""

from __future__ import annotations

import argparse
import sys

from course_lib.environment.doctor import run_checks


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the chosen command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m course_lib",
                                     description="Tools of the distributed deep learning course.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("doctor", help="check the environment and print what to fix")
    prepare = commands.add_parser("prepare-data", help="prepare Fashion-MNIST for the loaders (once)")
    prepare.add_argument("--source", choices=("tfds", "keras"), default="tfds")
    args = parser.parse_args(argv)
    if args.command == "prepare-data":
        # late: data imports numpy; `doctor` must start even where numpy is broken
        from course_lib.training.data import DataError, load_arrays

        try:
            arrays = load_arrays(args.source)
        except DataError as error:
            print(f"prepare-data failed: {error}", file=sys.stderr)
            return 1
        print(f"Fashion-MNIST ready through {args.source}: {len(arrays.x_train)} training and "
              f"{len(arrays.x_test)} test images")
        return 0
    if args.command == "doctor":
        report = run_checks()
        print(report.text())
        return 0 if report.ok else 1
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
