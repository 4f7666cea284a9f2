"""Writing a release partition by partition: Parquet or CSV parts of a public size, the card with the
manifest's digest, the public transform; everything in a temporary folder renamed into place at the
end (:func:`write_release`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore.dask_engine.kernels import _BAR_STREAM, _cluster_client, _spilled
from dpcore.dask_engine.reading import DEFAULT_BLOCKSIZE, dask_delayed, is_lazy, public_part_rows
from dpcore.exceptions import NonFiniteNoiseError

if TYPE_CHECKING:
    from dpcore.release import Release


#: the card's ``noise_streams`` on this engine: where each noise record's random bits come from
NOISE_STREAMS = (
    "statistics (sums, moments, histograms) and DPMix's mixtures: drawn on the client with the sampler "
    "named in 'noise'; per-row noise (projections, perturbed rows, labels): drawn inside each "
    "partition's task with that sampler, partition i reading a ChaCha20 stream keyed by "
    "HMAC-SHA256(secret, i), one fresh 256-bit secret per release from os.urandom (a seeded preview: "
    "from the seed), never written")


# ------------------------------------------------------------------------------------ writing
def _checked_partition(frame: Any) -> Any:
    values = frame.select_dtypes("number").to_numpy()
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        raise NonFiniteNoiseError(f"the released table has {bad:,} NaN/inf value(s) in a partition; nothing "
                                  "is released: the noise overflows float64 arithmetic, use a larger epsilon")
    return frame


def _csv_line_end(release: Release) -> str:
    """The line end of every CSV part: ``"\\r\\n"`` where a column name or a class of the public
    class list holds a CR (as the in-memory CSV, where such a value appears: see
    :func:`dpcore.release.spreadsheet_safe_csv_chunks`), else ``"\\n"``; decided once, from public
    facts, not from what each part holds."""
    names = [*release.columns, *release.label_columns, *(release.public_facts.get("classes") or [])]
    return "\r\n" if any(isinstance(v, str) and "\r" in v for v in names) else "\n"


def _write_csv_part(frame: Any, path: Path, lineterminator: str) -> None:
    """One CSV part, written piece by piece as the in-memory release's CSV
    (:meth:`Release.to_csv_bytes`: number format, escaping)."""
    from dpcore.release import CSV_FLOAT_FORMAT, spreadsheet_safe_csv_chunks

    with open(path, "wb") as fh:
        for chunk in spreadsheet_safe_csv_chunks(frame, float_format=CSV_FLOAT_FORMAT,
                                                 lineterminator=lineterminator):
            fh.write(chunk)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_release(release: Release, output: str | os.PathLike, *, fmt: str = "parquet",
                  progress: bool = False, diagnostics: dict[str, Any] | None = None,
                  commit: Callable[[dict[str, Any]], Callable[[], None] | None] | None = None,
                  part_rows: int | None = None) -> dict[str, Path]:
    """Write ``release`` into the directory ``output``: ``part-*.parquet`` (or ``part-*.csv``),
    ``card.json`` and, if any, ``transform.npz``, partition by partition.

    Releases with parts already on the client's disk (:func:`_spilled`: DPMix's mixtures, labels
    noised on the client) are written with local threads; the others (synthetic rows, noisy
    projections) are drawn and written by the workers, so on a cluster ``output`` must be a path the
    workers can write (a shared file system).
    Everything is written into a temporary directory beside ``output`` and renamed into place at
    the end: on any failure (a bad partition, a NaN in the release, a full disk) nothing is left.
    The card is :meth:`Release.card` with ``sha256`` the digest of the manifest (``name sha256``
    lines of the part files, sorted) and ``files`` the digest of each part. ``diagnostics`` (the
    exploration facts of :meth:`Mechanism.explore`, never written): its lazy entries are computed in
    the same pass as the write. ``commit`` (e.g. a privacy ledger's): called with the card once every
    file is written, before the folder is renamed into place; it may return an undo, called if the
    rename fails (an exception from ``commit`` itself leaves nothing written).

    The parts' row counts are published, so they are public facts: the released rows are
    regrouped into parts of ``part_rows`` rows (the last holds the rest; a public choice,
    :attr:`LazyTable.part_rows`; default :func:`public_part_rows` of :data:`DEFAULT_BLOCKSIZE` and
    the release's width), whatever partitions they were computed in: the input's partitions' row
    counts are not public (a CSV block's depend on its lines' lengths; Parquet row groups may be
    a file per class, or cut by bytes as Spark does).

    Raises
    ------
    NotPrivateError
        NOT PRIVATE releases and seeded previews (nothing is written).
    FileExistsError
        ``output`` exists and is not an empty directory.
    OutputBusyError
        Another release in flight writes ``output`` (the claim of :func:`dpcore.release.output_lock`,
        under which hidden temporary folders of killed releases to ``output`` are removed).
    """
    from dpcore.release import output_lock

    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt must be 'parquet' or 'csv', got {fmt!r}")
    release.check_downloadable()

    out = Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory; choose a new output directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out):  # no other release writes this folder meanwhile: a killed run's leftovers go
        _remove_stale_folders(out)
        return _write_release(release, out, fmt, progress, diagnostics, commit, part_rows)


def _temporary_folders(out: Path) -> list[Path]:
    """The hidden temporary folders :func:`write_release` makes beside ``out`` (``.<name>.XXXXXXXX``)."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.[a-z0-9_]{{8}}")
    try:
        names = os.listdir(out.parent)
    except OSError:
        return []
    return [out.parent / n for n in names if pattern.fullmatch(n) and (out.parent / n).is_dir()]


def _remove_stale_folders(out: Path) -> None:
    """Remove the temporary folders of killed releases to ``out`` (a SIGKILL leaves its partly
    written parts, gigabytes of them): called under the output's claim, so none is live."""
    for folder in _temporary_folders(out):
        shutil.rmtree(folder, ignore_errors=True)


def _write_release(release: Release, out: Path, fmt: str, progress: bool, diagnostics: dict[str, Any] | None,
                   commit: Callable[[dict[str, Any]], Callable[[], None] | None] | None,
                   part_rows: int | None) -> dict[str, Path]:
    """:func:`write_release`'s work, under the output's claim."""
    import dask
    import dask.array as da

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        values = release.data
        rows = part_rows or public_part_rows(DEFAULT_BLOCKSIZE, values.shape[1])
        if not is_lazy(values):
            values = da.from_array(np.asarray(values), chunks=(rows, -1))
        frame = _release_frame(values, release, rows)
        frame = frame.map_partitions(_checked_partition, meta=frame._meta)
        if fmt == "csv":
            # the in-memory release's CSV writer (escaping, number format) per partition; part-00000.csv,
            # ... as the Parquet parts: the names sort in row order
            ending = _csv_line_end(release)
            job = [dask.delayed(_write_csv_part)(part, tmp / f"part-{i:05d}.csv", ending)
                   for i, part in enumerate(frame.to_delayed())]
        else:
            # no dictionary encoding of the float columns: their values are (almost) all distinct, and
            # building the dictionary before falling back to plain encoding cost 7x the write
            label_columns = list(release.label_columns) if release.labels is not None else []
            job = frame.to_parquet(tmp, write_index=False, compute=False,
                                   name_function=lambda i: f"part-{i:05d}.parquet",
                                   use_dictionary=label_columns or False)
        lazy_diag = {k: v for k, v in (diagnostics or {}).items() if is_lazy(v)}
        local = {"scheduler": "threads"} if _spilled(release.data, release.labels) else {}
        with _progress(progress), warnings.catch_warnings():
            # lazy diagnostics (array expressions) are computed in the same pass as the write
            warnings.filterwarnings("ignore", "Computing mixed collections", UserWarning)
            _, diag = dask.compute(job, lazy_diag, **local)
        if diagnostics is not None:
            diagnostics.update({k: v.item() if hasattr(v, "item") else v for k, v in diag.items()})
        parts = sorted(p for p in tmp.iterdir() if p.name.startswith("part-"))
        with ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:  # hashlib releases the GIL
            files = dict(zip([p.name for p in parts], pool.map(_sha256, parts), strict=True))
        manifest = "".join(f"{name} {digest}\n" for name, digest in files.items()).encode()
        card = release.card(csv_bytes=manifest)
        card.update({"format": fmt, "files": files, "engine": "dask", "noise_streams": NOISE_STREAMS,
                     "sha256_of": "the manifest: one 'name sha256' line per part file, sorted by name"})
        (tmp / "card.json").write_text(json.dumps(card, indent=2, allow_nan=False), encoding="utf-8")
        if release.transform_arrays:
            (tmp / "transform.npz").write_bytes(release.transform_npz_bytes())
        undo = commit(card) if commit is not None else None
        try:
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)
        except BaseException:
            if undo is not None:
                undo()
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    written = {"card": out / "card.json", **{name: out / name for name in files}}
    if release.transform_arrays:
        written["transform"] = out / "transform.npz"
    return written


