"""Data loading: CSV / svmlight / npz readers, bad-data errors, the shipped cpusmall copy
(bit for bit the CSV of ../shared), the lookup order --data > $STABILITY_DATA > shipped,
preprocessing, and the synthetic data set with a prescribed Hessian spectrum."""

from __future__ import annotations

import numpy as np
import pytest

from stability.trainer import data as D
from stability.trainer.data import (
    load_regression,
    read_csv,
    read_svmlight,
    synthetic_regression,
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cpusmall_csv_is_read_as_stored(cpusmall_csv):
    X, y = read_csv(cpusmall_csv)
    assert X.shape == (8192, 12) and y.shape == (8192,)
    assert y[0] == 90.0 and X[0, 0] == -0.993496 and X[0, 11] == 0.651101
    data = load_regression(cpusmall_csv, standardize="none")
    np.testing.assert_array_equal(data.X, X)


def test_svmlight_equals_csv(tmp_path):
    csv = write(tmp_path, "a.csv", "1.5,0,2,0\n-2,3,0,0.25\n0,0,0,1\n")
    svm = write(tmp_path, "a.svm", "1.5 2:2\n-2 1:3 3:0.25  # comment\n0 qid:4 3:1\n")
    Xc, yc = read_csv(csv)
    Xs, ys = read_svmlight(svm)
    np.testing.assert_array_equal(Xc, Xs)
    np.testing.assert_array_equal(yc, ys)
    assert D.detect_format(svm) == "svmlight" and D.detect_format(csv) == "csv"
    np.testing.assert_array_equal(load_regression(svm, standardize="none").X, Xc)


def test_csv_header_row_is_skipped(tmp_path):
    path = write(tmp_path, "h.csv", "target,a,b\n1,2,3\n4,5,6\n")
    X, y = read_csv(path)
    assert X.tolist() == [[2, 3], [5, 6]] and y.tolist() == [1, 4]


@pytest.mark.parametrize(
    "name, text, reader, match",
    [
        ("cell.csv", "1,2,3\n4,x5,6\n", read_csv, r"row 2: non-numeric cell in column 1 'x5'"),
        ("nan.csv", "1,2,3\n4,5,6\n7,nan,9\n", read_csv, r"row 3: cell in column 1 is nan"),
        ("inf.csv", "1,2,3\n4,inf,6\n", read_csv, r"row 2: cell in column 1 is inf"),
        ("cols.csv", "1,2,3\n4,5\n", read_csv, r"row 2: 2 columns, expected 3"),
        ("empty_cell.csv", "1,2,3\n4,,6\n", read_csv, r"row 2: non-numeric cell in column 1"),
        ("empty.csv", "", read_csv, r"empty file"),
        ("blank.csv", "\n  \n", read_csv, r"empty file"),
        ("onlyheader.csv", "a,b\n", read_csv, r"empty file"),
        ("one.csv", "1\n2\n", read_csv, r"row 1: 1 column"),
        ("tok.svm", "1 1:2\n2 3\n", read_svmlight, r"row 2: token '3' is not index:value"),
        ("idx.svm", "1 2:2 1:3\n", read_svmlight, r"row 1: index '1' must be an integer > 2"),
        ("val.svm", "1 1:2\n2 1:abc\n", read_svmlight, r"row 2: non-numeric value of feature 1"),
        ("nan.svm", "1 1:2\nnan 1:1\n", read_svmlight, r"row 2: target is nan"),
        ("empty.svm", "# nothing\n", read_svmlight, r"empty file"),
    ],
)
def test_bad_data_is_one_line_naming_file_and_row(tmp_path, name, text, reader, match):
    path = write(tmp_path, name, text)
    with pytest.raises(ValueError, match=match) as err:
        reader(path)
    message = str(err.value)
    assert str(path) in message and "\n" not in message


def test_missing_file_names_it_and_the_other_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("STABILITY_DATA", raising=False)
    with pytest.raises(ValueError) as err:
        load_regression(tmp_path / "nope.csv")
    message = str(err.value)
    assert message.startswith(f"data file {tmp_path / 'nope.csv'} does not exist")
    assert "\n" not in message
    assert "$STABILITY_DATA (not set)" in message and str(D.SHIPPED) in message


def test_standardize_options(tmp_path):
    rng = np.random.default_rng(1)
    raw = np.c_[rng.normal(5, 3, 50), rng.normal(2, 7, (50, 2)), np.full(50, 4.0)]
    path = tmp_path / "s.csv"
    np.savetxt(path, raw, delimiter=",")
    none = load_regression(path, standardize="none")
    np.testing.assert_allclose(none.X, raw[:, 1:], rtol=1e-15)
    feats = load_regression(path, standardize="features")
    assert feats.dropped_columns == (2,) and feats.features == 2  # the constant column
    np.testing.assert_allclose(feats.X.mean(0), 0, atol=1e-14)
    np.testing.assert_allclose(feats.X.std(0), 1, rtol=1e-14)
    np.testing.assert_allclose(feats.y, raw[:, 0] - raw[:, 0].mean(), rtol=1e-14)
    both = load_regression(path, standardize="all", bias=True)
    assert both.features == 3 and np.all(both.X[:, -1] == 1)
    assert both.y.std() == pytest.approx(1, rel=1e-14)
    with pytest.raises(ValueError, match="standardize must be one of"):
        load_regression(path, standardize="zscore")


def test_shipped_copy_is_the_csv_bit_for_bit(cpusmall_csv):
    """The package's compressed copy holds exactly the float64 values of the CSV."""
    X, y = read_csv(cpusmall_csv)
    Xs, ys = D.read_npz(D.SHIPPED)
    assert Xs.dtype == ys.dtype == np.float64 and Xs.shape == X.shape and ys.shape == y.shape
    assert Xs.tobytes() == X.tobytes() and ys.tobytes() == y.tobytes()
    assert 100_000 < D.SHIPPED.stat().st_size < 500_000  # compressed: a few hundred KB


def test_lookup_order_data_then_environment_then_shipped(tmp_path, monkeypatch):
    monkeypatch.delenv("STABILITY_DATA", raising=False)
    shipped = load_regression(standardize="none")
    assert shipped.source == str(D.SHIPPED) and shipped.X.shape == (8192, 12)
    assert load_regression("cpusmall", standardize="none").source == str(D.SHIPPED)
    # $STABILITY_DATA: a folder holding cpusmall_scale.csv (or the svmlight file), or a file
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("STABILITY_DATA", str(folder))
    (folder / "cpusmall_scale").write_text("3 1:0.5 2:-1\n4 1:1 2:0\n")
    data = load_regression(standardize="none")
    assert data.source == str(folder / "cpusmall_scale") and data.X.tolist() == [[0.5, -1], [1, 0]]
    (folder / "cpusmall_scale.csv").write_text("1,2\n3,4\n")
    assert load_regression(standardize="none").y.tolist() == [1, 3]
    monkeypatch.setenv("STABILITY_DATA", str(folder / "cpusmall_scale"))
    assert load_regression(standardize="none").y.tolist() == [3, 4]
    # a path (--data) wins over $STABILITY_DATA; "cpusmall" names the shipped copy
    other = write(tmp_path, "other.csv", "7,8\n9,10\n")
    assert load_regression(other, standardize="none").y.tolist() == [7, 9]
    assert load_regression("cpusmall", standardize="none").source == str(D.SHIPPED)


def test_unusable_environment_is_an_error_naming_the_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("STABILITY_DATA", str(tmp_path))
    with pytest.raises(ValueError) as err:
        load_regression()
    message = str(err.value)
    assert "\n" not in message and f"$STABILITY_DATA={tmp_path}" in message
    for name in ("cpusmall_scale.csv", "cpusmall_scale"):
        assert str(tmp_path / name) in message
    assert str(D.SHIPPED) in message


def test_missing_shipped_copy_is_an_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.delenv("STABILITY_DATA", raising=False)
    monkeypatch.setattr(D, "SHIPPED", tmp_path / "cpusmall.npz")
    with pytest.raises(ValueError, match=r"data not found: the shipped copy .*cpusmall\.npz is "
                       r"missing and \$STABILITY_DATA is not set"):  # fmt: skip
        load_regression()


def test_bad_npz_is_a_one_line_error(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, target=np.zeros(3), features=np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"bad\.npz: 'features' must be \(p, n\)"):
        load_regression(path)
    np.savez(path, y=np.zeros(3))
    with pytest.raises(ValueError, match=r"bad\.npz: not an \.npz data archive"):
        load_regression(path)


def test_synthetic_regression_has_the_prescribed_spectrum():
    lam = [4.0, 1.0, 0.25, 0.01]
    data = synthetic_regression(lam, seed=3, residual=0.5)
    H = data.X.T @ data.X / data.samples
    np.testing.assert_allclose(np.linalg.eigvalsh(H), sorted(lam), rtol=1e-12)
    w_star = np.linalg.lstsq(data.X, data.y, rcond=None)[0]
    r = data.X @ w_star - data.y
    assert r @ r / (2 * data.samples) == pytest.approx(0.125, rel=1e-12)
    again = synthetic_regression(lam, seed=3, residual=0.5)
    np.testing.assert_array_equal(again.X, data.X)
    with pytest.raises(ValueError, match="eigenvalues must be"):
        synthetic_regression([1.0, -1.0])
