"""Data loading: CSV / svmlight readers, bad-data errors, the cpusmall lookup, preprocessing,
and the synthetic data set with a prescribed Hessian spectrum."""

from __future__ import annotations

from pathlib import Path

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


def test_missing_file_names_it(tmp_path):
    with pytest.raises(ValueError, match=r"data file .*nope\.csv not found"):
        load_regression(tmp_path / "nope.csv")


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


def test_cpusmall_lookup_order_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("STABILITY_DATA", str(tmp_path / "data"))
    cands = D.cpusmall_candidates()
    assert cands[0] == tmp_path / "data" / "cpusmall_scale.csv"
    assert cands[-1] == tmp_path / "cache" / "stability" / "cpusmall_scale"
    assert any(p.parts[-3:] == ("shared", "data", "cpusmall_scale.csv") for p in cands[1:-1])
    # nothing anywhere (repository copy hidden): no download allowed → one-line error
    monkeypatch.setattr(D, "CPUSMALL_CSV", Path("does-not-exist.csv"))
    with pytest.raises(ValueError, match="cpusmall not found"):
        D.cpusmall_path(download=False)
    # a cached svmlight copy is found and read
    cached = cands[-1]
    cached.parent.mkdir(parents=True)
    cached.write_text("3 1:0.5 2:-1\n4 1:1 2:0\n")
    data = load_regression("cpusmall", standardize="none", download=False)
    assert data.source == str(cached) and data.X.tolist() == [[0.5, -1], [1, 0]]
    # the explicit environment location wins
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "cpusmall_scale.csv").write_text("1,2\n3,4\n")
    assert load_regression(None, standardize="none").y.tolist() == [1, 3]


def test_download_failure_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="could not download cpusmall"):
        D.fetch_cpusmall(tmp_path / "x", url="file:///nonexistent/cpusmall")
    assert not (tmp_path / "x").exists()


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
