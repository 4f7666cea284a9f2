"""Writing a release's files all or none: the claim on each output (:func:`output_lock`: a hidden
``flock``-ed marker beside it, dropped by the kernel when its process dies), the bytes written to
hidden temporaries beside the targets, hard-link backups of files replaced, and the step that
renames them all into place or restores everything (:class:`StagedFiles`). Used by
:meth:`dpcore.release.Release.save`, the ledger and the Dask engine's writer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["OUTPUT_LOCK_SUFFIX", "OutputBusyError", "StagedFiles", "output_lock", "output_lock_path",
           "release_paths"]


def release_paths(path: str | Path) -> dict[str, Path]:
    """The files :meth:`Release.save` writes for ``path``: ``csv`` (``path``), ``card``
    (``<stem>.card.json``) and, for releases with a public map, ``transform``
    (``<stem>.transform.npz``); ``<stem>`` is ``path``'s name without a ``.csv`` ending."""
    path = Path(path)
    base = path.name[:-4] if path.name.lower().endswith(".csv") else path.name
    return {"csv": path, "card": path.with_name(base + ".card.json"),
            "transform": path.with_name(base + ".transform.npz")}


class OutputBusyError(ValueError):
    """Another release in flight (another process or thread) is writing one of the output files."""


#: Suffix of the hidden marker ``.<name>.release-lock`` beside each file of a release in flight.
#: A marker is claimed with an exclusive ``flock``, which the kernel drops when its process dies,
#: so a marker left by a killed run never blocks anything; it is hidden and named unlike any
#: output, so it is never taken for one (the next release to that path removes it).
OUTPUT_LOCK_SUFFIX = ".release-lock"
_held: dict[str, list[int]] = {}  # marker path -> [owning thread, depth] for this process's claims
_held_guard = threading.Lock()


def output_lock_path(target: str | Path) -> Path:
    """The marker claimed while a release writes ``target``: ``.<name>.release-lock`` beside the
    file ``target`` resolves to (so two spellings of one path share one marker)."""
    real = Path(os.path.realpath(target))
    return real.with_name(f".{real.name}{OUTPUT_LOCK_SUFFIX}")


@contextmanager
def output_lock(path: str | Path) -> Iterator[dict[str, Path]]:
    """Claim every file a release to ``path`` writes (:func:`release_paths`) for the block.

    Refuses at once, without waiting, when another release in flight holds one of them: two
    releases never interleave their files (``-o a.csv`` and ``-o a`` share ``a.card.json``). The
    claim is an exclusive ``flock`` on a hidden marker per file (:data:`OUTPUT_LOCK_SUFFIX`),
    taken with a non-blocking call, re-checked against the marker's path after locking (a previous
    holder may have removed it meanwhile), and removed on the way out. Re-entrant in one thread
    (the CLI holds the claim for the whole command; :meth:`Release.save` takes it again). Once
    claimed, hidden temporaries of those files left by killed runs are removed.

    Yields the targets (as :func:`release_paths`).

    Raises
    ------
    OutputBusyError
        Naming the file and the process writing it (also for a marker that is a symbolic link or
        not a regular file).
    OSError
        The marker cannot be created (missing or read-only folder).
    """
    targets = release_paths(path)
    claims: list[tuple[Path, int | None]] = []
    try:
        for target in targets.values():
            marker = output_lock_path(target)
            if all(m != marker for m, _ in claims):
                claims.append((marker, _claim(marker, target)))
        if any(fd is not None for _, fd in claims):
            for target in targets.values():
                _remove_stale_temporaries(target)
        yield targets
    finally:
        for marker, fd in reversed(claims):
            _release_claim(marker, fd)


