"""The seeded runs whose outputs are pinned by ``golden.json`` (behaviour-preserving refactors).

Each case is ``(name, argv)``: a tsdp command line (or several joined by ``"&&"``, run one after the
other in the same directory), run in-process with ``--seed`` where the command
takes one, inside an empty directory where ``{data}`` names the directory of small inputs made by
:func:`make_inputs` and ``{configs}`` the project's ``configs/``. The matrix covers every release
mechanism x unit x sampler on a small long panel, the event and wide layouts, every example config,
``mean-estimate``'s algorithms, ``flip``, ``forecast-train`` and the ``account`` commands.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
CONFIGS = ROOT / "configs"

LONG = ["--series-col", "sensor", "--time-col", "time", "--value-col", "count"]
MECHANISM_OPTIONS = {
    "gaussian": ["--delta", "1e-6"],
    "laplace": [],
    "dft": ["--dft-k", "40", "--delta", "1e-6"],
    "fast": ["--fast-max-samples", "10"],
    "subsample": ["--sampling-rate", "0.2", "--delta", "1e-5"],
    "filter-subsample": ["--sampling-rate", "0.2", "--delta", "1e-5", "--filter", "gaussian", "--filter-sigma", "4"],
}
EVENTS = ["release", str(SAMPLE / "events.csv"), "--layout", "events", "--user-col", "user_id", "--time-col", "timestamp",
          "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5", "--start", "2024-03-04",
          "--end", "2024-03-18", "--freq", "1d", "--epsilon", "1", "--delta", "1e-6"]
UNIT_OPTIONS = {
    "event": ["--unit", "event"],
    "w-event": ["--unit", "w-event", "--w", "4", "--series-per-user", "2"],
    "user": ["--unit", "user", "--max-steps", "24", "--series-per-user", "2"],
}


def make_inputs(directory: Path) -> None:
    """Small, deterministic slices of the bundled sample data (the first 6 sensors x 240 hours)."""
    traffic = pl.read_parquet(SAMPLE / "traffic_hourly.parquet")
    sensors = sorted(traffic["sensor"].unique().to_list())[:6]
    hours = sorted(traffic["time"].unique().to_list())[:240]
    small = traffic.filter(pl.col("sensor").is_in(sensors) & pl.col("time").is_in(hours)).sort("sensor", "time")
    small.write_parquet(directory / "traffic.parquet")
    small.write_csv(directory / "traffic.csv")
    wide = small.pivot(on="sensor", index="time", values="count").sort("time")
    wide.write_csv(directory / "traffic_wide.csv")
    itms = pl.read_parquet(SAMPLE / "itms_speeds.parquet")
    itms.head(20_000).write_parquet(directory / "itms.parquet")


def release_matrix() -> list[tuple[str, list[str]]]:
    cases = []
    for mechanism, mech_opts in MECHANISM_OPTIONS.items():
        for unit, unit_opts in UNIT_OPTIONS.items():
            for sampler in ("hardened", "float"):
                argv = ["release", "{data}/traffic.parquet", *LONG, "--mechanism", mechanism, "--epsilon", "1",
                        *mech_opts, *unit_opts, "--sampler", sampler, "-o", "out.csv"]
                cases.append((f"release-{mechanism}-{unit}-{sampler}", argv))
    cases += [
        ("release-substitute", ["release", "{data}/traffic.parquet", *LONG, "--mechanism", "gaussian", "--epsilon", "2",
                                "--delta", "1e-6", "--unit", "user", "--max-steps", "24", "--neighbouring", "substitute",
                                "--clip-min", "0", "--round", "-o", "out.parquet"]),
        ("release-classic-sum", ["release", "{data}/traffic.csv", *LONG, "--mechanism", "gaussian", "--epsilon", "0.5",
                                 "--delta", "1e-6", "--unit", "event", "--calibration", "classic", "--accuracy-for", "sum",
                                 "--alpha", "0.1", "-o", "out.csv"]),
        ("release-dft-laplace", ["release", "{data}/traffic.parquet", *LONG, "--mechanism", "dft", "--noise", "laplace",
                                 "--dft-k", "30", "--epsilon", "1", "--unit", "event", "-o", "out.csv"]),
        ("release-subsample-paper", ["release", "{data}/traffic.parquet", *LONG, "--mechanism", "subsample",
                                     "--sampling-rate", "0.2", "--accounting", "paper", "--epsilon", "1", "--delta", "1e-4",
                                     "--unit", "user", "--max-steps", "24", "-o", "out.csv"]),
        ("release-wide-laplace", ["release", "{data}/traffic_wide.csv", "--mechanism", "laplace", "--epsilon", "0.5",
                                  "--unit", "event", "-o", "out.csv"]),
        ("release-events", [*EVENTS, "--unit", "user", "--max-per-step", "2", "--max-steps", "14",
                            "--series-per-user", "1", "-o", "out.csv"]),
        ("release-events-w-event", [*EVENTS, "--unit", "w-event", "--w", "3", "--max-per-step", "3",
                                    "--series-per-user", "2", "--mechanism", "dft", "--dft-k", "5", "-o", "out.csv"]),
        ("release-events-sharded", [*EVENTS, "--unit", "user", "--max-per-step", "2", "--max-steps", "14",
                                    "--series-per-user", "1", "--memory-limit", "64MiB", "--work-dir", ".", "-o", "out.csv"]),
        ("release-events-spark", [*EVENTS, "--unit", "user", "--max-per-step", "2", "--max-steps", "14",
                                  "--series-per-user", "1", "--engine", "spark", "--spark-master", "local[1]",
                                  "-o", "out.csv"]),
        ("release-then-verify", ["release", "{data}/traffic.parquet", *LONG, "--mechanism", "gaussian", "--epsilon", "1",
                                 "--delta", "1e-6", "--unit", "user", "--max-steps", "24", "-o", "out.csv",
                                 "&&", "account", "verify", "out.report.json", "--max-epsilon", "2"]),
        ("release-then-compose", ["release", "{data}/traffic.parquet", *LONG, "--mechanism", "gaussian", "--epsilon", "1",
                                  "--delta", "1e-6", "--unit", "user", "--max-steps", "24", "-o", "a.csv",
                                  "&&", "release", "{data}/traffic.parquet", *LONG, "--mechanism", "subsample",
                                  "--sampling-rate", "0.2", "--epsilon", "1", "--delta", "1e-6", "--unit", "user",
                                  "--max-steps", "24", "-o", "b.csv",
                                  "&&", "account", "compose", "a.report.json", "b.report.json"]),
        ("release-dry-run", ["release", "{data}/traffic.parquet", *LONG, "--mechanism", "gaussian", "--epsilon", "1",
                             "--delta", "1e-6", "--unit", "user", "--max-steps", "24", "--dry-run"]),
    ]
    return cases


def other_cases() -> list[tuple[str, list[str]]]:
    mean = ["mean-estimate", "{data}/itms.parquet", "--user-col", "bus_id", "--value-col", "speed", "--upper", "65",
            "--epsilon", "1", "--time-col", "timestamp"]
    public = ["--participation", "public"]
    cases = [(f"mean-{algorithm}", [*mean, "--algorithm", algorithm, *public, "-o", "out.csv"])
             for algorithm in ("baseline", "array-averaging", "levy", "quantile")]
    # --participation private (the default): the groups declared, K arrays and m_UB public
    declared = ["--cell-col", "cell_id", "--group-by", "cell", "--epsilon-per-group-ok", "--arrays", "10",
                "--m-ub", "12", "--group-keys", ",".join(f"c{i:02d}_{j:02d}" for i in range(5) for j in range(5))]
    cases += [(f"mean-private-{algorithm}", [*mean, "--algorithm", algorithm, *declared, "-o", "out.csv"])
              for algorithm in ("array-averaging", "levy", "quantile")]
    cases += [
        ("mean-cells", [*mean, "--cell-col", "cell_id", "--group-by", "cell", "--epsilon-per-group-ok", *public,
                        "-o", "out.csv"]),
        ("flip-qwi", ["flip", str(SAMPLE / "qwi_quarterly.csv"), "--time-col", "quarter", "--value-cols", "ca_asian",
                      "--aux-cols", "ca_white", "--trend-order", "1", "--filter-half-length", "10", "--lip-delta", "0.1",
                      "-o", "out.csv"]),
        ("forecast-linear", ["forecast-train", "{data}/traffic.parquet", *LONG, "--context-length", "24",
                             "--forecast-length", "6", "--model", "linear", "--batch-size", "4", "--noise-multiplier",
                             "1.5", "--epsilon", "8", "--delta", "1e-5", "--steps", "20", "-o", "out.parquet"]),
        ("account-dpsgd", ["account", "dpsgd", "--series", "100", "--length", "1000", "--context-length", "48",
                           "--forecast-length", "12", "--batch-size", "16", "--noise-multiplier", "1.5", "--steps", "200",
                           "--delta", "1e-6"]),
        ("account-calibrate", ["account", "calibrate", "dpsgd", "--series", "100", "--length", "1000",
                               "--context-length", "48", "--forecast-length", "12", "--batch-size", "16",
                               "--steps", "200", "--epsilon", "2", "--delta", "1e-6"]),
    ]
    for config in sorted(CONFIGS.glob("*.toml")):
        cases.append((f"config-{config.stem}", ["--config-case", str(config)]))
    return cases


def all_cases() -> list[tuple[str, list[str]]]:
    return release_matrix() + other_cases()
