#!/usr/bin/env python3
"""Execute a notebook headless (nbclient) and write it with its outputs.

python3 tools/run_notebook.py notebooks/explore.ipynb [--out OUT.ipynb | --in-place] [--timeout 900]

By default the executed copy goes to build/notebooks/<name> (the committed notebook
stays as it is); --in-place writes the outputs into the notebook itself.
"""

import argparse
import os
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def target(notebook: str, out: "str | None", in_place: bool) -> str:
    """Where the executed notebook is written: --out, the notebook itself with
    --in-place, else build/notebooks/<its name> (never the committed file by default)."""
    if out:
        return out
    if in_place:
        return notebook
    return os.path.join("build", "notebooks", os.path.basename(notebook))


def main(argv: "list[str] | None" = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebook", help="notebook to execute")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, help="where to write it with outputs (default: build/notebooks/NAME)")
    where.add_argument("--in-place", action="store_true", help="write the outputs into the notebook itself")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    args = p.parse_args(argv)
    out = target(args.notebook, args.out, args.in_place)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
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
        nbformat.write(nb, out)
        return 1
    nbformat.write(nb, out)
    print(f"executed {args.notebook} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
