"""The secure exact samplers of ``dpcore.noise`` against NumPy's float samplers, on one thread.

For 10^5 and 10^7 draws, times (interleaved, same run; ``bench_common.time_pair``):

* ``discrete_laplace`` (exact, integer arithmetic, ChaCha20 bits keyed from ``os.urandom``) at the
  scale ``laplace`` uses (t ~ 2^40 grid units) against ``Generator.laplace``;
* ``discrete_gaussian`` at sigma ~ 1.3 * 2^24 grid units (what ``gaussian`` uses) against
  ``Generator.normal``, with secure bits and with the seeded preview bits (``noise_source(seed)``,
  what the Explore page draws);
* the whole mechanisms ``noise.laplace`` / ``noise.gaussian`` (rounding, sampling, int64 sum) against
  ``x + rng.laplace(...)`` / ``x + rng.normal(...)``;
* the bit source alone (ChaCha20 and ``os.urandom``) against ``PCG64.random_raw``;
* OpenDP's exact discrete Gaussian (``make_gaussian`` on an integer vector, its own OS CSPRNG) at
  scale 2^30 against ``discrete_gaussian`` at sigma 2^30 grid units, ``--opendp`` draws (default
  3 * 10^4; OpenDP draws ~4 * 10^4 a second here, so larger sizes take minutes). The ratio is
  dpcore / OpenDP: below 1, dpcore is faster.

Run: ``python benchmarks/bench_noise.py`` (add ``--quick`` for 10^5 and 10^6 only). Goals: 3x for the
discrete Laplace, 2.5x for the discrete Gaussian (the samplers on one thread; a release's
``NoiseStream`` draws blocks on every core, ``bench_mechanisms.py`` times that).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from bench_common import Row, markdown_table, ratio_row, time_pair

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's dpcore
from dpcore import noise  # noqa: E402


def rows(sizes: tuple[int, ...], repeats: int) -> list[Row]:
    out: list[Row] = []
    rng = np.random.default_rng()
    secure = noise.SecureBits()
    os_bits = noise.SecureBits("os")
    t_lap = 2**40 + 12345
    sigma_grid = 1.3 * 2.0**24
    for n in sizes:
        reps = repeats if n <= 10**6 else max(3, repeats // 3)
        x = rng.uniform(-1, 1, n)
        label = f"{n:.0e}".replace("+0", "")
        pairs = [
            ("bits ChaCha20", "PCG64 random_raw",
             lambda n=n: rng.bit_generator.random_raw(n), lambda n=n: secure.words(n), ""),
            ("bits os.urandom", "PCG64 random_raw",
             lambda n=n: rng.bit_generator.random_raw(n), lambda n=n: os_bits.words(n), ""),
            ("discrete_laplace", "rng.laplace",
             lambda n=n: rng.laplace(0.0, 1.0, n), lambda n=n: noise.discrete_laplace(t_lap, n, secure),
             "<= 3"),
            ("discrete_gaussian", "rng.normal",
             lambda n=n: rng.normal(0.0, 1.0, n), lambda n=n: noise.discrete_gaussian(sigma_grid, n, secure),
             "<= 2.5"),
            ("discrete_gaussian, CKS 2020 Algorithm 3 (method='cks')", "rng.normal",
             lambda n=n: rng.normal(0.0, 1.0, n),
             lambda n=n: noise.discrete_gaussian(sigma_grid, n, secure, method="cks"), ""),
            ("discrete_gaussian, seeded preview bits", "rng.normal",
             lambda n=n: rng.normal(0.0, 1.0, n),
             lambda n=n: noise.discrete_gaussian(sigma_grid, n, noise.noise_source(n)), "<= 2.5"),
            ("noise.laplace (mechanism)", "x + rng.laplace",
             lambda x=x: x + rng.laplace(0.0, 0.1, x.size),
             lambda x=x: noise.laplace(x, 0.1, 1.0, n_changed=1, bits=secure), "<= 3"),
            ("noise.gaussian (mechanism)", "x + rng.normal",
             lambda x=x: x + rng.normal(0.0, 0.5, x.size),
             lambda x=x: noise.gaussian(x, 0.5, grid=noise.gaussian_grid(0.1, 1, 0.5)[0],
                                        l2_sensitivity=0.1, n_changed=1, bits=secure), "<= 3"),
        ]
        for name, base_name, base, target, goal in pairs:
            tb, tt = time_pair(base, target, reps)
            out.append(ratio_row("noise", f"{name} n={label}", base_name, tb, tt, goal=goal,
                                 note=f"{n / tt.wall_median:,.3g} draws/s"))
            print(f"  {out[-1].name}: {out[-1].ratio:.2f}x", file=sys.stderr)
    return out


def opendp_row(n: int, repeats: int) -> Row:
    """dpcore's discrete Gaussian against OpenDP's (both exact, both from a CSPRNG) at sigma 2^30."""
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        return Row("noise", "OpenDP make_gaussian", note=f"skipped: {exc}")
    dp.enable_features("contrib")
    scale = 2.0**30
    theirs = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=scale)
    zeros = [0] * n
    secure = noise.SecureBits()
    tb, tt = time_pair(lambda: theirs(zeros), lambda: noise.discrete_gaussian(scale, n, secure),
                       max(1, repeats // 3))
    label = f"{n:.0e}".replace("+0", "")
    note = f"OpenDP {n / tb.wall_median:,.3g} draws/s, dpcore {n / tt.wall_median:,.3g}"
    return ratio_row("noise", f"discrete_gaussian vs OpenDP, sigma 2^30, n={label}", "OpenDP make_gaussian",
                     tb, tt, note=note)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^5 and 10^6 draws instead of 10^5 and 10^7")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--opendp", type=int, default=30_000, help="draws for the OpenDP comparison (0: skip)")
    args = ap.parse_args(argv)
    sizes = (10**5, 10**6) if args.quick else (10**5, 10**7)
    table = rows(sizes, args.repeats)
    if args.opendp:
        table.append(opendp_row(args.opendp, args.repeats))
        print(f"  {table[-1].name}: {table[-1].ratio:.3f}x", file=sys.stderr)
    print(markdown_table(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
