"""Hostile files and parameters, run as a user runs them: each case in its own process.

Every case is a ``dpcore`` command (or, for the app, an ``AppTest`` session) run in a subprocess
against the code of a checkout (``--code``, default this one; ``PYTHONPATH`` points at it), with a
time limit (``--timeout``, 120 s, as the review that found them) and an address-space limit
(``--memory-cap``, 16 GiB: a runaway case fails with MemoryError instead of taking the machine).
Measured per case: the exit status, the number of stderr lines and the first error line, the
process's peak RSS (``wait4``'s ``ru_maxrss``), the wall time, and whether anything was left in the
output folder. The files are made in a temporary folder (the largest: a 10 MB CSV, a 300,000-row
Parquet folder; the bombs are a few KB).

Usage::

    python benchmarks/hostile_cases.py --json after.json                     # this checkout
    python benchmarks/hostile_cases.py --code /path/to/old/checkout --json before.json
    python benchmarks/hostile_cases.py --table before.json after.json         # the two side by side
    python benchmarks/hostile_cases.py --only classes                         # cases whose id has it

App cases need Streamlit's ``AppTest``; the scheduler case opens a TCP listener on 127.0.0.1 that
accepts connections and never answers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    case: str
    status: int | None
    lines: int
    message: str
    rss_mb: float
    seconds: float
    left: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ files
def _table(path: Path, rows: int, *, label: str = "y") -> Path:
    path.write_text(f"a,b,{label}\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(rows)))
    return path


def _bounds(work: Path) -> str:
    path = work / "ab.json"
    path.write_text('{"a": [0, 10], "b": [0, 10]}')
    return str(path)


def _text_bomb(path: Path, rows: int, *, typed: bool) -> Path:
    """A text column of one 1 MiB value on ``rows`` rows, as a dictionary (a few KB on disk)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    one = pa.array(["x" * (1 << 20)])
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), one)
    pq.write_table(
        pa.table({"a": np.arange(rows, dtype=float), "s": column}),
        path,
        compression="zstd",
        store_schema=typed,
        dictionary_pagesize_limit=8 << 20,
    )
    return path


