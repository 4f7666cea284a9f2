"""Regenerate the bad-input corpus in this folder (``python tests/data/bad/make_corpus.py``).

The files are committed; this script only documents how each was made and rebuilds them
byte-for-byte (fixed seeds, no timestamps). The over-the-upload-limit file is *not* made here:
the tests generate it in a temporary folder (it is 50 MB).
"""

from __future__ import annotations

import decimal
import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent


def _rows(n: int, d: int = 3, seed: int = 0, label: bool = True) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        row = [f"{v:.3f}" for v in rng.uniform(0, 10, d)]
        if label:
            row.append(str(i % 2))
        out.append(row)
    return out


def _csv(header: list[str], rows: list[list[str]], sep: str = ",", eol: str = "\n") -> str:
    def cell(c: str) -> str:
        return '"' + c.replace('"', '""') + '"' if (sep in c or "\n" in c or '"' in c) else c

    return eol.join(sep.join(cell(c) for c in r) for r in [header, *rows]) + eol


GOOD = _csv(["a", "b", "c", "y"], _rows(40))


def _edited(n: int, cells: dict[tuple[int, int], str]) -> bytes:
    """``n`` good rows of columns a, b, c, y with the given ``(row, column)`` cells replaced."""
    rows = _rows(n)
    for (i, j), value in cells.items():
        rows[i][j] = value
    return _csv(["a", "b", "c", "y"], rows).encode()


