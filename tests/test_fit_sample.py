"""scikit-learn style ``fit`` / ``sample`` of the generative mechanisms (RON-Gauss, PCA-Gauss, MODIPS).

``fit`` spends the budget once and stores a DP model (learned attributes ending in ``_``); ``sample`` and
``sample_release`` are post-processing of that model and never read ``X``; ``release`` is ``fit`` and one
draw with the same generator.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from dpcore.exceptions import NotPrivateError
from dpcore.mechanisms import MODIPS, PCAGauss, RONGauss
from dpcore.mechanisms._gaussian_model import GaussianGenerator, GaussianModel
from dpcore.mechanisms._labels import proportional_counts
from dpcore.mechanisms.base import Mechanism

N, D = 400, 8
CLASSES = [0, 1, 2, 3]
#: (mechanism, task, extra parameters): every mode of the three mechanisms
CASES = [
    (RONGauss, "unsupervised", {}),
    (RONGauss, "unsupervised", {"reconstruct": True}),
    (RONGauss, "classification", {}),
    (RONGauss, "classification", {"label_privacy": "within-class"}),
    (RONGauss, "classification", {"noise": "gaussian"}),
    (RONGauss, "regression", {}),
    (PCAGauss, "unsupervised", {}),
    (PCAGauss, "classification", {}),
    (PCAGauss, "classification", {"label_privacy": "within-class"}),
    (PCAGauss, "regression", {"pca_source": "analyze-gauss"}),
    (MODIPS, "unsupervised", {}),
    (MODIPS, "classification", {}),
    (MODIPS, "classification", {"label_privacy": "within-class"}),
    (MODIPS, "regression", {"noise": "gaussian"}),
]
IDS = [f"{c.name}-{t}-{'-'.join(f'{k}={v}' for k, v in e.items()) or 'default'}" for c, t, e in CASES]


def _table(task: str, n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows in [0, 1]^D with class-dependent means; labels for the task."""
    rng = np.random.default_rng(seed)
    y = rng.choice(len(CLASSES), size=n, p=[0.4, 0.3, 0.2, 0.1])
    X = np.clip(0.2 + 0.15 * y[:, None] * (np.arange(D) % 2) + 0.1 * rng.standard_normal((n, D)), 0, 1)
    if task == "classification":
        return X, y
    if task == "regression":
        return X, np.clip(4 * X[:, 0] - 2 * X[:, 1], -5, 5)
    return X, None


def _mech(cls, task: str, extra: dict, random_state=None, **kw) -> GaussianGenerator:
    given = {"epsilon": 2.0, "bounds": (0.0, 1.0), "task": task, "random_state": random_state, **extra, **kw}
    if cls is not MODIPS:
        given.setdefault("n_components", 3)
    if task == "classification":
        given["classes"] = CLASSES
    if task == "regression":
        given["label_bounds"] = (-5.0, 5.0)
    return cls(**given)


@pytest.mark.parametrize(("cls", "task", "extra"), CASES, ids=IDS)
def test_sample_never_reads_x(cls, task, extra, monkeypatch):
    X, y = _table(task)
    mech = _mech(cls, task, extra).fit(X.copy(), None if y is None else y.copy())
    columns = mech.release(X, y).columns  # refits: the same shapes
    mech.fit(X, y)
    X[:] = np.nan  # the private array is destroyed in place ...
    del X, y

    def refuse(*args, **kwargs):
        raise AssertionError("sample read the private input")

    monkeypatch.setattr(Mechanism, "_prepare", refuse)  # ... and no input can be prepared again
    monkeypatch.setattr(cls, "_fit", refuse)
    X_new, y_new = mech.sample(250)
    assert X_new.shape == (250, len(columns)) and np.isfinite(X_new).all()
    assert (y_new is None) == (task == "unsupervised")
    if task == "classification":
        assert set(np.unique(y_new)) <= set(CLASSES)
    if task == "regression":
        assert y_new.shape == (250,) and np.all(np.isfinite(y_new))
    rel = mech.sample_release(30)
    assert rel.data.shape == (30, len(columns)) and rel.columns == columns
    # the model holds per-component statistics only, never a row-sized array
    model = mech.model_
    assert model.means.shape[0] == model.n_components <= len(CLASSES)
    assert all(np.asarray(getattr(mech, a)).size < N for a in ("epsilon_", "delta_", "n_features_in_"))


