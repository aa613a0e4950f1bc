"""What the launcher and the control panel pass to a launch script (json_hvd.py's flags).

The flags of source_code/horovod_fmnist.py that they use (--batch-size, --epochs, --train-subset, --json),
--marker (ignored; lets a test find a run's processes), and the JSON lines of docs/architecture.md. No
TensorFlow here: json_hvd.py must stay without it.
"""

import argparse
import json


def panel_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-subset", type=int, default=512)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--marker", default=None)
    return parser


def emit(args, event, **fields):
    if args.json:
        print(json.dumps({"event": event, **fields}), flush=True)
