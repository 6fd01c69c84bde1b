"""The page's device-loss recovery (webinfer/site/recover.mjs, run by Node over fake devices): a loss in the middle
of a streaming operation re-runs it once the recovery is done and the page receives each streamed item once; a
replay that differs, an error that is not a loss, and a recovery that fails each end in one clear error, and the
next operation inherits none of them. (The real thing, in Chromium: tests/browser/test_device_loss.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

RECOVER_JS = Path(__file__).resolve().parents[1] / "webinfer" / "site" / "recover.mjs"
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node (scripts/setup.sh installs it)")

SCRIPT = """
const R = await import(process.argv[1]);
const fake = () => {
  let resolve;
  const lost = new Promise((r) => { resolve = r; });
  return { lost, destroy: () => resolve({ reason: "destroyed", message: "Device was destroyed." }) };
};
const events = [];
let device = fake();
let failOpen = 0;
const reopened = [];
R.configure({
  async openDevice() {
    if (failOpen > 0) { failOpen -= 1; throw new Error("Traceback (most recent call last):\\n  ...\\nno adapter"); }
    device = fake();
    R.watchDevice(device);
    return { device };
  },
  async reopen(g, handle) { reopened.push(handle); return { weights_ms: 1, reopen_ms: 2, restored_tokens: 5 }; },
  notify: (e) => events.push(e.phase),
});
R.watchDevice(device);
R.trackSession(1, { kind: "chat" });
R.trackSession(2, { kind: "session" });
R.untrackSession(2);
// An operation streaming `first` then losing the device (when `lose`), and `second` on the next call.
function streaming(first, second, lose = true) {
  let calls = 0;
  return async (msg, post) => {
    calls += 1;
    const ids = calls === 1 ? first : second;
    for (const id of ids) post({ type: "token", token: { id, text: String(id) } });
    if (calls === 1 && lose) {
      device.destroy();
      throw new Error("WebGPU readback failed: AbortError");
    }
    if (calls === 1 && !lose) throw new Error("temperature must be a finite number >= 0");
    return { token_ids: second };
  };
}
async function attempt(op) {
  const posted = [];
  try {
    const value = await R.withRecovery(op, { op: "chat" }, (m) => posted.push(m.type === "token" ? m.token.id : m.type));
    return { posted, value };
  } catch (e) {
    return { posted, error: e.message };
  }
}
const out = {};
out.replayed = await attempt(streaming([7, 8], [7, 8, 9, 10]));
out.diverged = await attempt(streaming([7, 8], [7, 99, 9, 10]));
out.other = await attempt(streaming([7], [], false));
failOpen = 2;
device.destroy();
await new Promise((r) => setTimeout(r, 10));
out.failed = await attempt(async () => ({ ran: true }));
out.after = await attempt(async () => ({ ran: true }));
out.events = events;
out.reopened = reopened;
console.log(JSON.stringify(out));
"""


def test_recovery_replays_once_and_errors_stay_with_their_call():
    done = subprocess.run(["node", "--input-type=module", "-e", SCRIPT, RECOVER_JS.as_uri()], text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    replayed = out["replayed"]
    assert replayed["posted"] == [7, 8, "progress", 9, 10]  # each token once
    assert replayed["value"]["token_ids"] == [7, 8, 9, 10]
    assert replayed["value"]["device_recovery"]["reason"] == "destroyed"
    assert replayed["value"]["device_recovery"]["restored_tokens"] == 5
    assert out["diverged"]["posted"] == [7, 8, "progress"]
    assert out["diverged"]["error"].startswith("GPU device lost (destroyed: Device was destroyed.) during chat; "
                                               "the page recovered in ")
    assert "its replay differs from what was already streamed at item 2" in out["diverged"]["error"]
    assert out["other"] == {"posted": [7], "error": "temperature must be a finite number >= 0"}
    # Two losses recovered, then one whose recovery fails twice (while idle, and again for the next call): that
    # call gets the error in one line, the call after it a recovered device.
    assert out["failed"]["error"] == "GPU device lost (destroyed: Device was destroyed.) and not recovered: no adapter"
    assert out["after"]["value"]["ran"] is True
    assert out["events"] == ["lost", "recovered", "lost", "recovered", "lost", "failed", "failed", "recovered"]
    assert out["reopened"] == [1, 1, 1]  # the closed session 2 was not re-opened
