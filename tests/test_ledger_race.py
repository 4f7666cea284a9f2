"""Two app sessions and two CLI processes race on one dataset's budget in one ledger store: the
total charged never exceeds the budget, and every charge is a release someone was shown or
wrote. Real processes: each app session is the app's pages run by Streamlit's ``AppTest`` in a
process of its own, each CLI is ``dpcore.cli.main`` in a process of its own; all of them start
their draws at the same moment (a go file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpcore.ledger_store import LedgerStore

pytest.importorskip("streamlit.testing.v1")

ROOT = Path(__file__).resolve().parents[1]

APP_SESSION = """
import json, os, sys, time
from pathlib import Path
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=600)
at.run()
at.switch_page("../pages/release.py").run()
Path(sys.argv[2]).write_text("ready")
while not Path(sys.argv[3]).exists():
    time.sleep(0.005)
attempts = []
for _ in range(int(sys.argv[4])):
    before = len(at.session_state["release_history"]) if "release_history" in at.session_state else 0
    next(b for b in at.button if b.label == "Draw release").click().run()
    after = len(at.session_state["release_history"]) if "release_history" in at.session_state else 0
    attempts.append("charged" if after == before + 1 else " | ".join(e.value for e in at.error))
history = at.session_state["release_history"] if "release_history" in at.session_state else []
print(json.dumps({"history": [json.loads(h.card)["sha256"] for h in history], "attempts": attempts,
                  "exceptions": [e.value for e in at.exception]}))
"""

CLI_PROCESS = """
import sys, time
from pathlib import Path
from dpcore.cli import main
Path(sys.argv[1]).write_text("ready")
while not Path(sys.argv[2]).exists():
    time.sleep(0.005)
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.slow
def test_two_app_sessions_and_two_cli_processes_never_overrun_one_budget(tmp_path):
    store_path = tmp_path / "ledger.sqlite"
    LedgerStore(store_path).register("bundled:digits", 2.5, label="digits")
    env = {**os.environ, "DP_EXPLORER_LEDGER": str(store_path)}
    go = tmp_path / "go"
    apps = [subprocess.Popen([sys.executable, "-c", APP_SESSION, str(ROOT / "app" / "streamlit_app.py"),
                              str(tmp_path / f"app{i}.ready"), str(go), "2"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    clis = [subprocess.Popen([sys.executable, "-c", CLI_PROCESS, str(tmp_path / f"cli{i}.ready"), str(go),
                              "release", "local-gaussian", "digits", "--epsilon", "1", "--delta", "1e-6",
                              "-o", str(tmp_path / f"cli{i}.csv"), "--ledger", str(store_path)],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    deadline = time.monotonic() + 300
    ready = [tmp_path / f"app{i}.ready" for i in range(2)] + [tmp_path / f"cli{i}.ready" for i in range(2)]
    while not all(p.exists() for p in ready):
        assert time.monotonic() < deadline, "the processes did not get ready"
        assert all(p.poll() is None for p in apps + clis), [p.stderr.read() for p in apps + clis]
        time.sleep(0.05)
    go.write_text("go")  # six draws of epsilon 1 (two per app session, one per CLI) against 2.5
    outs = [p.communicate(timeout=600) for p in apps]
    cli_results = [(p.wait(timeout=600), p.communicate()[1]) for p in clis]
    sessions = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert all(not s["exceptions"] for s in sessions), sessions

    ledger = LedgerStore(store_path).ledger("bundled:digits")
    assert ledger.total_epsilon <= 2.5  # never overrun ...
    assert len(ledger.entries) == 2  # ... and the budget is used: two of the six draws fit
    # every charge is a release someone was shown (app history) or wrote (CLI card), and vice versa
    shown = [sha for s in sessions for sha in s["history"]]
    written = [json.loads((tmp_path / f"cli{i}.card.json").read_text())["sha256"]
               for i, (code, _) in enumerate(cli_results) if code == 0]
    assert sorted(e.sha256 for e in ledger.entries) == sorted(shown + written)
    refused_cli = [err for code, err in cli_results if code != 0]
    assert all(code in (0, 2) for code, _ in cli_results)
    assert all("over the budget" in err for err in refused_cli), refused_cli
    attempts = [a for s in sessions for a in s["attempts"]]
    assert attempts.count("charged") == len(shown)
    assert all(a == "charged" or "over the budget" in a for a in attempts), attempts
