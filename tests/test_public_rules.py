"""Public-rule defaults (issue 13, item 5). ``noise="auto"``: the user's delta alone decides between
the papers' Laplace noise (pure epsilon) and Gaussian noise ((epsilon, delta)); the card keeps
``auto`` as given and says which noise was used and why. RON-Gauss's ``p``: the rule of
:func:`dpcore.calibration.recommended_n_components` for a random basis."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore.calibration import recommended_n_components, resolve_noise
from dpcore.data import load_dataset
from dpcore.mechanisms import PCAGauss, RONGauss
from dpcore.mechanisms.modips import MODIPS


def test_resolve_noise_rule():
    # the recommended setting is the default: Gaussian noise, delta given or automatic
    noise, reason = resolve_noise("auto", None)
    assert noise == "gaussian" and "automatic value min(1e-5, n^-1.5)" in reason
    assert "noise='laplace' for pure epsilon" in reason
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
def test_auto_is_gaussian_with_the_automatic_delta_and_laplace_by_name(cls, adult_rows):
    from dpcore.calibration import default_delta

    assert cls.param("noise").default == "auto"
    untouched = cls(epsilon=1.0, random_state=0).release(adult_rows)
    g = untouched.guarantee
    assert g.kind == "approx" and g.delta == pytest.approx(default_delta(1500)) and g.epsilon <= 1.0 + 1e-12
    assert {r.distribution for r in untouched.noise} == {"gaussian"}
    card = untouched.card()
    assert card["parameters"]["noise"] == "auto" and card["details"]["noise"] == "gaussian"
    assert "automatic value" in card["details"]["noise_choice"]
    pure = cls(epsilon=1.0, noise="laplace", random_state=0).release(adult_rows)  # pure epsilon, by name
    assert pure.guarantee.kind == "pure" and pure.guarantee.delta == 0
    assert {r.distribution for r in pure.noise} == {"laplace"}

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


def test_random_basis_rule_trades_the_mass_kept_against_the_noise():
    def p(eps, delta=None, **kw):
        return recommended_n_components(24420, 105, epsilon=eps, delta=delta, n_classes=2, model_share=0.63,
                                        random_basis=True, **kw)["n_components"]

    # Laplace noise grows like p per entry: p grows with epsilon; Gaussian noise does not
    assert p(0.1) < p(1.0) < p(10.0) < 104 and (p(1.0), p(10.0)) == (8, 39)
    assert p(1.0, 1e-6) == p(10.0, 1e-6) == 104 and p(np.inf) == 104
    # the minimiser of (1 - p/d) + c p^1.5 (c the Gaussian noise term) is (2/(3 c d))^2, rounded
    rec = recommended_n_components(24420, 105, epsilon=0.1, delta=1e-6, n_classes=2, model_share=0.63,
                                   random_basis=True)
    c = 8 / (3 * np.pi) * rec["noise_sd_per_entry"]
    assert abs(rec["n_components"] - (2 / (3 * c * 105)) ** 2) < 1
    # a DP basis is not used with a random one (no basis budget)
    assert recommended_n_components(24420, 105, epsilon=1.0, dp_basis=True, random_basis=True)[
        "pca_fraction"] is None


def test_ron_gauss_p_comes_from_public_facts_only():
    ds = load_dataset("adult")
    a = RONGauss(epsilon=1.0, random_state=0).release(ds.subset(np.arange(3000)))
    b = RONGauss(epsilon=1.0, random_state=0).release(ds.subset(np.arange(3000, 6000)))
    assert a.details["n_components"] == b.details["n_components"] == a.details["recommended"]["n_components"]
    assert a.details["recommended"]["inputs"]["random_basis"] is True
    assert a.details["recommended"]["inputs"]["model_share"] == pytest.approx(0.7 * 0.9)
    assert a.details["recommended"]["mechanism"]["mechanism"] == "pca-gauss"
    given = RONGauss(epsilon=1.0, n_components=6, random_state=0).release(ds.subset(np.arange(3000)))
    assert given.details["n_components"] == 6 and "recommended" not in given.details


def test_image_dct_basis_is_orthonormal_zigzag_and_data_free():
    from dpcore.calibration import image_dct_basis

    W = image_dct_basis((6, 5), 12)
    assert W.shape == (30, 12) and np.allclose(W.T @ W, np.eye(12), atol=1e-12)
    assert np.allclose(W[:, 0], 1 / np.sqrt(30))  # the constant (DC) image first
    # then the two first-order cosines: one varies along the rows only, one along the columns only
    imgs = W[:, 1:3].T.reshape(2, 6, 5)
    assert np.allclose(np.ptp(imgs[0], axis=0), 0) and np.allclose(np.ptp(imgs[1], axis=1), 0)
    assert np.allclose(image_dct_basis((6, 5, 1), 12), W)
    with pytest.raises(ValueError, match="image_shape"):
        image_dct_basis((30,), 3)
    with pytest.raises(ValueError, match="n_components"):
        image_dct_basis((6, 5), 31)


def test_pca_gauss_dct_source_spends_nothing_on_the_basis():
    from dpcore.calibration import image_dct_basis

    ds = load_dataset("digits")  # 8 x 8 images, public image_shape
    rel = PCAGauss(epsilon=1.0, delta=1e-6, n_components=10, pca_source="dct", random_state=0).release(ds)
    assert np.array_equal(rel.transform_arrays["W"], image_dct_basis((8, 8), 10))
    assert "pca" not in rel.details["epsilon_parts"]
    assert not any("PCA" in r.statistic and "d x d" in r.statistic for r in rel.noise)
    assert rel.guarantee.epsilon <= 1.0 + 1e-12 and rel.guarantee.delta <= 1e-6
    # real rows map through the public basis: W^T z / B of the box-mapped rows
    z = (ds.X[:5] - ds.bounds[:, 0]) / np.ptp(ds.bounds, axis=1) * 2 - 1
    assert np.allclose(rel.transform(ds.X[:5]), z @ rel.transform_arrays["W"] / 8.0)
    auto = PCAGauss(epsilon=1.0, delta=1e-6, pca_source="dct", random_state=0).release(ds)
    assert auto.details["recommended"]["pca_fraction"] is None
    with pytest.raises(ValueError, match="image_shape"):
        PCAGauss(epsilon=1.0, pca_source="dct").release(load_dataset("adult").subset(np.arange(500)))


def test_recommended_mechanism_uses_the_image_basis_for_images_only():
    from dpcore.calibration import recommended_mechanism

    img = recommended_mechanism("classification", 7500, 784, epsilon=1.0, delta=1e-6, n_classes=10,
                                image_shape=(28, 28))
    assert img["mechanism"] == "pca-gauss" and img["parameters"]["pca_source"] == "dct"
    assert img["parameters"]["noise"] == "gaussian" and "DCT" in img["reason"]
    assert img["parameters"]["covariance_type"] == "tied" and "tied" in img["reason"]
    table = recommended_mechanism("classification", 7500, 105, epsilon=1.0, n_classes=2, image_shape=(28, 28))
    assert "pca_source" not in table["parameters"]  # the shape does not describe these features
    assert "covariance_type" not in table["parameters"]
    rel = PCAGauss(epsilon=1.0, delta=1e-6, random_state=0).release(load_dataset("digits"))
    assert rel.details["recommended"]["mechanism"]["parameters"]["pca_source"] == "dct"


def test_shrink_noisy_covariance_recovers_spikes_and_drops_the_noise_bulk():
    from dpcore.calibration import psd_repair, shrink_noisy_covariance

    rng = np.random.default_rng(0)
    p, s = 200, 0.01

    def wigner():
        g = rng.normal(0.0, s, (p, p))
        return np.triu(g) + np.triu(g, 1).T  # i.i.d. upper triangle, mirrored

    v = rng.normal(size=(p, 2))
    v, _ = np.linalg.qr(v)
    A = (v * [1.0, 0.5]) @ v.T  # spikes 1.0 and 0.5, far above s sqrt(p) = 0.14
    est = shrink_noisy_covariance(A + wigner(), s)
    top = np.sort(np.linalg.eigvalsh(est))[::-1]
    assert top[:2] == pytest.approx([1.0, 0.5], rel=0.02)
    assert np.all(top >= -1e-12) and np.allclose(est, est.T)
    # the clipped matrix keeps the bulk: its trace is far larger than the spikes'
    assert np.trace(psd_repair(A + wigner())) > 1.5 + 2.0
    # pure noise: at most a sliver above the edge survives
    noise_only = shrink_noisy_covariance(wigner(), s)
    assert np.trace(noise_only) < 0.05 * np.trace(psd_repair(wigner()))
    m = A + wigner()
    assert np.allclose(shrink_noisy_covariance(m, 0.0), psd_repair(m))
    with pytest.raises(ValueError, match="noise_sd"):
        shrink_noisy_covariance(m, -1.0)