def _release_frame(values: Any, release: Release, rows: int) -> Any:
    """The released rows as a Dask DataFrame in partitions of ``rows`` rows (the last holds the
    rest), the labels (lazy or not) appended as the last columns (as :meth:`Release.to_frame`).
    Each partition is one task on the slices of the blocks it overlaps (blocks that already have
    ``rows`` rows are taken whole)."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    columns = list(release.columns)
    values = values.rechunk({1: -1})
    blocks = values.to_delayed().ravel()
    label_columns: list[str] = []
    label_blocks: list[Any] = [None] * len(blocks)
    meta_labels = None
    if release.labels is not None:
        labels = release.labels if is_lazy(release.labels) else da.from_array(np.asarray(release.labels))
        labels = labels.rechunk({0: values.chunks[0], **({1: -1} if labels.ndim == 2 else {})})
        label_columns = list(release.label_columns)
        label_blocks = list(labels.to_delayed().ravel())
        meta_labels = np.zeros((0,) + labels.shape[1:], labels.dtype)
    meta = _label_frame(np.zeros((0, values.shape[1])), meta_labels, columns, label_columns)
    edges = np.concatenate([[0], np.cumsum(values.chunks[0])])
    parts = []
    for start in range(0, values.shape[0], rows):
        stop = min(values.shape[0], start + rows)
        first, last = np.searchsorted(edges, start, "right") - 1, np.searchsorted(edges, stop, "left")
        pieces = [(blocks[k], label_blocks[k], int(max(start, edges[k]) - edges[k]),
                   int(min(stop, edges[k + 1]) - edges[k])) for k in range(first, last)]
        parts.append(dask_delayed(_part_frame)(pieces, columns, label_columns))
    return dd.from_delayed(parts, meta=pd.DataFrame(meta), verify_meta=False)


def _part_frame(pieces: list[tuple[np.ndarray, np.ndarray | None, int, int]], columns: list[str],
                label_columns: list[str]) -> Any:
    """One part's DataFrame from ``(values, labels, start, stop)`` slices of consecutive blocks."""
    if len(pieces) == 1 and pieces[0][2] == 0 and pieces[0][3] == len(pieces[0][0]):
        return _label_frame(pieces[0][0], pieces[0][1], columns, label_columns)
    values = np.concatenate([v[a:b] for v, _, a, b in pieces])
    labels = None if pieces[0][1] is None else np.concatenate([lab[a:b] for _, lab, a, b in pieces])
    return _label_frame(values, labels, columns, label_columns)


