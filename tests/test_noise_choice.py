"""``noise="auto"`` (issue 13, item 5): the user's delta alone decides between the papers' Laplace
noise (pure epsilon) and Gaussian noise ((epsilon, delta)); the card keeps ``auto`` as given and
says which noise was used and why."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore.calibration import resolve_noise
from dpcore.data import load_dataset
from dpcore.mechanisms import PCAGauss, RONGauss
from dpcore.mechanisms.modips import MODIPS


def test_resolve_noise_rule():
    assert resolve_noise("auto", None)[0] == "laplace"
    assert resolve_noise("auto", 0.0)[0] == "laplace"
    noise, reason = resolve_noise("auto", 1e-6)
    assert noise == "gaussian" and "delta = 1e-06" in reason
    assert resolve_noise("laplace", 1e-6)[0] == "laplace"  # the papers' mode by name
    assert resolve_noise("gaussian", None)[0] == "gaussian"
    with pytest.raises(ValueError, match="noise"):
        resolve_noise("uniform", None)


@pytest.fixture(scope="module")
def adult_rows():
    return load_dataset("adult").subset(np.arange(1500))


@pytest.mark.parametrize("cls", [PCAGauss, RONGauss, MODIPS])
def test_auto_is_laplace_without_delta_and_gaussian_with_it(cls, adult_rows):
    assert cls.param("noise").default == "auto"
    pure = cls(epsilon=1.0, random_state=0).release(adult_rows)
    assert pure.guarantee.kind == "pure" and pure.guarantee.delta == 0
    assert {r.distribution for r in pure.noise} == {"laplace"}
    card = pure.card()
    assert card["parameters"]["noise"] == "auto" and card["details"]["noise"] == "laplace"
    assert "no delta" in card["details"]["noise_choice"]

    auto = cls(epsilon=1.0, delta=1e-6, random_state=0).release(adult_rows)
    named = cls(epsilon=1.0, delta=1e-6, noise="gaussian", random_state=0).release(adult_rows)
    assert auto.guarantee.kind == "approx" and auto.guarantee.delta <= 1e-6
    assert auto.guarantee.epsilon <= 1.0 + 1e-12
    assert {r.distribution for r in auto.noise} == {"gaussian"}
    # the same mechanism as noise="gaussian": same statistics, sensitivities and scales
    assert [(r.statistic, r.sensitivity, r.scale) for r in auto.noise] == \
        [(r.statistic, r.sensitivity, r.scale) for r in named.noise]
    assert auto.card()["parameters"]["noise"] == "auto" and named.card()["parameters"]["noise"] == "gaussian"
    assert "delta = 1e-06 was given" in auto.details["noise_choice"]
    assert "noise_choice" not in named.details  # nothing was chosen for the user


def test_named_laplace_keeps_the_papers_mode_with_a_delta(adult_rows):
    rel = PCAGauss(epsilon=1.0, delta=1e-6, noise="laplace", pca_source="analyze-gauss",
                   random_state=0).release(adult_rows)
    # Analyze-Gauss basis (Gaussian, the delta), Laplace model
    assert [r.distribution for r in rel.noise][0] == "gaussian"
    assert {r.distribution for r in rel.noise[1:]} == {"laplace"}
    assert rel.guarantee.delta == 1e-6


def test_pca_gauss_asked_for_gaussian_without_delta_uses_the_default_delta(adult_rows):
    rel = PCAGauss(epsilon=1.0, noise="gaussian", random_state=0).release(adult_rows)
    assert rel.details["delta_rule"] == "min(1e-5, n^-1.5)"
    assert rel.guarantee.delta <= 1500 ** -1.5 * (1 + 1e-9)
