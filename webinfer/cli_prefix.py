"""``webinfer generate ART --prefix-cache FILE``: a prompt's KV cache kept in a file between runs.

The first run (no FILE yet) prefills the whole prompt and writes its positions to FILE; a later run restores the
positions its prompt shares with FILE's ids and prefills only the rest. A FILE that was altered, or made by
another artifact or kernel class, is an error (the user named it: never silently ignored, never restored).
"""

from __future__ import annotations

import os
import sys

from .cli_args import check_output_file


def add_generate_flags(g) -> None:
    g.add_argument("--prefix-cache", metavar="FILE",
                   help="restore the prompt's KV cache from FILE when it exists (the positions the prompt shares "
                        "with it), else write the prompt's positions to FILE after generating")


def before(gen, args) -> dict | None:
    """Restore FILE into the cache before the generation; returns what ``after`` needs (None: no flag)."""
    path = getattr(args, "prefix_cache", None)
    if not path:
        return None
    if not os.path.isfile(path):
        check_output_file(path, "--prefix-cache")  # before the generation, not after it
        return {"path": path, "restored": 0}
    n = gen.load_prefix(path, gen.prompt_ids(args.prompt, chat=args.chat))
    print(f"[prefix cache: {n} positions restored from {path}]", file=sys.stderr)
    return {"path": path, "restored": n}


def after(gen, args, state: dict | None) -> None:
    """Write the prompt's positions to FILE when it did not exist (the generation left them in the cache)."""
    if state is None or state["restored"]:
        return
    n = len(gen.stats.get("prompt_ids") or [])
    if n and len(gen._cached) >= n:
        gen.save_prefix(state["path"], n)
        print(f"[prefix cache: {n} positions saved to {state['path']}]", file=sys.stderr)
