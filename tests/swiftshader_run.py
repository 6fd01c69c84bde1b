"""Run an artifact natively on Chromium's software Vulkan driver (SwiftShader, which the page's WebGPU runs on
here) instead of lavapipe: its built-in functions are not lavapipe's (sin/cos are 1.9e-4 off), so a numeric
difference between the page and native webinfer shows up natively, in seconds. The driver is chosen before the
process starts (VK_ICD_FILENAMES), hence a child process:

    python tests/swiftshader_run.py session ART FEEDS.npz OUT.npz     # InferenceSession.run(None, feeds)
    python tests/swiftshader_run.py prefill ART IDS.json OUT.npy      # a decoder's last-position prefill logits
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
ROOT = Path(__file__).resolve().parents[1]


def available() -> bool:
    return os.path.exists(ICD)


def run(kind: str, art: str, inputs: str, out: str, timeout: float = 600) -> None:
    """Run this script in a child whose only Vulkan driver is SwiftShader; fail with its output on an error."""
    env = dict(os.environ, VK_ICD_FILENAMES=ICD, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__, kind, art, inputs, out], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "swiftshader" in proc.stdout.lower(), proc.stdout  # the adapter really was SwiftShader


def _session(art: str, feeds_path: str, out: str) -> None:
    from webinfer.runtime.inference import InferenceSession

    session = InferenceSession(art)
    print("adapter:", session.core.device.adapter_name)
    feeds = dict(np.load(feeds_path))
    names = [o.name for o in session.get_outputs()]
    np.savez(out, **dict(zip(names, session.run(None, feeds))))


def _prefill(art: str, ids_path: str, out: str) -> None:
    from webinfer.llm.generate import Generator
    from webinfer.runtime.session import run_sync

    gen = Generator.load(art)
    print("adapter:", gen.core.device.adapter_name)
    ids = json.loads(Path(ids_path).read_text())
    params = struct.pack("<4f", 0.0, 0.0, 1.0, 1.0)
    ticket = gen._launch(ids, 0, params, 0, 0, [], None, False, outputs=("logits",))
    (got,) = run_sync(gen.core.collect(ticket))
    np.save(out, np.frombuffer(got.data, np.float32))


if __name__ == "__main__":
    {"session": _session, "prefill": _prefill}[sys.argv[1]](*sys.argv[2:5])
