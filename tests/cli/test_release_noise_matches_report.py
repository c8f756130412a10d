"""End to end: the noise in the released file has the distribution the report states."""

import json
import math
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tsdp.cli.app import main

N_SERIES, N_STEPS = 50, 4000  # 200,000 cells
TAIL = 1e-6  # probability that a correct implementation fails one check


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    path = tmp_path_factory.mktemp("noise") / "panel.parquet"
    times = [datetime(2024, 1, 1) + timedelta(hours=h) for h in range(N_STEPS)]
    rng = np.random.default_rng(0)
    pl.DataFrame({
        "sensor": np.repeat([f"s{i:02d}" for i in range(N_SERIES)], N_STEPS),
        "time": times * N_SERIES,
        "count": rng.poisson(100, N_SERIES * N_STEPS),
    }).write_parquet(path)
    return path


def release(panel, tmp_path, *args):
    out = tmp_path / "out.parquet"
    code = main(["release", str(panel), "--series-col", "sensor", "--value-col", "count",
                 "-o", str(out), "--seed", "123", "--quiet", *args])
    assert code == 0
    report = json.loads((tmp_path / "out.report.json").read_text())
    joined = pl.read_parquet(panel).join(pl.read_parquet(out), on=["sensor", "time"], suffix="_out")
    assert joined.height == N_SERIES * N_STEPS
    return (joined["count_out"] - joined["count"]).to_numpy(), report


@pytest.mark.parametrize("sampler", ["hardened", "float"])
def test_gaussian_noise_matches_reported_sigma(panel, tmp_path, sampler):
    noise, report = release(panel, tmp_path, "--epsilon", "0.8", "--delta", "1e-6", "--unit", "user",
                            "--max-steps", "12", "--series-per-user", "3", "--sampler", sampler)
    assert report["claim"]["parameters"]["sampler"] == sampler
    sigma = report["claim"]["parameters"]["sigma"]
    assert report["claim"]["events"][0]["noise"] == sigma
    n = noise.size
    z = stats.norm.isf(TAIL / 2)
    assert abs(noise.mean()) <= z * sigma / math.sqrt(n)
    lo, hi = stats.chi2.ppf([TAIL / 2, 1 - TAIL / 2], n - 1) / (n - 1)
    assert lo * sigma**2 <= noise.var(ddof=1) <= hi * sigma**2
    assert stats.kstest(noise, "norm", args=(0, sigma)).pvalue > TAIL


@pytest.mark.parametrize("sampler", ["hardened", "float"])
def test_laplace_noise_matches_reported_scale(panel, tmp_path, sampler):
    noise, report = release(panel, tmp_path, "--mechanism", "laplace", "--epsilon", "0.5", "--unit", "user",
                            "--max-steps", "2", "--max-per-step", "3", "--series-per-user", "1",
                            "--sampler", sampler)
    scale = report["claim"]["parameters"]["scale"]
    if sampler == "float":
        assert scale == 3 * 2 / 0.5  # L1 / epsilon exactly
    else:  # L1 of the cells rounded to multiples of g, / epsilon exactly
        g = report["claim"]["parameters"]["granularity"]
        assert scale == 2 * (math.floor(3 / g) + 1) * g / 0.5
        assert np.array_equal(np.round(noise / g) * g, noise)  # integer counts stay on the lattice
    n = noise.size
    z = stats.norm.isf(TAIL / 2)
    assert abs(np.abs(noise).mean() - scale) <= z * scale / math.sqrt(n)
    assert abs(noise.var() - 2 * scale**2) <= z * math.sqrt(20 * scale**4 / n)
    assert stats.kstest(noise, "laplace", args=(0, scale)).pvalue > TAIL
