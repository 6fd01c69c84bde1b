"""Ctrl-C (SIGINT) in the middle of ``webinfer generate`` and ``webinfer build``: one line ("webinfer:
interrupted"), exit status 130, no traceback, and no half-written artifact left as if complete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _interrupt_when(proc, stream, seen) -> tuple[int, str]:
    """Read ``stream`` until ``seen(text so far)``, then SIGINT; returns (exit status, stderr)."""
    got = b""
    while not seen(got):
        b = stream.read(1)
        if not b:
            break
        got += b
    assert seen(got), f"the command ended before the interrupt: {got[-300:]!r}"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, (got if stream is proc.stderr else b"").decode(errors="replace") + err.decode(
        errors="replace")


@pytest.fixture(scope="module")
def chat_wi(tiny_chat_dir, tmp_path_factory):
    import webinfer

    art = tmp_path_factory.mktemp("interrupt") / "chat.wi"
    webinfer.build(str(tiny_chat_dir / "model.onnx"), str(art), max_seq=2048, target="software")
    return art


def test_ctrl_c_while_generating(chat_wi):
    proc = subprocess.Popen([sys.executable, "-m", "webinfer.cli", "generate", str(chat_wi), "--prompt", "Hello",
                             "--max-new-tokens", "2000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    rc, err = _interrupt_when(proc, proc.stdout, lambda text: len(text) >= 3)  # (tokens are streaming)
    assert rc == 130, err
    assert "Traceback" not in err and [ln for ln in err.splitlines() if ln.startswith("webinfer:")] == [
        "webinfer: interrupted"], err


def test_ctrl_c_while_building(tiny_chat_dir, tmp_path):
    out = tmp_path / "cut.wi"
    proc = subprocess.Popen([sys.executable, "-m", "webinfer.cli", "build", str(tiny_chat_dir / "model.onnx"), "-o",
                             str(out), "--target", "software"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV)
    rc, err = _interrupt_when(proc, proc.stderr, lambda text: b"lowering" in text)
    assert rc == 130, err[-500:]
    assert "Traceback" not in err and err.rstrip().endswith("webinfer: interrupted"), err[-500:]
    assert not out.exists() or not (out / "manifest.json").exists(), os.listdir(out)
