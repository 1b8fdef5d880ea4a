"""``python -m environments --host 127.0.0.1 --port 8765``"""

from __future__ import annotations

import argparse

from environments.app import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve the offline sandbox web sites.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    main(args.host, args.port)