def _wide_gzip(path: Path, rows: int = 199_000, columns: int = 1_000) -> Path:
    row = (",".join(["0"] * columns) + "\n").encode()
    with gzip.open(path, "wb", compresslevel=6) as fh:
        fh.write((",".join(f"x{j}" for j in range(columns)) + "\n").encode())
        for _ in range(rows // 1000):
            fh.write(row * 1000)
    return path


def _wide(work: Path, columns: int = 100_000) -> tuple[str, str]:
    path = work / "wide100k.csv"
    if not path.exists():
        header = ",".join(f"x{j}" for j in range(columns))
        rows = "\n".join(",".join(str((i + j) % 2) for j in range(columns)) for i in range(4))
        path.write_text(header + "\n" + rows + "\n")
        (work / "wide100k.bounds.json").write_text(json.dumps({f"x{j}": [0, 1] for j in range(columns)}))
    return str(path), str(work / "wide100k.bounds.json")


def _ten_mb(work: Path) -> str:
    path = work / "ten.csv"
    if not path.exists():
        path.write_text(
            "a,b,y\n"
            + "".join(
                f"{(i * 37) % 1000 / 100:.3f},{(i * 11) % 997 / 100:.3f},{i % 2}\n" for i in range(450_000)
            )
        )
    return str(path)


def deep_tables(work: Path) -> dict[str, str]:
    """A CSV with a label outside the class list at row 250,123, one with text at row 260,001,
    and a Parquet folder with a label 9 at row 77,777 of its third file."""
    import numpy as np
    import pandas as pd

    if not (work / "deep_label.csv").exists():
        rng = np.random.default_rng(0)
        n = 300_000
        frame = pd.DataFrame(
            {"a": rng.uniform(0, 10, n).round(3), "b": rng.uniform(0, 10, n).round(3), "y": np.arange(n) % 2}
        )
        labels = frame.astype({"y": object})
        labels.loc[250_123, "y"] = 7
        labels.to_csv(work / "deep_label.csv", index=False)
        text = frame.astype({"b": object})
        text.loc[260_001, "b"] = "oops"
        text.to_csv(work / "deep_text.csv", index=False)
        (work / "deep_pq").mkdir()
        for k in range(3):
            part = frame.iloc[k * 100_000 : (k + 1) * 100_000].copy()
            if k == 2:
                part.iloc[77_777, 2] = 9
            part.to_parquet(work / "deep_pq" / f"part{k}.parquet", index=False, row_group_size=20_000)
    return {k: str(work / k) for k in ("deep_label.csv", "deep_text.csv", "deep_pq")}


def _deep_text(work: Path) -> str:
    """3,000,000 rows with the text 'oops' in column b at row 2,900,001: pandas reads the file in
    chunks, so the column holds floats above the chunk with the text."""
    path = work / "deep_text3m.csv"
    if not path.exists():
        with open(path, "w") as fh:
            fh.write("a,b,y\n")
            for i in range(3_000_000):
                b = "oops" if i == 2_900_001 else f"{(i * 7) % 1000 / 100:.3f}"
                fh.write(f"{(i * 3) % 1000 / 100:.3f},{b},{i % 2}\n")
    return str(path)


CLASS_ARGS = ["--label", "y", "--task", "classification", "--classes", "0,1"]


def _release(work: Path, mechanism: str, source: str, *extra: str, out: str = "out.csv") -> list[str]:
    return ["release", mechanism, source, "-o", str(work / "out" / out), *extra]


def _dask(work: Path, source: str, *extra: str, out: str = "dask.o") -> list[str]:
    """``release local-gaussian SOURCE --engine dask EXTRA`` with the class list and public bounds."""
    return _release(work, "local-gaussian", source, "--engine", "dask", *extra, *CLASS_ARGS, "--bounds",
                    _bounds(work), out=out)


# ------------------------------------------------------------------------------------------ cases
def cli_cases(work: Path) -> dict[str, Callable[[], list[str]]]:
    """Case id -> a function that makes the case's files and returns the dpcore arguments."""
    bad = ROOT / "tests" / "data" / "bad"
    far = str(bad / "far_outside_bounds.csv")
    far_bounds = ["--bounds", str(bad / "far_outside_bounds.bounds.json")]
    lg = "local-gaussian"
    cases: dict[str, Callable[[], list[str]]] = {}

    def header_fewer_fields() -> list[str]:
        path = work / "shift.csv"
        path.write_text("a,b,y\n" + "".join(f"{i},{i % 5},{i % 3},{i % 2}\n" for i in range(40)))
        return _release(work, lg, str(path), *CLASS_ARGS, "--bounds", _bounds(work))

    def short_line_impute() -> list[str]:
        path = work / "short.csv"
        path.write_text("y,a,b\n" + "0,1,2\n" * 10 + "1,2\n" + "1,4,5\n" * 10)
        return _release(work, lg, str(path), *CLASS_ARGS, "--bounds", _bounds(work), "--missing", "impute")

    def bomb(typed: bool = True) -> str:
        return str(_text_bomb(work / f"textbomb{'' if typed else '_plain'}.parquet", 3_000, typed=typed))

    cases["header with fewer fields than the rows (exit 0, shifted columns)"] = header_fewer_fields
    cases["short line with --missing impute (imputed as empty cells)"] = short_line_impute
    cases["Parquet text bomb, 8 KB: describe"] = lambda: ["describe", bomb(), "--label", ""]
    cases["Parquet text bomb, 8 KB: release --engine dask"] = lambda: _release(
        work, lg, bomb(), "--engine", "dask", "--label", "", "--data-bounds", out="dask.o")
    cases["Parquet text bomb, no Arrow schema: describe"] = lambda: ["describe", bomb(False), "--label", ""]
    cases["1,000-column gzip CSV, 199,000 rows: describe"] = lambda: [
        "describe", str(_wide_gzip(work / "wide.csv.gz")), "--label", ""]
    cases["1,000-column gzip CSV, 199,000 rows: release"] = lambda: _release(
        work, lg, str(_wide_gzip(work / "wide.csv.gz")), "--label", "", "--data-bounds")
    for mech in ("dppro", "jl-laplace", "ron-gauss"):
        cases[f"100,000 columns x 4 rows, {mech}, no bounds (refusal)"] = (
            lambda m=mech: _release(work, m, _wide(work)[0], "--label", ""))
        cases[f"100,000 columns x 4 rows, {mech}, public bounds"] = (
            lambda m=mech: _release(work, m, _wide(work)[0], "--label", "", "--bounds", _wide(work)[1]))

    def many_categories() -> list[str]:
        path = work / "cats.csv"
        path.write_text("a,c,y\n" + "".join(f"{i % 7},k{i % 50},{i % 2}\n" for i in range(100)))
        (work / "cats.json").write_text(json.dumps({"c": [f"k{i}" for i in range(200_003)]}))
        cats = str(work / "cats.json")
        return _release(work, lg, str(path), *CLASS_ARGS, "--categories", cats, "--data-bounds")

    cases["200,003-category list on 100 rows"] = many_categories
    for mech in ("jl-laplace", "dppro", "ron-gauss", "pca-gauss"):
        cases[f"calibrate {mech} --n 10 --features 100000000"] = (
            lambda m=mech: ["calibrate", m, "--n", "10", "--features", "100000000"])
        cases[f"calibrate {mech} --n-classes 1000000000"] = (
            lambda m=mech: ["calibrate", m, "--n", "10", "--features", "5", "--task", "classification",
                            "--n-classes", "1000000000"])
    for classes in ("0,1.0,1", "1,01,2", "01,1", "1,2,2.0"):
        cases[f"--classes {classes}"] = (lambda c=classes: _release(
            work, lg, far, "--label", "y", "--task", "classification", "--classes", c, *far_bounds))
    for name, content in (("null", "[0, null]"), ("nested", "[[0, 1], [2]]")):
        def classes_file(name: str = name, content: str = content) -> list[str]:
            path = work / f"classes_{name}.json"
            path.write_text(content)
            return _release(work, lg, far, "--label", "y", "--task", "classification", "--classes", str(path),
                            *far_bounds)
        cases[f"class list with {name}"] = classes_file

    def codes() -> list[str]:
        path = work / "codes.csv"
        path.write_text("a,b,y\n" + "".join(f"{i % 7},{i % 5},{['01', '1'][i % 2]}\n" for i in range(60)))
        return ["describe", str(path), "--label", "y", "--task", "classification", "--bounds", _bounds(work)]

    def utf(kind: str) -> list[str]:
        text = "a,b,y\n" + "".join(f"{i % 7},{i % 5},{i % 2}\n" for i in range(50))
        path = work / f"{kind}.csv"
        path.write_bytes(text.encode("utf-16-le") if kind == "utf16_no_bom" else text.encode("utf-32"))
        return ["describe", str(path), *CLASS_ARGS, "--bounds", _bounds(work)]

    def csv_folder() -> list[str]:
        folder = work / "csvdir"
        folder.mkdir(exist_ok=True)
        for k in range(3):
            _table(folder / f"part{k}.csv", 100)
        return _release(work, lg, str(folder), *CLASS_ARGS, "--bounds", _bounds(work), out="csvdir.o")

    small = lambda: str(_table(work / "t.csv", 400))  # noqa: E731
    cases["label codes 01 and 1, describe (one class '1')"] = codes
    cases["UTF-16 without a byte-order mark"] = lambda: utf("utf16_no_bom")
    cases["UTF-32 with a byte-order mark"] = lambda: utf("utf32")
    cases["Parquet with two columns named a"] = lambda: [
        "describe", str(bad / "parquet_duplicate_names.parquet"), "--label", ""]
    cases["epsilon 1e308 with delta (dpmix)"] = lambda: _release(
        work, "dpmix", far, *CLASS_ARGS, *far_bounds, "--epsilon", "1e308", "--delta", "1e-5")
    cases["a folder of CSV files"] = csv_folder
    cases["--label-bounds 0.5 0.5"] = lambda: _release(
        work, lg, far, "--label", "y", "--task", "regression", "--label-bounds", "0.5", "0.5", *far_bounds)
    cases["--scheduler: a listener that never answers"] = lambda: _dask(
        work, small(), "--scheduler", f"tcp://127.0.0.1:{MUTE_PORT}")
    cases["--scheduler inproc://x"] = lambda: _dask(work, small(), "--scheduler", "inproc://x")
    for size in ("1", "16", "0", "-1"):
        cases[f"--blocksize {size} on a 10 MB CSV"] = lambda b=size: _dask(
            work, _ten_mb(work), f"--blocksize={b}")
    deep = "label 9 at row 77,777 of a Parquet folder's third file"
    cases[deep] = lambda: _dask(work, deep_tables(work)["deep_pq"])
    cases["label 7 at row 250,123 of a CSV read in blocks"] = lambda: _dask(
        work, deep_tables(work)["deep_label.csv"], "--blocksize", "1MiB")
    cases["text at row 2,900,001 of a 60 MB CSV column (Dask)"] = lambda: _dask(work, _deep_text(work))
    cases["-o L.json --ledger L.json --engine dask"] = lambda: _dask(
        work, small(), "--ledger", str(work / "out" / "L.json"), out="L.json")
    return cases


APP_SCRIPT = r"""
import json, os, sys, tempfile
os.environ.setdefault("DP_EXPLORER_LEDGER", os.path.join(tempfile.mkdtemp(), "ledger.sqlite"))
from streamlit.testing.v1 import AppTest
root, kind, path = sys.argv[1:4]
at = AppTest.from_file(os.path.join(root, "app", "streamlit_app.py"), default_timeout=300)
at.run()
data = open(path, "rb").read()
name = os.path.basename(path)
if kind == "ledger":
    at.switch_page(os.path.join(root, "pages", "release.py")).run()
    up = next(u for u in at.get("file_uploader") if "ledger" in u.proto.label.lower())
    up.set_value((name, data, "application/json")).run()
    at.run()
else:
    at.switch_page(os.path.join(root, "pages", "data.py")).run()
    at.radio(key="p:data_source").set_value("Upload a file").run()
    at.get("file_uploader")[0].set_value((name, data, "application/octet-stream")).run()
    buttons = [b for b in at.button if b.label == "Use this table"]
    if buttons and not at.exception:
        buttons[0].click().run()
shown = ([e.value for e in at.exception] or [e.value for e in at.error]
         or [w.value for w in [*at.warning, *at.success]])
print(json.dumps({"exception": bool(at.exception), "message": (shown or ["(no error shown)"])[0],
                  "dataset": at.session_state.dataset.name}))
"""


def app_cases(work: Path) -> dict[str, Callable[[], tuple[str, str]]]:
    def ledger() -> tuple[str, str]:
        entry = {
            "mechanism": "local-gaussian",
            "epsilon": 1e308,
            "delta": 0.0,
            "neighbouring": "replace-one",
            "dataset": "digits",
            "created_utc": "2026-01-01T00:00:00+00:00",
        }
        path = work / "L1e308.json"
        path.write_text(
            json.dumps(
                {
                    "format": "dpcore-ledger",
                    "version": 2,
                    "entries": [dict(entry, sha256="a" * 64), dict(entry, sha256="b" * 64)],
                }
            )
        )
        return "ledger", str(path)

    return {
        "app: Parquet of 400 x 1 MiB texts, 1.6 KB, upload": lambda: (
            "upload",
            str(_text_bomb(work / "app_texts.parquet", 400, typed=False)),
        ),
        "app: dictionary-typed Parquet, 20,000 x 1 MiB, upload + Use this table": lambda: (
            "upload",
            str(_text_bomb(work / "app_categorical.parquet", 20_000, typed=True)),
        ),
        "app: ledger with two epsilon = 1e308 entries": ledger,
    }


# ------------------------------------------------------------------------------------------ running
MUTE_PORT = 0


def _mute_listener() -> socket.socket:
    global MUTE_PORT
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    MUTE_PORT = server.getsockname()[1]
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server


def run(
    argv: list[str], code: Path, timeout: float, cap: int, cwd: Path
) -> tuple[int | None, str, str, float, float]:
    """Run ``argv`` in a new process group under the caps: (status or None on timeout, stdout,
    stderr, peak RSS MB, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(code), "DPCORE_SCHEDULER_TIMEOUT": "30"}
    env.pop("DPCORE_DEBUG", None)

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limits,
        start_new_session=True,
    )
    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    seconds = time.perf_counter() - start
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL and seconds >= timeout
    code_ = None if killed else (os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
    return code_, out.decode(errors="replace"), err.decode(errors="replace"), usage.ru_maxrss / 1024, seconds


KILLED = "SIGKILL during a Dask release, then a second release to the same -o"


def killed_run(work: Path, code: Path, cap: int) -> Result:
    """A Dask release killed with SIGKILL while it writes its parts, then the same release again:
    the hidden temporary folders beside the output after the kill, and after the second run."""
    source, out = _ten_mb(work), work / "out" / "killed.o"
    out.parent.mkdir(exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "dpcore.cli",
        *_release(
            work,
            "local-gaussian",
            source,
            "--engine",
            "dask",
            "--blocksize",
            "256KiB",
            "--format",
            "csv",
            *CLASS_ARGS,
            "--bounds",
            _bounds(work),
            out="killed.o",
        ),
    ]
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.Popen(
        cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # until its parts are being written
        hidden = [p for p in out.parent.iterdir() if p.name.startswith(".killed.o.") and p.is_dir()]
        if hidden and any(hidden[0].iterdir()):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    after_kill = sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".killed.o."))
    status, _, err, rss, seconds = run(cmd, code, 300, cap, work)
    after_run = sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".killed.o."))
    message = f"after the kill: {after_kill or 'nothing'}; after the second run: {after_run or 'nothing'}"
    for p in out.parent.iterdir():
        subprocess.run(["rm", "-rf", str(p)], check=False)
    return Result(KILLED, status, len(err.strip().splitlines()), message, round(rss), round(seconds, 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose dpcore and app to run")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--memory-cap", default="16G", help="address-space limit of each case (RLIMIT_AS)")
    ap.add_argument("--only", default="", help="run the cases whose id contains this text")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--table", type=Path, nargs="+", help="print the saved runs side by side (no run)")
    args = ap.parse_args(argv)
    if args.table:
        print(table([json.loads(p.read_text()) for p in args.table], [p.stem for p in args.table]))
        return 0
    sys.path.insert(0, str(ROOT))
    from dpcore.limits import env_bytes

    os.environ["HOSTILE_CAP"] = args.memory_cap
    cap = env_bytes("HOSTILE_CAP", 16 << 30)
    results: list[Result] = []
    server = _mute_listener()
    try:
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            work = Path(tmp)
            jobs: list[tuple[str, list[str]]] = []
            for case, build in cli_cases(work).items():
                if args.only in case:
                    jobs.append((case, [sys.executable, "-m", "dpcore.cli", *build()]))
            for case, build in app_cases(work).items():
                if args.only in case:
                    kind, path = build()
                    jobs.append((case, [sys.executable, "-c", APP_SCRIPT, str(args.code), kind, path]))
            if args.only in KILLED:
                results.append(killed_run(work, args.code, cap))
            for case, cmd in jobs:
                out_dir = work / "out"
                out_dir.mkdir(exist_ok=True)
                status, out, err, rss, seconds = run(cmd, args.code, args.timeout, cap, work)
                lines = [ln for ln in err.strip().splitlines() if ln.strip()]
                if cmd[1] == "-c":  # an app case: what the page showed
                    try:
                        shown = json.loads(out.strip().splitlines()[-1])
                        message = ("EXCEPTION: " if shown["exception"] else "") + shown["message"]
                        status = status if status else (1 if shown["exception"] else 0)
                    except (ValueError, IndexError, KeyError):
                        message = (lines or ["(nothing)"])[-1]
                elif status == 0:  # what a user reads: the classes described, or the files written
                    said = out.strip().splitlines()
                    message = next(
                        (ln.strip() for ln in said if "classes:" in ln or ln.startswith("wrote")),
                        (said or lines or ["(nothing)"])[0],
                    )
                else:
                    errors = [ln for ln in lines if ln.startswith("dpcore:")]
                    message = (errors or lines or out.strip().splitlines()[-1:] or ["(nothing)"])[0]
                left = sorted(p.name for p in out_dir.iterdir())
                results.append(
                    Result(case, status, len(lines), message[:300], round(rss), round(seconds, 1), left)
                )
                for p in out_dir.iterdir():
                    subprocess.run(["rm", "-rf", str(p)], check=False)
                r = results[-1]
                print(
                    f"{r.status!s:>4} {r.rss_mb:>7.0f} MB {r.seconds:>6.1f} s  {case}: {r.message[:150]}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        server.close()
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(table([[asdict(r) for r in results]], [str(args.code)]))
    return 0


def table(runs: list[list[dict]], names: list[str]) -> str:
    """One row per case: exit status, peak RSS, seconds and the message of each run."""
    cases = list(dict.fromkeys(r["case"] for run_ in runs for r in run_))
    head = ["case"] + [f"{n}: {c}" for n in names for c in ("exit", "RSS MB", "s", "message")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        cells = [case]
        for run_ in runs:
            r = next((x for x in run_ if x["case"] == case), None)
            if r is None:
                cells += ["", "", "", ""]
                continue
            status = "killed" if r["status"] is None else str(r["status"])
            message = r["message"].replace("|", "\\|")
            if r["left"]:
                message += f" (left: {', '.join(r['left'])[:60]})"
            cells += [status, f"{r['rss_mb']:.0f}", f"{r['seconds']:.1f}", message[:220]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