def _label_frame(values: np.ndarray, labels: np.ndarray | None, columns: list[str], label_columns: list[str]
                 ) -> Any:
    """One partition's DataFrame. Its float columns are the columns of a column-major copy of
    ``values`` (none when ``values`` is column-major already, as the drawn synthetic rows are):
    pandas and Arrow then take them without the transposing copies a row-major block costs."""
    import pandas as pd

    frame = pd.DataFrame(np.asfortranarray(values), columns=columns, copy=False)
    if labels is not None:
        lab = labels[:, None] if labels.ndim == 1 else labels
        for j, name in enumerate(label_columns):
            frame[name] = lab[:, j]
    return frame


@contextlib.contextmanager
def _progress(show: bool) -> Iterator[None]:
    """Dask's progress bar (local schedulers) or ``distributed.progress`` (a cluster client)."""
    if not show:
        yield
        return
    if _cluster_client() is None:
        from dask.diagnostics import ProgressBar

        # the terminal itself: Dask's bar redraws with carriage returns (no data in it), which a
        # control-escaping wrapper of sys.stdout (the CLI's) would print as text
        stream = sys.__stderr__ or sys.stderr
        token = _BAR_STREAM.set(stream)
        try:
            with ProgressBar(dt=1.0, out=stream):
                yield
        finally:
            _BAR_STREAM.reset(token)
        return
    yield  # a distributed client shows its progress on its dashboard
