#!/usr/bin/env python3
"""Execute a notebook headless (nbclient) and write it with its outputs.

python3 tools/run_notebook.py notebooks/explore.ipynb [--out OUT.ipynb] [--timeout 900]
"""

import argparse
import os
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebook", help="notebook to execute")
    p.add_argument("--out", default=None, help="where to write it with outputs (default: in place)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    args = p.parse_args()
    nb = nbformat.read(args.notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=args.timeout,
        kernel_name="python3",
        resources={"metadata": {"path": os.path.dirname(os.path.abspath(args.notebook))}},
    )
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"notebook failed: {e}", file=sys.stderr)
        nbformat.write(nb, args.out or args.notebook)
        return 1
    nbformat.write(nb, args.out or args.notebook)
    print(f"executed {args.notebook} -> {args.out or args.notebook}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