def _claim(marker: Path, target: Path) -> int | None:
    """Lock ``marker``; the descriptor holding the lock, or None for a re-entrant claim."""
    key = str(marker)
    with _held_guard:
        held = _held.get(key)
        if held is not None and held[0] == threading.get_ident():
            held[1] += 1
            return None
    while True:
        try:
            fd = os.open(marker, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the marker is a symbolic link
                raise OutputBusyError(f"{marker} (the in-flight marker of {target}) is a symbolic "
                                      "link; remove it or choose another output path") from None
            raise
        locked = False
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OutputBusyError(f"{marker} (the in-flight marker of {target}) is not a regular "
                                      "file; remove it or choose another output path")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                raise OutputBusyError(
                    f"{target} is being written by another release in flight"
                    + (f" (process {owner})" if owner.isdigit() else "")
                    + "; wait for it to finish or choose another output path") from None
            try:
                now = os.stat(marker, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is None or (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                os.close(fd)  # the holder removed this marker as we locked it: claim a fresh one
                continue
            locked = True
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            if locked:  # ours (locked, checked to be the file at that path): leave no marker behind
                with contextlib.suppress(OSError):
                    marker.unlink()
            os.close(fd)
            raise
        with _held_guard:
            _held[key] = [threading.get_ident(), 1]
        return fd


def _release_claim(marker: Path, fd: int | None) -> None:
    key = str(marker)
    with _held_guard:
        held = _held.get(key)
        if held is not None and held[1] > 1:
            held[1] -= 1
            return
        _held.pop(key, None)
    if fd is not None:
        try:
            marker.unlink(missing_ok=True)  # removed while still locked (see _claim's re-check)
        finally:
            os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Hidden temporaries of ``target`` (:func:`_write_temp` names) left by killed runs; only the
    claim holder writes them, so none is live."""
    real = Path(os.path.realpath(target))
    pattern = re.compile(rf"\.{re.escape(real.name)}\.[0-9a-f]{{12}}\.tmp")
    try:
        names = os.listdir(real.parent)
    except OSError:
        return
    for name in names:
        if pattern.fullmatch(name):
            tmp = real.parent / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(tmp).st_mode):
                    tmp.unlink()


def _hidden_temporary(target: Path) -> Path:
    """A new hidden name ``.<name>.<12 hex>.tmp`` beside ``target``: never taken for an output, and
    removed as a killed run's leftover by the next release to that path."""
    return target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")


def _write_temp(target: Path, payload: bytes) -> Path:
    """``payload`` in a new temporary file in ``target``'s folder (same file system: atomic rename)."""
    # "x": never reuse an existing file; created with the usual permissions (umask), like the
    # target would be (tempfile.mkstemp would make it owner-only).
    tmp = _hidden_temporary(target)
    try:
        with open(tmp, "xb") as fh:
            fh.write(payload)
    except BaseException:  # also KeyboardInterrupt / SystemExit from a signal handler
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _hard_link_backup(target: Path) -> Path | None:
    """A hidden hard link to the regular file ``target`` (named like :func:`_write_temp`'s
    temporaries, so a killed run's link is removed as theirs are), or None if there is no file or
    the file system has no hard links."""
    if not target.is_file() or target.is_symlink():
        return None
    backup = _hidden_temporary(target)
    try:
        os.link(target, backup)
    except OSError:
        return None
    return backup


@dataclass
class StagedFiles:
    """Complete temporary files (``temps``) waiting to be renamed onto their ``targets``."""

    targets: dict[str, Path]
    temps: dict[str, Path]
    #: Files of an earlier release to the same path that this release does not write (e.g. its
    #: ``<stem>.transform.npz`` when this release has no public map): removed on publish.
    stale: list[Path] = field(default_factory=list)

    def publish(self) -> dict[str, Path]:
        """Rename every temporary file into place and remove the :attr:`stale` files, or do
        nothing: if a rename fails (rare: the temporary files are complete), the targets already
        renamed are put back as they were (the previous files, kept meanwhile as hidden hard
        links, or nothing) and the stale files are restored, so a release is never left
        half-written, never mixed with an older release's files, and a failed one destroys
        nothing. Returns the targets."""
        backups = {key: _hard_link_backup(target) for key, target in self.targets.items()}
        placed: list[str] = []
        moved: dict[Path, Path] = {}  # stale file -> its hidden name until the release is in place
        try:
            for target in self.stale:
                if target.is_file() or target.is_symlink():
                    hidden = _hidden_temporary(target)
                    os.replace(target, hidden)
                    moved[target] = hidden  # only once moved: a failed move has nothing to restore
            for key, target in self.targets.items():
                os.replace(self.temps[key], target)
                del self.temps[key]
                placed.append(key)
        except BaseException:
            self.discard()
            for key in placed:
                backup = backups.pop(key)
                if backup is not None:
                    os.replace(backup, self.targets[key])
                else:
                    self.targets[key].unlink(missing_ok=True)
            for target, hidden in moved.items():
                os.replace(hidden, target)
            moved.clear()
            raise
        finally:
            for backup in backups.values():
                if backup is not None:
                    backup.unlink(missing_ok=True)
            for hidden in moved.values():
                hidden.unlink(missing_ok=True)
        return dict(self.targets)

    def discard(self) -> None:
        """Remove the temporary files not yet published."""
        for tmp in self.temps.values():
            tmp.unlink(missing_ok=True)
        self.temps.clear()

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _stage_all(files: dict[str, tuple[Path, bytes]]) -> StagedFiles:
    """Write every ``key: (target, payload)`` to a temporary file; if one fails, the others are
    removed and no target is touched."""
    staged = StagedFiles({key: target for key, (target, _) in files.items()}, {})
    try:
        for key, (target, payload) in files.items():
            staged.temps[key] = _write_temp(target, payload)
    except BaseException:
        staged.discard()
        raise
    return staged