@pytest.mark.parametrize(("cls", "task", "extra"), CASES, ids=IDS)
def test_release_is_fit_then_one_draw_with_the_same_generator(cls, task, extra):
    # a Generator as random_state: fit draws W and spawns the noise stream from it, the sample continues
    # it; release() does the same in one call, so the two give the same rows
    X, y = _table(task)
    rel = _mech(cls, task, extra, random_state=np.random.default_rng(11)).release(X, y, n_samples=90)
    g = np.random.default_rng(11)
    mech = _mech(cls, task, extra, random_state=g).fit(X, y)
    X_new, y_new = mech.sample(90, random_state=g)
    np.testing.assert_array_equal(X_new, rel.data)
    if y_new is None:
        assert rel.labels is None
    else:
        np.testing.assert_array_equal(y_new, rel.labels)
    assert mech.guarantee_ == rel.guarantee and list(mech.noise_) == rel.noise


@pytest.mark.parametrize(("cls", "task", "extra"), [c for c in CASES if c[1] != "regression"],
                         ids=[i for c, i in zip(CASES, IDS, strict=True) if c[1] != "regression"])
def test_release_and_sample_have_the_same_distribution(cls, task, extra):
    # the same seeded fit (same noise, same model), then 20,000 rows each way: release() rows and
    # sample() rows agree in mean and covariance within sampling error
    X, y = _table(task)
    m = 20_000
    rel = _mech(cls, task, extra, random_state=5).release(X, y, n_samples=m)
    mech = _mech(cls, task, extra, random_state=5).fit(X, y)
    X_new, _ = mech.sample(m, random_state=123)
    a, b = np.asarray(rel.data), X_new
    assert not np.array_equal(a, b)  # other draws ...
    sd = np.sqrt(a.var(axis=0) + b.var(axis=0) + 1e-18)
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= 5 * sd / math.sqrt(m))  # ... same law
    ca, cb = np.cov(a.T), np.cov(b.T)
    scale = np.sqrt(np.outer(np.diag(ca), np.diag(ca))) + 1e-18
    assert np.max(np.abs(ca - cb) / scale) < 0.1


def test_regression_labels_follow_the_same_law():
    X, y = _table("regression")
    m = 20_000
    for cls, extra in ((RONGauss, {}), (MODIPS, {}), (PCAGauss, {"pca_source": "analyze-gauss"})):
        rel = _mech(cls, "regression", extra, random_state=5).release(X, y, n_samples=m)
        _, y_new = _mech(cls, "regression", extra, random_state=5).fit(X, y).sample(m, random_state=9)
        a, b = np.asarray(rel.labels), y_new
        assert abs(a.mean() - b.mean()) <= 5 * math.sqrt((a.var() + b.var()) / m), cls.name
        assert abs(a.std() / b.std() - 1) < 0.05, cls.name


@pytest.mark.parametrize("cls", [RONGauss, PCAGauss, MODIPS])
@pytest.mark.parametrize("label_privacy", ["protected", "within-class"])
def test_class_proportions_follow_the_dp_weights(cls, label_privacy):
    X, y = _table("classification")
    mech = _mech(cls, "classification", {"label_privacy": label_privacy}, random_state=3, epsilon=0.5)
    _, diagnostics = mech.explore(X, y)  # the same seed: the same noisy histogram as the fit
    model = mech.fit(X, y).model_
    if label_privacy == "protected":  # DP weights: the noisy histogram clipped at 0, normalised
        w = np.clip(diagnostics["class_counts_dp"], 0, None)
        assert not np.array_equal(w, np.bincount(y, minlength=4))  # noisy, not the real counts
    else:  # public class sizes
        w = np.bincount(y, minlength=4).astype(float)
    np.testing.assert_allclose(model.weights, w[w > 0] / w.sum(), rtol=1e-12)
    np.testing.assert_array_equal(model.labels, np.flatnonzero(w > 0))
    for m in (7, 1000, 12_345):
        _, labels = mech.sample(m, random_state=m)
        counts = np.array([np.sum(labels == c) for c in model.labels])
        assert counts.sum() == m
        np.testing.assert_array_equal(counts, proportional_counts(m, model.weights))
        assert np.all(np.abs(counts / m - model.weights) < 1 / m + 1e-12)  # largest remainder
    if label_privacy == "within-class":  # n rows: exactly the public class sizes
        _, labels = mech.sample(random_state=0)
        np.testing.assert_array_equal(np.bincount(labels, minlength=4), np.bincount(y, minlength=4))


