"""Ctrl-C while the ``dpcore`` command is still starting: one line and exit 130, no traceback.

``dpcore.cli`` imports NumPy, pandas, SciPy and scikit-learn before :func:`dpcore.cli.main` can
install its own handlers (one to several seconds on a busy machine); a Ctrl-C or SIGTERM in that
time would print Python's ``KeyboardInterrupt`` traceback. Imported first by ``dpcore.cli``, this
module installs handlers that end such a process with one line, nothing having been read or
written yet; ``main`` replaces them. Only in the command's own process (the ``dpcore`` console
script or ``python -m dpcore.cli``): a library user importing ``dpcore.cli`` keeps their handlers.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = [
    "is_cli_process",
]


def is_cli_process() -> bool:
    """True in the process of the ``dpcore`` console script or of ``python -m dpcore.cli``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "dpcore" or (
        spec is not None and spec.name == "dpcore.cli")


def _exit_at_start(signum: int, frame: object) -> None:
    os.write(2, f"dpcore: interrupted by {signal.Signals(signum).name} while starting; nothing was "
                "written\n".encode())
    os._exit(128 + signum)


if is_cli_process():
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, _exit_at_start)
