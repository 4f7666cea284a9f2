"""Empirical epsilon of the Attack page's membership-inference game against the claimed one (issue 18).

For each mechanism and claimed epsilon: the game of :func:`dpcore.attacks.membership_game` on the
digits training split (75/25 split, seed 0, the app's), target = the upper corner of the public box
replacing the row farthest from it, each mechanism's default attack statistic and otherwise default
parameters. Prints a Markdown table: claimed epsilon (delta), AUC, empirical epsilon (95% lower
limit), and seconds. NOT differentially private (the game runs on the private rows): a benchmark.

Usage::

    python benchmarks/attack_table.py [--mechanisms local-gaussian identity-laplace]
                                      [--epsilons 0.1 1 10] [--trials 300] [--dataset digits]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpcore.attacks import membership_game  # noqa: E402
from dpcore.data import load_dataset  # noqa: E402
from dpcore.exceptions import PrivacyLeakWarning  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mechanisms", nargs="+", default=["local-gaussian", "identity-laplace"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0, 10.0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--target", default="upper")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        train, _ = load_dataset(args.dataset).split(0.25, random_state=0)
    target = int(args.target) if args.target.isdigit() else args.target
    lines = ["| mechanism (statistic) | claimed ε (δ) | AUC | empirical ε (95% lower limit) | seconds |",
             "|---|---|---|---|---|"]
    for name in args.mechanisms:
        for eps in args.epsilons:
            res = membership_game(name, {"epsilon": eps}, train, target=target, trials=args.trials)
            claim = f"{res.claimed_epsilon:.3g}" + (f" ({res.delta:.0e})" if res.delta else "")
            lines.append(f"| {name} ({res.statistic}) | {claim} | {res.auc:.3f} | "
                         f"{res.lower_bound.epsilon:.3f} | {res.seconds:.1f} |")
            print(lines[-1], file=sys.stderr)
    print(f"{args.dataset} training split ({train.n_samples} rows), target: {res.target}, "
          f"{args.trials} trials per world\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