@pytest.mark.parametrize(("cls", "task", "extra"), CASES, ids=IDS)
def test_sample_release_states_the_fit_guarantee_and_spends_nothing(cls, task, extra, tmp_path):
    X, y = _table(task)
    mech = _mech(cls, task, extra).fit(X, y)
    first = mech.release(X, y)  # a fresh fit (new noise) for its own draw: the fitted model stays
    second = mech.sample_release(n_samples=2 * N)
    assert second.guarantee == first.guarantee == mech.guarantee_
    assert (mech.epsilon_, mech.delta_) == (first.guarantee.epsilon, first.guarantee.delta)
    # the fit's noise records; release() is a fresh fit with its own noise, so with protected labels
    # the classes it models (those whose noisy weight draws rows) may differ from the fit's: its
    # records are the fit's kinds of statistic, of public classes only
    assert tuple(second.noise) == mech.noise_ and second.parameters["n_samples"] == 2 * N
    kinds = [{re.sub(r"class \d+", "class c", r.statistic) for r in records} for records in (first.noise,
                                                                                           mech.noise_)]
    assert kinds[0] <= kinds[1]
    named = {int(c) for r in [*first.noise, *mech.noise_] for c in re.findall(r"class (\d+)", r.statistic)}
    assert named <= set(range(len(CLASSES)))
    assert second.data.shape == (2 * N, len(first.columns)) and second.downloadable
    files = second.save(tmp_path / "more.csv")
    card = json.loads(files["card"].read_text())
    assert card["guarantee"] == first.guarantee.as_card() and card["n_released"] == 2 * N
    drawn = card["details"]["drawn_from_fitted_model"]
    assert "no privacy budget" in drawn["note"] and drawn["model_created_utc"] <= card["created_utc"]
    assert "seed" not in json.dumps(card["parameters"]) and "random_state" not in card["parameters"]
    assert "drawn_from_fitted_model" not in first.details  # release() itself is the first draw
    # a seeded draw from an OS-entropy fit is a preview too: nothing is written
    with pytest.raises(NotPrivateError, match="random_state"):
        mech.sample_release(50, random_state=1).save(tmp_path / "seeded.csv")
    assert not (tmp_path / "seeded.csv").exists()


def test_a_seeded_fit_gives_previews_only(tmp_path):
    X, y = _table("classification")
    mech = _mech(RONGauss, "classification", {}, random_state=0).fit(X, y)
    assert mech.seeded_
    rel = mech.sample_release(100)  # OS entropy for the rows, but the noise came from the seed
    assert rel.seeded and not rel.downloadable
    with pytest.raises(NotPrivateError, match="random_state"):
        rel.save(tmp_path / "out.csv")
    assert not any(tmp_path.iterdir())
    inf = _mech(MODIPS, "unsupervised", {}, epsilon=math.inf).fit(X)  # NOT PRIVATE
    with pytest.raises(NotPrivateError, match="NOT PRIVATE"):
        inf.sample_release(10).save(tmp_path / "inf.csv")


@pytest.mark.parametrize("cls", [RONGauss, PCAGauss, MODIPS])
def test_sample_before_fit_and_bad_n_samples(cls):
    mech = _mech(cls, "unsupervised", {})
    for call in (mech.sample, mech.sample_release):
        with pytest.raises(NotFittedError, match="fit"):
            call(10)
    assert issubclass(NotFittedError, ValueError)
    X, _ = _table("unsupervised")
    mech.fit(X)
    for bad in (0, -3, 2.5, "ten", True, 10**8):
        with pytest.raises(ValueError, match="n_samples"):
            mech.sample(bad)
        with pytest.raises(ValueError, match="n_samples"):
            mech.sample_release(bad)
    assert mech.sample()[0].shape[0] == N == mech.n_samples_fit_  # default: n rows, as release()
    assert mech.sample(np.int64(3))[0].shape[0] == 3


