"""Issue 7 items 4-5: DPMix on MNIST against the memory bandwidth, and the DPMix accountant.

Skipped with a message when they are not importable. MNIST comes from
``../shared/datasets/mnist/mnist.npz`` (or the folder in ``$DP_DATASETS``).

* DPMix: time of a release of ``T = n`` mixtures of ``ell = 64`` rows (float32 release, labels
  one-hot) divided by ``T * ell * d * 4 / bandwidth``, the time to stream the float32 entries the
  mixtures must read, with the bandwidth measured in the same run by summing a 256 MiB float32
  array (median of several sums, taken before and after). Goals: 3 for integer pixels (gathered as
  uint8 counts), 4 for float rows.
* Accountant (SPEC 6.1 setting: ``d_X = d_Y = 50``, ``n = T = 10^6``, ``delta = 1e-6``): epsilon
  for a 64 sigmas x 10 ells grid in one call, for both bounds; one inverse calibration; and the
  same per-order RDP (orders 2..256) computed by ``dp-accounting`` (``RdpAccountant``, replace-one,
  ``SampledWithoutReplacementDpEvent``) for a few settings, per setting, against ours.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_common import Row, Timing, fmt, time_call, time_repeat

ROOT = Path(__file__).resolve().parents[1]


def _datasets_dir() -> Path:
    return Path(os.environ.get("DP_DATASETS", ROOT.parent / "shared" / "datasets"))


def bandwidth(repeats: int = 5) -> float:
    """Streaming read bandwidth in bytes/s: a 256 MiB float32 array summed, median of runs."""
    a = np.ones(64 << 20, dtype=np.float32)
    t = time_repeat(a.sum, repeats)
    return a.nbytes / t.wall_median


def run_dpmix(n: int, repeats: int, log: Callable[[str], None], bandwidth_repeats: int = 5) -> list[Row]:
    try:
        from dpcore.mechanisms import DPMix
    except ImportError as exc:
        log(f"  DPMix skipped: not importable ({exc})")
        return [Row("dpmix", "DPMix on MNIST", note=f"skipped: DPMix not importable ({exc})")]
    path = _datasets_dir() / "mnist" / "mnist.npz"
    if not path.exists():
        log(f"  DPMix skipped: {path} not found")
        return [Row("dpmix", "DPMix on MNIST", note=f"skipped: {path} not found")]
    with np.load(path) as z:
        X = z["x_train"].reshape(len(z["x_train"]), -1)[:n]
        y = z["y_train"][:n]
    ell, d = 64, X.shape[1]
    # MNIST pixels are integers 0..255: DPMix gathers them as uint8 counts (1 byte an entry).
    # The same pixels divided by 255 with bounds (0, 1) are not integers: the float32 rows
    # (4 bytes an entry) are gathered instead, which is what real-valued tables get.
    variants = [
        ("MNIST pixels 0..255 (counts path)", X, (0, 255), "<= 3"),
        ("pixels / 255 in (0, 1) (float rows path)", X.astype(np.float32) / 255, (0, 1), "<= 4"),
    ]
    try:
        from dpcore.mechanisms import _mixing_kernels
    except ImportError:  # a checkout (--root) from before the fused kernel
        fused = False
    else:
        fused = _mixing_kernels.kernels() is not None
    mixing = "fused kernel (numba)" if fused else "NumPy gather-and-sum"
    rows = []
    for label, data, bounds, goal in variants:
        mech = DPMix(ell=ell, n_mixtures=n, sigma_x=1.0, dtype="float32", bounds=bounds,
                     classes=np.arange(10), random_state=0)
        log(f"  DPMix release on MNIST (n = T = {n:,}, d = {d}, ell = {ell}), {label} ...")
        mech.release(data, y)  # warm-up, untimed (as time_pair does for the other benchmarks)
        bw_before = bandwidth(bandwidth_repeats)
        t = Timing()
        for _ in range(repeats):
            time_call(lambda m=mech, data=data: m.release(data, y), t)
        bw = (bw_before + bandwidth(bandwidth_repeats)) / 2
        nbytes = n * ell * d * 4
        floor = nbytes / bw
        row = Row("dpmix", f"DPMix release on MNIST, n = T = {n:,}, ell = {ell}, float32, {label}",
                  f"T ell d 4 B / bandwidth ({fmt(bw / 1e9)} GB/s)", floor, t.wall_median,
                  t.wall_median / floor, t.cpu_median / floor, goal,
                  f"{nbytes / 1e9:.2f} GB of float32 entries; {mixing} on worker threads",
                  {"bandwidth_Bps": bw, "bytes": nbytes})
        log(f"    ratio {row.ratio:.2f} (CPU {row.ratio_cpu:.2f})")
        rows.append(row)
    return rows


SETTING = dict(n=10**6, n_mixtures=10**6, d_x=50, d_y=50, delta=1e-6)
DPA_ORDERS = sorted(set(list(range(2, 65)) + list(range(72, 257, 8))))


def _dp_accounting_rdp(ell: int, sigma: float, orders: list[int]) -> np.ndarray:
    import dp_accounting

    d2 = SETTING["d_x"] / sigma**2 + SETTING["d_y"] / sigma**2
    acc = dp_accounting.rdp.RdpAccountant(
        [float(a) for a in orders], neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            SETTING["n"], ell, dp_accounting.GaussianDpEvent(ell / math.sqrt(d2))),
        SETTING["n_mixtures"]))
    return np.asarray(acc._rdp)


def run_accountant(repeats: int, log: Callable[[str], None], dpa_settings: int = 2) -> list[Row]:
    try:
        from dpcore import accounting
        eps_fn, cal_fn, rdp_fn = (accounting.dpmix_epsilon, accounting.dpmix_calibrate_sigma,
                                  accounting.dpmix_rdp)
    except (ImportError, AttributeError) as exc:
        log(f"  accountant skipped: {exc}")
        return [Row("accountant", "DPMix accountant", note=f"skipped: {exc}")]
    sigmas = np.geomspace(0.5, 64.0, 64)[:, None]
    ells = (2 ** np.arange(10))[None, :]
    grid = dict(sigma_x=sigmas, sigma_y=sigmas, ell=ells, n=SETTING["n"],
                n_mixtures=SETTING["n_mixtures"], d_x=50, d_y=50, delta=SETTING["delta"])
    rows: list[Row] = []
    grid_times: dict[str, float] = {}
    for bound in ("tight", "paper"):
        log(f"  accountant grid 64 x 10, bound={bound} ...")
        t = time_repeat(lambda b=bound: eps_fn(bound=b, **grid), repeats)
        grid_times[bound] = t.wall_median
        rows.append(Row("accountant", f"accountant: epsilon grid 64 sigmas x 10 ells, {bound}", "",
                        None, t.wall_median, None, None, "<= 0.2 s", f"CPU {fmt(t.cpu_median)} s",
                        {"cpu_s": t.cpu_median}))
    log("  accountant inverse calibration ...")
    t = time_repeat(lambda: cal_fn(epsilon=1.0, delta=SETTING["delta"], ell=64, n=SETTING["n"],
                                   n_mixtures=SETTING["n_mixtures"], d_x=50, d_y=50), repeats)
    rows.append(Row("accountant", "accountant: inverse calibration (eps = 1, ell = 64)", "", None,
                    t.wall_median, None, None, "<= 20 ms", f"CPU {fmt(t.cpu_median)} s",
                    {"cpu_s": t.cpu_median}))
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        rows.append(Row("accountant", "dp-accounting comparison", note="skipped: dp-accounting "
                        "not installed (pip install dp-accounting)"))
        return rows
    settings = [(16, 2.0), (64, 8.0), (1, 4.0), (256, 32.0)][:dpa_settings]
    log(f"  dp-accounting per-order RDP, {len(DPA_ORDERS)} orders <= 256, {len(settings)} settings ...")
    t_dpa, t_ours = Timing(), Timing()
    worst = 0.0
    for ell, sigma in settings:
        ref = time_call(lambda e=ell, s=sigma: _dp_accounting_rdp(e, s, DPA_ORDERS), t_dpa)
        ours = time_call(lambda e=ell, s=sigma: SETTING["n_mixtures"] * rdp_fn(
            np.array(DPA_ORDERS), sigma_x=s, sigma_y=s, ell=e, n=SETTING["n"], d_x=50, d_y=50),
            t_ours)
        worst = max(worst, float(np.max(np.abs(ours - ref) / np.abs(ref))))
    per_dpa, per_ours = t_dpa.wall_median, t_ours.wall_median
    rows.append(Row("accountant", "accountant vs dp-accounting: same per-order RDP, one setting",
                    "dp-accounting RdpAccountant", per_dpa, per_ours, per_ours / per_dpa,
                    t_ours.cpu_median / t_dpa.cpu_median, "",
                    f"{len(DPA_ORDERS)} orders 2..256; max rel. difference {worst:.1e}"))
    per_setting = grid_times["tight"] / 640
    rows.append(Row("accountant", "accountant: full epsilon (all orders) per grid setting vs "
                    "dp-accounting's orders <= 256", "dp-accounting RdpAccountant", per_dpa,
                    per_setting, per_setting / per_dpa, None, "", "ours searches every integer order"))
    return rows


def run(n: int, repeats: int, log: Callable[[str], None], quick: bool = False) -> list[Row]:
    """DPMix on ``n`` MNIST rows and the accountant (``quick``: one repeat and one dp-accounting
    setting, a smoke run)."""
    return (run_dpmix(n, max(1, repeats), log, bandwidth_repeats=1 if quick else 5)
            + run_accountant(1 if quick else max(3, repeats), log, dpa_settings=1 if quick else 2))
