"""Checks on command-line arguments, made before any work starts (so a bad flag never costs a build or a run).

argparse ``type=`` functions for numbers (finite, in range), and path checks: an output file must be
creatable, an output folder must be creatable or an old webinfer artifact. Every failure is one line
``webinfer: error: ...`` and exit status 2 (``WebinferParser.error``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from .errors import WebinferError

SEED_MAX = 2**32 - 1  # the sampler's PCG seed is one u32


class WebinferParser(argparse.ArgumentParser):
    """argparse's usage errors as our one-line form, with a pointer to ``--help`` instead of the usage."""

    def error(self, message: str):
        print(f"webinfer: error: {message} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def port(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port 0-65535 (0: any free port), got {text!r}")
    return value


def seed(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be in 0..{SEED_MAX} (the sampler's seed is 32 bits), got {text!r}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def check_output_file(path: str, flag: str) -> None:
    """``path`` can be written: not a folder, its folder exists and is writable (checked before the work)."""
    if os.path.isdir(path):
        raise WebinferError(f"{flag} {path}: is a folder; give a file name")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise WebinferError(f"{flag} {path}: file is not writable")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise WebinferError(f"{flag} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise WebinferError(f"{flag} {path}: folder {folder} is not writable")


def check_output_folder(path: str, flag: str) -> None:
    """``path`` is a folder that can be created (its nearest existing parent is a writable folder) or one
    that already exists and is writable."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise WebinferError(f"{flag} {path}: exists and is not a folder")
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise WebinferError(f"{flag} {path}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise WebinferError(f"{flag} {path}: {probe} is not writable")