@pytest.mark.parametrize("cls", [RONGauss, PCAGauss, MODIPS])
def test_init_stores_only_and_refit_replaces_every_learned_attribute(cls):
    mech = _mech(cls, "classification", {}, random_state=1)
    assert not [a for a in vars(mech) if a.endswith("_")]
    X, y = _table("classification")
    assert mech.fit(X, y) is mech
    learned = {a: getattr(mech, a) for a in GaussianGenerator.LEARNED_ATTRIBUTES}
    assert sorted(a for a in vars(mech) if a.endswith("_") and not a.startswith("_")) == sorted(learned)
    assert isinstance(mech.model_, GaussianModel) and mech.n_features_in_ == D and mech.n_samples_fit_ == N
    assert mech.model_.labels is not None
    X2, _ = _table("unsupervised", n=150, seed=1)
    mech.set_params(task="unsupervised", classes=None, epsilon=1.0).fit(X2)
    assert mech.n_samples_fit_ == 150 and mech.model_.labels is None and mech.model_.n_components == 1
    assert mech.epsilon_ <= 1.0 + 1e-12 < learned["epsilon_"]
    assert all(getattr(mech, a) is not learned[a] for a in ("model_", "output_map_", "noise_"))
    with pytest.raises(ValueError, match="read-only"):
        mech.model_.means[0, 0] = 1.0


def _exact_and_noisy(cls, extra, epsilon, task="unsupervised"):
    X, y = _table(task, n=2000)
    exact = _mech(cls, task, extra, random_state=4, epsilon=math.inf).fit(X, y).model_
    noisy = _mech(cls, task, extra, random_state=4, epsilon=epsilon).fit(X, y).model_
    return exact, noisy


@pytest.mark.parametrize(("cls", "extra", "task"), [
    (RONGauss, {}, "unsupervised"), (RONGauss, {}, "classification"), (RONGauss, {}, "regression"),
    (PCAGauss, {}, "unsupervised"), (PCAGauss, {"pca_source": "analyze-gauss"}, "regression"),
    (MODIPS, {}, "unsupervised"), (MODIPS, {}, "classification"),
])
def test_dp_model_is_close_to_the_exact_one_at_large_epsilon_and_far_at_tiny(cls, extra, task):
    # epsilon = inf is the exact (NOT PRIVATE) model with the same public randomness (same seed: same W)
    exact, close = _exact_and_noisy(cls, extra, 1e5, task)
    _, far = _exact_and_noisy(cls, extra, 1e-3, task)
    size = np.linalg.norm(exact.covariances) + np.linalg.norm(exact.means)
    for model, ok in ((close, True), (far, False)):
        if model.n_components != exact.n_components:  # the DP histogram dropped a class
            assert not ok
            continue
        err = (np.linalg.norm(model.covariances - exact.covariances)
               + np.linalg.norm(model.means - exact.means))
        assert (err < 0.01 * size) if ok else (err > 0.5 * size), (cls.name, ok, err, size)
    np.testing.assert_allclose(close.weights, exact.weights, atol=1e-3)


def test_a_sample_past_the_memory_limit_is_refused(monkeypatch):
    from dpcore.limits import ResourceLimitError

    X, _ = _table("unsupervised")
    mech = _mech(RONGauss, "unsupervised", {"reconstruct": True}).fit(X)
    monkeypatch.setenv("DPCORE_MAX_MEMORY", "1M")
    with pytest.raises(ResourceLimitError, match="ron-gauss sample of 1,000,000 rows"):
        mech.sample(1_000_000)
    assert mech.sample(1000)[0].shape == (1000, D)


@pytest.mark.parametrize("cls", [RONGauss, PCAGauss, MODIPS])
def test_release_fits_only_the_classes_its_draw_uses_with_the_fit_rows_per_class(cls):
    # protected labels: release(n_samples=m) models the classes that draw rows among m (the papers'
    # per-class cost; the label-privacy audits rely on it), with the rows per class of the full fit
    X, y = _table("classification", n=1000)
    mech = _mech(cls, "classification", {}, random_state=8, epsilon=1.0)
    model = mech.fit(X, y).model_
    assert model.n_components == 4 and model.weights.sum() == pytest.approx(1.0)
    fitted_per_class = [r for r in mech.noise_ if "of class" in r.statistic]
    for m in (1, 2, 3, 7, 1000):
        rel, diag = mech.explore(X, y, n_samples=m)
        _, labels = mech.sample(m, random_state=0)
        np.testing.assert_array_equal(np.bincount(rel.labels, minlength=4), np.bincount(labels, minlength=4))
        per_class = [r for r in rel.noise if "of class" in r.statistic]
        used = np.unique(rel.labels).size
        assert len(per_class) == 2 * used and len(fitted_per_class) == 2 * 4
        assert rel.guarantee == mech.guarantee_
    fresh = _mech(cls, "classification", {})
    fresh.release(X, y)
    assert not hasattr(fresh, "model_")  # release stores nothing: only fit does
