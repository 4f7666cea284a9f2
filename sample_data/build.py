"""Rebuild the real datasets bundled with dp-explorer in ``sample_data/``.

Usage (from the repository root)::

    python sample_data/build.py [--shared ../shared/datasets] [--out sample_data]

Sources:

* scikit-learn's bundled copies of UCI *digits*, *breast cancer (WDBC)* and the
  Efron et al. *diabetes* data (shipped inside the sklearn package, no network);
* ``<shared>/mnist/mnist.npz`` (MNIST, original order) and
  ``<shared>/adult/adult.data.gz`` + ``adult.names`` (UCI Adult).

Every dataset is written as one data file (``.csv``, ``.csv.gz`` or ``.npz``) plus
``<name>.meta.json`` describing its columns, task and *public* per-column bounds. A bound
is public when it follows from the definition of the variable or from published
documentation, never from the private records; the origin of each bound is written next to
it in ``bounds_origin``. The build refuses to write a dataset whose records violate one of
its bounds, because such a bound would be a wrong public bound.

The build is deterministic: the MNIST subset uses a fixed seed, gzip and zip members carry
fixed timestamps, so re-running it reproduces the files byte for byte (with the same numpy).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import re
import zipfile
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "sample_data"
DEFAULT_SHARED = REPO.parent / "shared" / "datasets"

MAX_FILE_BYTES = 5_000_000  # every committed file stays below this
MNIST_SEED = 20240607
MNIST_SUBSET_ROWS = 10_000
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed zip member timestamp for reproducible .npz files

UCI_LICENSE = "CC BY 4.0 (UCI Machine Learning Repository)"
LABEL_KEY = "_label"  # key of the label's entry in bounds_origin


class BoundsError(ValueError):
    """The records of a dataset violate its declared public bounds or schema."""


@dataclass
class Dataset:
    """One bundled dataset: records, public bounds and descriptive metadata."""

    name: str
    title: str
    task: str  # "classification" | "regression" | "unsupervised"
    features: list[str]
    X: np.ndarray  # (n_rows, n_features)
    label: str
    y: np.ndarray  # (n_rows,)
    bounds: dict[str, tuple[float, float]]
    bounds_origin: dict[str, str]
    label_bounds: tuple[float, float]
    label_origin: str
    classes: list[int] | None
    source: str
    license: str
    citation: str
    description: str
    image_shape: list[int] | None = None
    fmt: str = "csv"  # "csv" (gzipped automatically when large) or "npz"
    extra_arrays: dict[str, np.ndarray] = field(default_factory=dict)  # npz only
    onehot_groups: dict[str, list[str]] | None = None  # categorical attribute -> its one-hot columns


# --------------------------------------------------------------------------- helpers


def _num(value: float) -> int | float:
    """Plain Python number for JSON: integral values become ints."""
    value = float(value)
    return int(value) if value.is_integer() else value


def _ceil_1sf(value: Decimal) -> Decimal:
    """Round a positive decimal *up* to one significant figure (42.165 -> 50)."""
    unit = Decimal(1).scaleb(value.adjusted())
    return (value / unit).to_integral_value(rounding="ROUND_CEILING") * unit


def uniform_bounds(
    features: list[str], lo: float, hi: float, origin: str
) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """The same bound and origin for every feature (image pixels, one-hot columns)."""
    return {f: (lo, hi) for f in features}, {f: origin for f in features}


def validate(ds: Dataset) -> None:
    """Check shapes, bound coverage and that every record lies within its public bounds."""
    n_rows, n_features = ds.X.shape
    problems: list[str] = []
    if len(ds.features) != n_features or len(set(ds.features)) != n_features:
        problems.append("feature names do not match the columns one to one")
    if ds.y.shape != (n_rows,):
        problems.append(f"label shape {ds.y.shape} != ({n_rows},)")
    if set(ds.bounds) != set(ds.features):
        problems.append(f"bounds keys differ from features: {set(ds.bounds) ^ set(ds.features)}")
    if set(ds.bounds_origin) != set(ds.features):
        problems.append("bounds_origin keys differ from features")
    if problems:
        raise BoundsError(f"{ds.name}: " + "; ".join(problems))

    lo = np.array([ds.bounds[f][0] for f in ds.features], dtype=float)
    hi = np.array([ds.bounds[f][1] for f in ds.features], dtype=float)
    values = ds.X.astype(float)
    if not np.isfinite(values).all():
        problems.append("non-finite feature values")
    if not (lo < hi).all():
        problems.append("empty bound (lo >= hi)")
    col_min, col_max = values.min(axis=0), values.max(axis=0)
    for j in np.flatnonzero((col_min < lo) | (col_max > hi)):
        problems.append(
            f"{ds.features[j]}: data range [{col_min[j]}, {col_max[j]}] "
            f"outside bound [{lo[j]}, {hi[j]}]"
        )
    y_lo, y_hi = ds.label_bounds
    if ds.y.min() < y_lo or ds.y.max() > y_hi:
        problems.append(f"label range [{ds.y.min()}, {ds.y.max()}] outside {ds.label_bounds}")
    if ds.classes is not None and not set(np.unique(ds.y).tolist()) <= set(ds.classes):
        problems.append("label values outside the declared classes")
    if problems:
        raise BoundsError(f"{ds.name}: " + "; ".join(problems))


def _csv_bytes(ds: Dataset) -> bytes:
    """CSV text of features + label; integral columns are written without '.0'."""
    frame = pd.DataFrame(ds.X, columns=ds.features)
    frame[ds.label] = ds.y
    for col in frame.columns:
        values = frame[col].to_numpy()
        if values.dtype.kind == "f" and np.array_equal(values, np.round(values)):
            frame[col] = values.astype(np.int64)
    return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A compressed ``.npz`` archive with fixed member timestamps (byte-reproducible)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue(), compresslevel=9)
    return out.getvalue()


def _json_text(obj: object, indent: int = 0) -> str:
    """Indented JSON that keeps short scalar lists such as ``[0, 16]`` on one line."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(k)}: {_json_text(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, dict | list) for v in obj):
        items = [inner + _json_text(v, indent + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def _write_atomic(path: Path, payload: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(payload)
    tmp.replace(path)


def write_dataset(ds: Dataset, out_dir: Path) -> list[Path]:
    """Validate ``ds``, then write its data file and ``<name>.meta.json`` into ``out_dir``."""
    validate(ds)
    if ds.fmt == "npz":
        arrays = {"X": ds.X, "y": ds.y, "feature_names": np.array(ds.features), **ds.extra_arrays}
        data_path, payload = out_dir / f"{ds.name}.npz", _npz_bytes(arrays)
    elif ds.fmt == "csv":
        payload = _csv_bytes(ds)
        data_path = out_dir / f"{ds.name}.csv"
        if len(payload) > MAX_FILE_BYTES:
            data_path, payload = out_dir / f"{ds.name}.csv.gz", gzip.compress(payload, mtime=0)
        for stale in (out_dir / f"{ds.name}.csv", out_dir / f"{ds.name}.csv.gz"):
            if stale != data_path:
                stale.unlink(missing_ok=True)
    else:
        raise ValueError(f"{ds.name}: unknown format {ds.fmt!r}")
    if len(payload) > MAX_FILE_BYTES:
        raise BoundsError(f"{ds.name}: {data_path.name} is {len(payload)} bytes (> 5 MB)")

    meta = {
        "name": ds.name,
        "title": ds.title,
        "file": data_path.name,
        "format": ds.fmt,
        "task": ds.task,
        "label": ds.label,
        "image_shape": ds.image_shape,
        "n_rows": int(ds.X.shape[0]),
        "n_features": int(ds.X.shape[1]),
        "bounds": {f: [_num(lo), _num(hi)] for f, (lo, hi) in ds.bounds.items()},
        "label_bounds": [_num(v) for v in ds.label_bounds],
        "bounds_origin": {**{f: ds.bounds_origin[f] for f in ds.features},
                          LABEL_KEY: ds.label_origin},
        "classes": ds.classes,
        **({"onehot_groups": ds.onehot_groups} if ds.onehot_groups else {}),
        "source": ds.source,
        "license": ds.license,
        "citation": ds.citation,
        "description": ds.description,
    }
    meta_path = out_dir / f"{ds.name}.meta.json"
    _write_atomic(data_path, payload)
    _write_atomic(meta_path, (_json_text(meta) + "\n").encode("utf-8"))
    return [data_path, meta_path]


def pixel_names(n: int) -> list[str]:
    return [f"px_{i}" for i in range(n)]


# --------------------------------------------------------------------------- datasets


def build_digits() -> Dataset:
    bunch = load_digits()
    features = pixel_names(bunch.data.shape[1])
    bounds, origin = uniform_bounds(
        features, 0, 16,
        "documentation: count of 'on' pixels in a 4x4 block of a 32x32 bitmap, integer 0..16",
    )
    return Dataset(
        name="digits",
        title="Optical recognition of handwritten digits (8x8)",
        task="classification",
        features=features,
        X=bunch.data.astype(np.int64),
        label="label",
        y=bunch.target.astype(np.int64),
        bounds=bounds,
        bounds_origin=origin,
        label_bounds=(0, 9),
        label_origin="definition: digit classes 0..9",
        classes=list(range(10)),
        image_shape=[8, 8],
        source="scikit-learn load_digits (UCI ML hand-written digits, test set of "
        "Alpaydin & Kaynak 1998)",
        license=f"{UCI_LICENSE}; redistributed with scikit-learn (BSD-3-Clause)",
        citation="Alpaydin, E. & Kaynak, C. (1998). Optical Recognition of Handwritten Digits "
        "[Dataset]. UCI Machine Learning Repository. https://doi.org/10.24432/C50P49",
        description=(
            "1,797 handwritten digits from 13 writers, each an 8x8 image whose 64 pixels "
            "count the 'on' pixels of a 4x4 block of a 32x32 NIST bitmap (integers 0-16, "
            "row-major px_0..px_63). The label is the digit 0-9. Small enough for every "
            "mechanism to run in seconds, and the images can be shown as a grid, which "
            "makes it the quickest way to see what noise does to data. The pixel bounds "
            "[0, 16] hold by construction, so they are genuinely public."
        ),
    )


# WDBC documented (min, max) per feature, from the UCI / scikit-learn description. These
# summary statistics were computed from the very same 569 records: they are public only in
# the sense of being published, so every bound below is rounded well outside them.
WDBC_DOC_RANGES: dict[str, tuple[str, str]] = {
    "radius_mean": ("6.981", "28.11"), "texture_mean": ("9.71", "39.28"),
    "perimeter_mean": ("43.79", "188.5"), "area_mean": ("143.5", "2501.0"),
    "smoothness_mean": ("0.053", "0.163"), "compactness_mean": ("0.019", "0.345"),
    "concavity_mean": ("0.0", "0.427"), "concave_points_mean": ("0.0", "0.201"),
    "symmetry_mean": ("0.106", "0.304"), "fractal_dimension_mean": ("0.05", "0.097"),
    "radius_se": ("0.112", "2.873"), "texture_se": ("0.36", "4.885"),
    "perimeter_se": ("0.757", "21.98"), "area_se": ("6.802", "542.2"),
    "smoothness_se": ("0.002", "0.031"), "compactness_se": ("0.002", "0.135"),
    "concavity_se": ("0.0", "0.396"), "concave_points_se": ("0.0", "0.053"),
    "symmetry_se": ("0.008", "0.079"), "fractal_dimension_se": ("0.001", "0.03"),
    "radius_worst": ("7.93", "36.04"), "texture_worst": ("12.02", "49.54"),
    "perimeter_worst": ("50.41", "251.2"), "area_worst": ("185.2", "4254.0"),
    "smoothness_worst": ("0.071", "0.223"), "compactness_worst": ("0.027", "1.058"),
    "concavity_worst": ("0.0", "1.252"), "concave_points_worst": ("0.0", "0.291"),
    "symmetry_worst": ("0.156", "0.664"), "fractal_dimension_worst": ("0.055", "0.208"),
}
# Shape features whose value lies in [0, 1] (the fractal dimension of a plane curve lies in
# [1, 2], minus 1; symmetry is a relative length difference). For smoothness this is an
# assumption about the normalisation, which the documentation does not spell out.
WDBC_UNIT_RATIOS: dict[str, str] = {
    "smoothness": "assumption: local variation in radius lengths, normalised, treated as a "
    "ratio in [0, 1]",
    "symmetry": "definition: relative length difference of chords either side of the major "
    "axis, in [0, 1]",
    "fractal_dimension": "definition: 'coastline' fractal dimension of a plane curve (in "
    "[1, 2]) minus 1, in [0, 1]",
}
WDBC_ROUND_OUT = Decimal("1.5")


def _wdbc_name(sklearn_name: str) -> str:
    """'mean concave points' -> 'concave_points_mean', 'radius error' -> 'radius_se'."""
    if sklearn_name.startswith(("mean ", "worst ")):
        stat, base = sklearn_name.split(" ", 1)
    else:
        base, stat = sklearn_name.rsplit(" ", 1)[0], "se"
    return f"{base.replace(' ', '_')}_{stat}"


def _wdbc_bound(column: str) -> tuple[tuple[float, float], str]:
    """Public bound and its origin for one WDBC column."""
    doc_lo, doc_hi = WDBC_DOC_RANGES[column]
    doc = (f"documentation range [{doc_lo}, {doc_hi}] (computed from these same records, "
           "public only in the sense of being published)")
    base, stat = column.rsplit("_", 1)
    if base in WDBC_UNIT_RATIOS and stat != "se":
        return (0, 1), f"{WDBC_UNIT_RATIOS[base]}; {doc}"
    if base in WDBC_UNIT_RATIOS:
        return (0, 0.5), (f"{WDBC_UNIT_RATIOS[base]}; the standard error of a [0, 1] quantity "
                          f"is at most its standard deviation, at most 0.5; {doc}")
    hi = _ceil_1sf(Decimal(doc_hi) * WDBC_ROUND_OUT)
    return (0, float(hi)), (f"{doc} rounded out: 0 (non-negative by definition) to "
                            f"1.5 x documented max rounded up to 1 significant figure = {hi}")


def build_breast_cancer() -> Dataset:
    bunch = load_breast_cancer()
    features = [_wdbc_name(str(n)) for n in bunch.feature_names]
    resolved = {f: _wdbc_bound(f) for f in features}
    return Dataset(
        name="breast-cancer",
        title="Breast cancer Wisconsin (diagnostic)",
        task="classification",
        features=features,
        X=bunch.data,
        label="label",
        y=bunch.target.astype(np.int64),
        bounds={f: b for f, (b, _) in resolved.items()},
        bounds_origin={f: o for f, (_, o) in resolved.items()},
        label_bounds=(0, 1),
        label_origin="definition: binary diagnosis, 0 = malignant, 1 = benign (sklearn coding)",
        classes=[0, 1],
        source="scikit-learn load_breast_cancer (UCI Breast Cancer Wisconsin (Diagnostic), "
        "WDBC, Wolberg, Street & Mangasarian 1995)",
        license=f"{UCI_LICENSE}; redistributed with scikit-learn (BSD-3-Clause)",
        citation="Wolberg, W., Mangasarian, O., Street, N. & Street, W. (1995). Breast Cancer "
        "Wisconsin (Diagnostic) [Dataset]. UCI Machine Learning Repository. "
        "https://doi.org/10.24432/C5DW2B",
        description=(
            "569 fine-needle aspirates of breast masses, each described by 30 features of the "
            "cell nuclei seen in the digitised image: the mean, standard error (_se) and "
            "worst (mean of the three largest, _worst) of radius, texture, perimeter, area, "
            "smoothness, compactness, concavity, concave points, symmetry and fractal "
            "dimension. The label is the diagnosis (0 malignant, 212 cases; 1 benign, 357). "
            "There is no published domain for these measurements: size bounds are the "
            "documented ranges rounded well out (those ranges were computed from these same "
            "records), symmetry, fractal dimension and smoothness are treated as ratios in [0, 1]."
        ),
    )


# Unscaled diabetes variables: (lo, hi, origin). Clinical plausibility, not the data.
DIABETES_BOUNDS: dict[str, tuple[float, float, str]] = {
    "age": (0, 100, "physical plausibility: age in years, 0 to 100"),
    "sex": (1, 2, "coding: sex recorded as 1 or 2 (meaning of the codes not documented)"),
    "bmi": (10, 70, "clinical plausibility: body-mass index in kg/m^2, below 10 or above 70 "
            "is essentially incompatible with an outpatient cohort"),
    "bp": (40, 200, "clinical plausibility: average (mean arterial) blood pressure in mm Hg"),
    "s1": (50, 500, "clinical plausibility: total serum cholesterol (tc) in mg/dL"),
    "s2": (0, 400, "clinical plausibility: LDL cholesterol in mg/dL (part of tc, so >= 0)"),
    "s3": (10, 150, "clinical plausibility: HDL cholesterol in mg/dL"),
    "s4": (0, 15, "clinical plausibility: ratio total cholesterol / HDL (tch); above 10 is "
           "rare, 15 generous"),
    "s5": (2, 8, "clinical plausibility: ltg, documented as 'possibly log of serum "
           "triglycerides'; natural log of 7.4..2981 mg/dL covers all plausible levels"),
    "s6": (20, 600, "clinical plausibility: blood glucose (glu) in mg/dL"),
}


def build_diabetes() -> Dataset:
    bunch = load_diabetes(scaled=False)
    features = [str(n) for n in bunch.feature_names]
    return Dataset(
        name="diabetes",
        title="Diabetes disease progression (Efron et al. 2004), unscaled",
        task="regression",
        features=features,
        X=bunch.data,
        label="target",
        y=bunch.target.astype(np.int64),
        bounds={f: DIABETES_BOUNDS[f][:2] for f in features},
        bounds_origin={f: DIABETES_BOUNDS[f][2] for f in features},
        label_bounds=(0, 400),
        label_origin="documentation: quantitative measure of disease progression one year "
        "after baseline; no scale is published, the released values (25..346) rounded out to "
        "[0, 400], i.e. informed by these same records",
        classes=None,
        source="scikit-learn load_diabetes(scaled=False) (Efron, Hastie, Johnstone & "
        "Tibshirani 2004; https://www4.stat.ncsu.edu/~boos/var.select/diabetes.html)",
        license="No explicit licence from the original authors; public research data "
        "redistributed with scikit-learn (BSD-3-Clause)",
        citation="Efron, B., Hastie, T., Johnstone, I. & Tibshirani, R. (2004). Least Angle "
        "Regression. Annals of Statistics 32(2), 407-499.",
        description=(
            "442 diabetes patients with ten baseline variables in their original units: age "
            "(years), sex (coded 1/2), body-mass index, average blood pressure and six blood "
            "serum measurements (s1 total cholesterol, s2 LDL, s3 HDL, s4 total/HDL ratio, "
            "s5 log triglycerides, s6 glucose). The target is a quantitative measure of "
            "disease progression one year later. Unlike scikit-learn's default scaled "
            "version (which uses the data's own mean and standard deviation), these raw "
            "values can be given bounds from clinical plausibility alone."
        ),
    )


def _stratified_indices(labels: np.ndarray, n_total: int, seed: int) -> np.ndarray:
    """Sorted row indices of a class-stratified sample of ``n_total`` rows.

    Per-class quotas are the class proportions times ``n_total``, rounded by largest
    remainder so that they sum to ``n_total`` exactly.
    """
    classes, counts = np.unique(labels, return_counts=True)
    exact = counts * n_total / counts.sum()
    quota = np.floor(exact).astype(np.int64)
    quota[np.argsort(-(exact - quota), kind="stable")[: n_total - quota.sum()]] += 1
    rng = np.random.default_rng(seed)
    chosen = [
        rng.choice(np.flatnonzero(labels == c), size=q, replace=False)
        for c, q in zip(classes, quota, strict=True)
    ]
    return np.sort(np.concatenate(chosen))


def build_mnist(shared: Path) -> Dataset:
    with np.load(shared / "mnist" / "mnist.npz") as source:
        x_train, y_train = source["x_train"], source["y_train"]
    index = _stratified_indices(y_train, MNIST_SUBSET_ROWS, MNIST_SEED)
    features = pixel_names(x_train.shape[1] * x_train.shape[2])
    bounds, origin = uniform_bounds(features, 0, 255, "definition: uint8 pixel intensity")
    return Dataset(
        name="mnist-10k",
        title="MNIST handwritten digits, stratified 10,000-image training subset",
        task="classification",
        features=features,
        X=x_train[index].reshape(len(index), -1).astype(np.uint8),
        label="label",
        y=y_train[index].astype(np.uint8),
        bounds=bounds,
        bounds_origin=origin,
        label_bounds=(0, 9),
        label_origin="definition: digit classes 0..9",
        classes=list(range(10)),
        image_shape=[28, 28],
        fmt="npz",
        extra_arrays={"source_index": index.astype(np.int64)},
        source="MNIST training set (LeCun, Cortes & Burges), rebuilt losslessly from the PNG "
        "copies in rasbt/mnist-pngs; stratified by label, seed "
        f"{MNIST_SEED}, sample_data/build.py",
        license="CC BY-SA 3.0 (as usually cited for MNIST); PNG copy MIT-licensed "
        "(rasbt/mnist-pngs)",
        citation="LeCun, Y., Bottou, L., Bengio, Y. & Haffner, P. (1998). Gradient-based "
        "learning applied to document recognition. Proceedings of the IEEE 86(11), "
        "2278-2324. http://yann.lecun.com/exdb/mnist/",
        description=(
            "10,000 of the 60,000 MNIST training images (28x28 grey-scale, 784 pixels "
            "px_0..px_783 in row-major order, intensities 0-255), drawn per class in "
            "proportion to the training set with a fixed seed. Stored as mnist-10k.npz with "
            "arrays X (uint8, 10000x784), y (uint8 labels 0-9), feature_names and "
            "source_index, the row numbers in the original MNIST training set, so the "
            "subset can be audited. The 10,000-image MNIST test set is disjoint from it and "
            "is the natural real held-out set. The classic image benchmark for DPMix and "
            "RON-Gauss synthetic images."
        ),
    )


# Adult numeric attributes: (lo, hi, origin), from census definitions, not from the data.
ADULT_NUMERIC_BOUNDS: dict[str, tuple[float, float, str]] = {
    "age": (17, 90, "documentation: extraction condition AAGE>16 (adult.names); 90 is the "
            "CPS age top-code"),
    "fnlwgt": (1, 2_000_000, "documentation: extraction condition AFNLWGT>1 gives the lower "
               "bound; no upper bound is published, 2,000,000 is a round number above the "
               "largest weight in the public Adult release (1,490,400), so data-informed"),
    "education-num": (1, 16, "documentation: rank of the 16 published education levels"),
    "capital-gain": (0, 99_999, "documentation: CPS top-code 99,999 (5-digit field)"),
    "capital-loss": (0, 99_999, "assumption: no published top-code; losses are reported as "
                     "non-negative amounts in the same 5-digit field as capital-gain, so the "
                     "same 99,999 ceiling (generous)"),
    "hours-per-week": (1, 99, "documentation: extraction condition HRSWK>0; 99 is the CPS "
                       "top-code (2-digit field)"),
}
ADULT_LABEL = "salary"


def parse_adult_names(path: Path) -> dict[str, list[str] | None]:
    """Attributes in file order -> published category list (``None`` for continuous)."""
    attributes: dict[str, list[str] | None] = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([a-z-]+): (.+)\.", line.strip())
        if match:
            name, values = match.groups()
            attributes[name] = None if values == "continuous" else values.split(", ")
    return attributes


def build_adult(shared: Path) -> Dataset:
    folder = shared / "adult"
    attributes = parse_adult_names(folder / "adult.names")
    raw = pd.read_csv(folder / "adult.data.gz", skipinitialspace=True, dtype=str)
    # The header line was added to the shared copy with '_' for '-'; check it lines up.
    expected = [a.replace("-", "_") for a in attributes]
    if list(raw.columns[:-1]) != expected:
        raise BoundsError(f"adult: header {list(raw.columns)} does not match adult.names")
    raw.columns = [*attributes, "income"]

    numeric = [a for a, cats in attributes.items() if cats is None]
    if set(numeric) != set(ADULT_NUMERIC_BOUNDS):
        raise BoundsError(f"adult: unexpected continuous attributes {numeric}")
    blocks = [raw[numeric].astype(np.int64)]
    bounds = {a: ADULT_NUMERIC_BOUNDS[a][:2] for a in numeric}
    origin = {a: ADULT_NUMERIC_BOUNDS[a][2] for a in numeric}
    groups: dict[str, list[str]] = {}
    for attr, categories in attributes.items():
        if categories is None:
            continue
        values = raw[attr]
        unknown = set(values) - set(categories) - {"?"}
        if unknown:
            raise BoundsError(f"adult: {attr} values {unknown} not in the published list")
        columns = [f"{attr}={c}" for c in categories]
        groups[attr] = columns
        onehot = np.equal.outer(values.to_numpy(), np.array(categories)).astype(np.int64)
        blocks.append(pd.DataFrame(onehot, columns=columns))
        group_bounds, group_origin = uniform_bounds(
            columns, 0, 1,
            f"definition: one-hot indicator over the categories of '{attr}' published in "
            "adult.names; a missing value ('?') is all zeros",
        )
        bounds |= group_bounds
        origin |= group_origin
    table = pd.concat(blocks, axis=1)

    income = raw["income"].str.strip()
    if not income.isin([">50K", "<=50K"]).all():
        raise BoundsError("adult: income values other than '>50K' / '<=50K'")
    return Dataset(
        name="adult",
        title="Adult census income (UCI, 1994 CPS), one-hot encoded",
        task="classification",
        features=list(table.columns),
        X=table.to_numpy(),
        label=ADULT_LABEL,
        y=(income == ">50K").to_numpy().astype(np.int64),
        bounds=bounds,
        bounds_origin=origin,
        onehot_groups=groups,
        label_bounds=(0, 1),
        label_origin="definition: 1 if income > 50K else 0",
        classes=[0, 1],
        source="UCI Adult, training file adult.data (32,561 rows), extracted by Barry Becker "
        "from the 1994 Census (CPS) database; donors Ronny Kohavi and Barry Becker",
        license=UCI_LICENSE,
        citation="Becker, B. & Kohavi, R. (1996). Adult [Dataset]. UCI Machine Learning "
        "Repository. https://doi.org/10.24432/C5XW20; Kohavi, R. (1996). Scaling Up the "
        "Accuracy of Naive-Bayes Classifiers: a Decision-Tree Hybrid. KDD-96.",
        description=(
            "32,561 adults from the 1994 US Current Population Survey (the UCI Adult training "
            "file). Six numeric attributes (age, fnlwgt, education-num, capital-gain, "
            "capital-loss, hours-per-week) are kept as they are; each of the eight "
            "categorical attributes is one-hot encoded over the category list published in "
            "adult.names (columns such as workclass=Private), so the columns do not depend "
            "on which categories happen to occur. A missing value ('?', in workclass, "
            "occupation and native-country) is encoded as all zeros for that attribute. The "
            "label salary is 1 when income exceeds 50K (about 24% of rows). The tabular "
            "benchmark of DPPro and PrivBayes; adult.test in the shared folder is the "
            "matching held-out set."
        ),
    )


# --------------------------------------------------------------------------- main


def build_all(shared: Path, out_dir: Path) -> list[Path]:
    """Build every bundled dataset; returns the written paths."""
    builders = [
        build_digits,
        build_breast_cancer,
        build_diabetes,
        lambda: build_mnist(shared),
        lambda: build_adult(shared),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for builder in builders:
        written += write_dataset(builder(), out_dir)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED,
                        help=f"shared datasets folder (default: {DEFAULT_SHARED})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if not args.shared.is_dir():
        parser.error(f"shared datasets folder not found: {args.shared}")
    written = build_all(args.shared, args.out)
    for path in written:
        print(f"{path.stat().st_size:>12,d}  {path}")
    total = sum(p.stat().st_size for p in written)
    print(f"{total:>12,d}  total ({math.ceil(total / 1e4) / 100:.2f} MB)")


if __name__ == "__main__":
    main()