def build() -> dict[str, bytes]:
    """File name -> bytes for every committed corpus file."""
    f: dict[str, bytes] = {}
    f["empty.csv"] = b""
    f["whitespace_only.csv"] = b"   \n\n \t \n"
    f["header_only.csv"] = b"a,b,c,y\n"
    f["one_row.csv"] = b"a,b,c,y\n1.0,2.0,3.0,1\n"
    f["ragged.csv"] = (_csv(["a", "b", "y"], _rows(10, 2)).rstrip("\n")
                       + "\n1.0,2.0,3.0,4.0,1\n" + "2.0,3.0,0\n").encode()
    f["ragged_short.csv"] = (b"a,b,c,y\n" + b"1.0,2.0,3.0,0\n" * 5 + b"1.0,2.0\n"
                             + b"4.0,5.0,6.0,1\n" * 5)
    f["semicolon.csv"] = _csv(["a", "b", "c", "y"], _rows(40), sep=";").encode()
    f["tab_in_csv.csv"] = _csv(["a", "b", "c", "y"], _rows(40), sep="\t").encode()
    f["pipe_delimited.csv"] = _csv(["a", "b", "c", "y"], _rows(40), sep="|").encode()
    f["decimal_comma.csv"] = _csv(["a", "b", "y"], [[r[0].replace(".", ","), r[1].replace(".", ","),
                                                     r[3]] for r in _rows(30)], sep=";").encode()
    f["latin1.csv"] = _csv(["größe", "länge", "y"], _rows(20, 2)).encode("latin-1")
    f["utf16.csv"] = _csv(["a", "b", "y"], _rows(20, 2)).encode("utf-16")
    f["bom.csv"] = b"\xef\xbb\xbf" + GOOD.encode()
    f["crlf.csv"] = _csv(["a", "b", "c", "y"], _rows(40), eol="\r\n").encode()
    f["nan_inf.csv"] = _edited(20, {(3, 0): "NaN", (7, 1): "inf", (11, 2): "-inf"})
    f["text_in_numeric.csv"] = _edited(20, {(4, 1): "abc", (9, 1): "n/a?"})
    f["thousands_separator.csv"] = _edited(20, {(2, 0): "1,234.5"})
    f["only_text.csv"] = _csv(["name", "city", "colour"],
                              [["ann", "paris", "red"], ["bob", "rome", "blue"],
                               ["cy", "oslo", "green"]] * 5).encode()
    f["dup_columns.csv"] = _csv(["a", "b", "a", "y"], _rows(20)).encode()
    f["dup_columns_whitespace.csv"] = _csv(["a", " b", "b ", "y"], _rows(20)).encode()
    f["empty_colname.csv"] = _csv(["a", "", "c", "y"], _rows(20)).encode()
    f["trailing_delimiter.csv"] = "".join(line + ",\n" for line in GOOD.splitlines()).encode()
    f["unterminated_quote.csv"] = b'a,b,y\n1.0,2.0,0\n"3.0,4.0,1\n5.0,6.0,0\n'
    rng = np.random.default_rng(1)
    wide = rng.integers(0, 10, size=(20, 1000))
    f["wide_1000.csv"] = _csv([f"f{j}" for j in range(1000)],
                              [[str(v) for v in row] for row in wide]).encode()
    f["one_class.csv"] = _csv(["a", "b", "c", "y"], [r[:3] + ["1"] for r in _rows(30)]).encode()
    f["single_column.csv"] = _csv(["y"], [[str(i % 2)] for i in range(20)]).encode()
    rows = _rows(30)
    for r in rows:
        r[1] = "5"
        r[2] = "0"
    f["constant_columns.csv"] = _csv(["a", "const5", "const0", "y"], rows).encode()
    rows = _rows(30)
    for i in range(0, 30, 3):
        rows[i][:3] = ["0", "0", "0"]
    f["all_zero_rows.csv"] = _csv(["a", "b", "c", "y"], rows).encode()
    f["far_outside_bounds.csv"] = _edited(30, {(0, 0): "1e6", (0, 1): "-1e6", (0, 2): "12345",
                                               (5, 0): "-99999", (5, 1): "1e9", (5, 2): "-7e7"})
    f["far_outside_bounds.bounds.json"] = b'{"a": [0, 10], "b": [0, 10], "c": [0, 10]}\n'
    f["huge_numbers.csv"] = _edited(20, {(1, 0): "1e300", (2, 1): "-1e300"})
    f["overflow_numbers.csv"] = _edited(20, {(1, 0): "1e400"})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("data.csv", date_time=(2020, 1, 1, 0, 0, 0))
        zf.writestr(info, GOOD)
    f["zip.csv"] = buf.getvalue()
    f["gzip_in_csv.csv"] = gzip.compress(GOOD.encode(), mtime=0)
    f["truncated.csv.gz"] = gzip.compress(GOOD.encode(), mtime=0)[:-20]
    f["not_gzip.csv.gz"] = GOOD.encode()
    f["html_js_names.csv"] = _csv(["<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                   "javascript:alert(1)", "y"], _rows(30)).encode()
    f["markdown_names.csv"] = _csv(["![t](http://attacker.invalid/x.png)", "[click](http://x.invalid)",
                                    "**bold** `code`", "y"], _rows(30)).encode()
    f["formula_names.csv"] = _csv(["=cmd|' /C calc'!A0", "+SUM(1)", "@A1", "y"], _rows(30)).encode()
    f["formula_labels.csv"] = _csv(["a", "b", "c", "y"],
                                   [r[:3] + ["=1+1" if i % 2 else "-2+3"]
                                    for i, r in enumerate(_rows(30))]).encode()
    f["unicode_names.csv"] = _csv(["größe", "温度", "😀 score", "y"], _rows(30)).encode()
    f["quoted_newlines.csv"] = _csv(["first\nsecond", "b", 'say "hi"', "y"], _rows(30)).encode()
    rows = _rows(10)
    rows[3][0] = "1\n2"
    f["newline_in_value.csv"] = _csv(["a", "b", "c", "y"], rows).encode()
    rng = np.random.default_rng(7)
    f["binary_garbage.csv"] = rng.integers(128, 256, 2048, dtype=np.uint8).tobytes()  # no NUL
    f["nul_bytes.csv"] = GOOD.encode().replace(b"\n", b"\x00\n", 3)
    rows = _rows(20)
    rows[6][3] = ""
    f["label_missing_value.csv"] = _csv(["a", "b", "c", "y"], rows).encode()
    f["text_label_regression.csv"] = _csv(["a", "b", "c", "y"],
                                          [r[:3] + [["lo", "hi"][i % 2]] for i, r in
                                           enumerate(_rows(20))]).encode()
    f["long_names.csv"] = _csv(["n" * 5000, "b", "c", "y"], _rows(20)).encode()
    f["label_only_missing.csv"] = _csv(["a", "b", "c", "y"], [r[:3] + [""] for r in _rows(20)]).encode()

    # public-bounds files that are themselves hostile (used with far_outside_bounds.csv)
    f["bounds_inverted.json"] = b'{"a": [10, 0], "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_nan.json"] = b'{"a": ["nan", 10], "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_huge.json"] = b'{"a": [-1e300, 1e300], "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_unknown_column.json"] = b'{"a": [0, 10], "b": [0, 10], "c": [0, 10], "zz": [0, 1]}\n'
    f["bounds_not_json.json"] = b'{"a": [0, 10], "b": [0, 10\n'

    # NumPy archives
    buf = io.BytesIO()
    np.savez(buf, X=np.array([[1, "a"], [2, {"k": 1}]], dtype=object), y=np.array([0, 1]))
    f["npz_object.npz"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, data=np.zeros((5, 3)))
    f["npz_no_X.npz"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, X=np.arange(10.0))
    f["npz_1d.npz"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, X=np.zeros((6, 3)), y=np.zeros(4))
    f["npz_y_mismatch.npz"] = buf.getvalue()
    f["npz_garbage.npz"] = b"this is not a numpy archive\n" * 4

    # issue 17: strict public-bounds files (used with far_outside_bounds.csv)
    f["bounds_string_09.json"] = b'{"a": "09", "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_three_values.json"] = b'{"a": [0, 10, 99], "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_booleans.json"] = b'{"a": [false, true], "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_equal.json"] = b'{"a": [5, 5], "b": [0, 10], "c": [0, 10]}\n'
    f["bounds_duplicate_column.json"] = b'{"a": [0, 10], "b": [0, 10], "c": [0, 10], "a": [0, 1]}\n'
    f["bounds_extra_field.csv"] = b"column,lo,hi\na,0,10,99\nb,0,10\nc,0,10\n"
    f["bounds_text_number.csv"] = b"column,lo,hi\na,0,ten\nb,0,10\nc,0,10\n"
    f["bounds_nested.json"] = b'{"a": ' + b"[" * 5000 + b"\n"  # past the JSON parser's recursion limit

    # issue 17: name collisions, complex values, typed columns, class and size limits
    rows = _rows(30)
    f["onehot_collision.csv"] = _csv(["c", "c=a", "b", "y"],
                                     [[["a", "b"][i % 2], r[0], r[1], r[3]] for i, r in enumerate(rows)]
                                     ).encode()
    f["ansi_names.csv"] = _csv(["a\x1b[2J\x1b[31mRED", "b\u202eevil", "c", "y"], _rows(30)).encode()
    f["many_classes.csv"] = _csv(["a", "b", "y"], [[r[0], r[1], f"id{i:05d}"] for i, r in
                                                   enumerate(_rows(1200, 2, label=False))]).encode()
    f["gzip_bomb.csv.gz"] = gzip.compress(b"a,b,y\n" + b"0,0,0\n" * (11 << 20), mtime=0)
    f["cells_over_limit.csv"] = _csv(["a", "b", "c", "y"], _rows(40)).encode()
    buf = io.BytesIO()
    np.savez(buf, X=np.ones((6, 2)), y=np.arange(6) % 2, feature_names=np.array(["label", "b"]))
    f["npz_label_collision.npz"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, X=np.ones((6, 2)) * (1 + 2j), y=np.arange(6) % 2)
    f["npz_complex.npz"] = buf.getvalue()
    f["npz_header_bomb.npz"] = _npz_header_bomb()

    # Parquet
    frame = pd.read_csv(io.StringIO(GOOD))
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    full = buf.getvalue()
    f["truncated.parquet"] = full[: len(full) // 2]
    f["csv_named.parquet"] = GOOD.encode()
    rng = np.random.default_rng(3)
    typed = pd.DataFrame({"a": rng.uniform(0, 10, 30), "y": np.arange(30) % 2})
    buf = io.BytesIO()
    typed.assign(when=pd.date_range("2020-01-01", periods=30, unit="s")).to_parquet(buf, index=False)
    f["datetime_column.parquet"] = buf.getvalue()
    buf = io.BytesIO()
    typed.assign(amount=[decimal.Decimal("1.25")] * 30).to_parquet(buf, index=False)
    f["decimal_column.parquet"] = buf.getvalue()
    buf = io.BytesIO()
    numbered = pd.DataFrame(rng.uniform(0, 10, (30, 3)))  # integer column names 0, 1, 2
    numbered[3] = np.arange(30) % 2
    numbered.to_parquet(buf, index=False)
    f["int_column_names.parquet"] = buf.getvalue()
    buf = io.BytesIO()
    pd.DataFrame({"a": np.zeros(8_000_000, dtype=np.int64), "y": np.zeros(8_000_000, dtype=np.int64)}
                 ).to_parquet(buf, index=False, compression="zstd")
    f["parquet_bomb.parquet"] = buf.getvalue()
    f.update(_round_three())
    return f


def _round_three() -> dict[str, bytes]:
    """Hostile files of the third round: lines whose field count is not the header's (pandas took
    a short header's first column as an index, and padded short lines with missing values),
    UTF-16 / UTF-32 text."""
    f: dict[str, bytes] = {}
    f["header_fewer_fields.csv"] = _csv(["a", "b", "y"], [[str(i), *r] for i, r in enumerate(_rows(20, 2))]
                                        ).encode()
    text = _csv(["a", "b", "y"], _rows(20, 2))
    f["utf16_no_bom.csv"] = text.encode("utf-16-le")
    f["utf32.csv"] = text.encode("utf-32")
    f.update(_round_three_parquet())
    return f


def _parquet(table: object, **options: object) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf, **options)
    return buf.getvalue()


def _round_three_parquet() -> dict[str, bytes]:
    """Parquet files whose footers, not their values, must be read first: a text column of one
    1 MiB value repeated on 40 rows (a dictionary of one entry: 40 MiB decoded from about 2 KB),
    two columns of one name, a nested column, front-coded texts (their decoded size unbounded by
    the footer)."""
    import pyarrow as pa

    f: dict[str, bytes] = {}
    rows = 40
    long = pa.array(["x" * (1 << 20)] * rows).dictionary_encode()
    f["parquet_string_bomb.parquet"] = _parquet(pa.table({"a": np.arange(rows, dtype=float), "s": long,
                                                          "y": np.arange(rows) % 2}), compression="zstd")
    columns = [pa.array(np.arange(20.0)), pa.array(np.arange(20.0)), pa.array(np.arange(20) % 2)]
    f["parquet_duplicate_names.parquet"] = _parquet(pa.Table.from_arrays(columns, names=["a", "a", "y"]))
    f["parquet_nested.parquet"] = _parquet(pa.table({"a": np.arange(20.0), "v": pa.array([[1.0, 2.0]] * 20),
                                                     "y": np.arange(20) % 2}))
    f["parquet_front_coded.parquet"] = _parquet(
        pa.table({"a": np.arange(20.0), "s": pa.array([f"v{i}" for i in range(20)]), "y": np.arange(20) % 2}),
        use_dictionary=False, column_encoding={"s": "DELTA_BYTE_ARRAY"})
    return f


def _npz_header_bomb() -> bytes:
    """An ``.npz`` whose ``X.npy`` header declares 10^6 x 10^5 float64 (745 GiB) but holds 16 bytes
    of data: refused from the header, before numpy allocates anything."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (1_000_000, 100_000)})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("X.npy", date_time=(2020, 1, 1, 0, 0, 0))
        zf.writestr(info, b"\x93NUMPY\x01\x00" + header.getvalue()[8:] + bytes(16))
    return buf.getvalue()


def main() -> None:
    files = build()
    for name, data in files.items():
        (HERE / name).write_bytes(data)
    print(f"wrote {len(files)} files to {HERE}")


if __name__ == "__main__":
    main()
