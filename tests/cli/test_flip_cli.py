"""``tsdp flip`` end to end: the LIP report (schema, no epsilon, not-DP wording, per-series figures),
secrets kept out of the report and output (and written only with ``--secrets``, mode 0600), seeded
and unseeded randomness, entity panels (row order, other entities, aux columns and the aux entity),
scale/shift invariance, ``--suffix``, ``--min-lip``, ``--coef-method cepstral-paper``, every refusal of
spec ``flip.md`` section 4.3 (exit code, one ``error:`` line naming the option/column/entity and the
value, nothing written, input untouched: the ``refuse`` fixture), ``tsdp account`` on a FLIP report
and a TOML config.

The series are small simulated AR(1) panels (3 entities x 120 steps) written to ``tmp_path``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import stat
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

from tsdp.report import schema

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "qwi_quarterly.csv"
T = 120
ENTITIES = ("A", "B", "C")
PANEL = ["--time-col", "t", "--entity-col", "id", "--value-cols", "v"]
SECRET_KEYS = {"r_params", "taps", "shift", "shift_bound", "lipschitz", "alpha", "master_seed"}
BIG_SEED = "918273645546372819"  # distinctive digits: cannot appear in the report by chance


# ------------------------------------------------------------------------------------ data


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    x = np.empty(n)
    x[0] = rng.normal() / np.sqrt(1 - phi ** 2)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + rng.normal()
    return x


def make_panel(entities=ENTITIES, n: int = T, seed: int = 0, dates: bool = False) -> pl.DataFrame:
    """Long panel: id, t (integers 0..n-1, or monthly ISO dates), v (sensitive), z (auxiliary, correlated)."""
    rng = np.random.default_rng(seed)
    phis = {"A": 0.6, "B": -0.3, "C": 0.8, "D": 0.4}
    frames = []
    for entity in entities:
        v = 100 + 5 * ar1(rng, n, phis.get(entity, 0.5))
        z = 0.5 * v + 3 * ar1(rng, n, 0.3)
        times = ([dt.date(2000 + k // 12, k % 12 + 1, 1) for k in range(n)] if dates else list(range(n)))
        frames.append(pl.DataFrame({"id": [entity] * n, "t": times, "v": v, "z": z}))
    return pl.concat(frames)


def write(frame: pl.DataFrame, name: str) -> Path:
    path = Path(name).resolve()
    frame.write_csv(path)
    return path


@pytest.fixture
def panel() -> Path:
    return write(make_panel(), "panel.csv")


def run_ok(tsdp_cli, *args):
    result = tsdp_cli("flip", *args)
    assert result.code == 0, result.err
    return result


def load_report(path) -> dict:
    return json.loads(Path(path).read_text())


CUSTODIAN = "out.custodian.NOT-FOR-PUBLICATION.json"


def custodian_rows(path=CUSTODIAN) -> list[dict]:
    """The per-series figures: functions of the data, so in the custodian file, never in the report."""
    data = json.loads(Path(path).read_text())
    assert data["publish"] is False and "NOT FOR PUBLICATION" in data["note"]
    return data["figures"]["lip_series"]


def all_keys(node) -> set[str]:
    """Every key of every object in a JSON document, at any depth."""
    if isinstance(node, dict):
        return set(node) | set().union(*(all_keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(all_keys(v) for v in node)) if node else set()
    return set()


def released(path, key=("id", "t"), column="v") -> dict:
    table = pl.read_csv(path)
    return dict(zip(zip(*(table[k].to_list() for k in key)), table[column].to_list()))


# ----------------------------------------------------------------------------- the report


@pytest.mark.parametrize("lip_delta", [0.0, 0.1])
def test_report_is_a_lip_claim_without_epsilon(tsdp_cli, panel, tmp_path, lip_delta):
    result = run_ok(tsdp_cli, panel, *PANEL, "--aux-cols", "z", "--lip-delta", lip_delta, "-o", "out.csv",
                    "--json")
    text = (tmp_path / "out.report.json").read_text()
    report = json.loads(text)
    jsonschema.Draft202012Validator(schema()).validate(report)
    assert report["claim"]["definition"] == "lip"
    assert "epsilon" not in text.lower()
    assert "epsilon" not in result.out.lower()
    summary = json.loads(result.out)
    assert summary["definition"] == "lip" and summary["differential_privacy"] is False
    assert summary["series"] == len(ENTITIES)

    assert "not differential privacy" in report["lip"]["statement"].lower()
    assert any("not differential privacy" in note.lower() for note in report["notes"])
    assert report["claim"]["parameters"]["lip_budget_delta"] == lip_delta

    rows = custodian_rows()
    assert sorted(r["entity"] for r in rows) == list(ENTITIES)
    for row in rows:
        assert row["column"] == "v" and row["aux"] == ["z"]
        for key in ("lip_applied", "lip_ideal", "lip_guess_inversion", "lip_known_filter_inversion",
                    "lip_lagged_min"):
            assert isinstance(row[key], float) and -1e-9 <= row[key] <= 1 + 1e-9, (key, row[key])
        assert row["lip_lower_bound"] == pytest.approx(1 - lip_delta, abs=1e-15)
        # Thm 6 / Thm 10: the ideal filter meets the budget (to rounding, spec check 7: 1e-9)
        assert row["lip_ideal"] >= 1 - lip_delta - 1e-9
        assert row["utility"]["D_path"] >= 0 and np.isfinite(row["utility"]["D_path"])
        assert 0 <= row["utility"]["D_ACF"] < 0.1


def test_report_holds_no_figure_of_the_data(tsdp_cli, panel, tmp_path):
    """Audit item 5: per-series LIP, D_path, D_ACF, trend moments and model warnings are functions of the
    data; they go to the custodian file (mode 0600), never into the report that ships with the release."""
    run_ok(tsdp_cli, panel, *PANEL, "--aux-cols", "z", "-o", "out.csv", "--quiet")
    report = load_report("out.report.json")
    keys = all_keys(report)
    for figure in ("lip_applied", "lip_ideal", "lip_lagged_min", "lip_guess_inversion", "D_path", "D_ACF",
                   "var_ratio", "S_sup", "utility"):
        assert figure not in keys
    assert set(report["lip"]) == {"statement", "guarantee", "disclaimer"}
    assert stat.S_IMODE((tmp_path / CUSTODIAN).stat().st_mode) == 0o600
    rows = custodian_rows()
    assert {"lip_applied", "utility"} <= set(rows[0])
    assert report["command"]["parameters"]["custodian_file"] == CUSTODIAN


@pytest.mark.parametrize("mode", ["--json", "table"])
def test_stdout_holds_no_figure_of_the_data(tsdp_cli, panel, tmp_path, mode):
    """The summary printed on stdout (which CI logs keep) names the custodian file but holds none of its
    figures: it printed the smallest achieved LIP, the mean D_path and D_ACF and the median
    guess-inversion LIP (found by the forecast-train red-team audit)."""
    run = run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", *(["--json"] if mode == "--json" else []))
    for word in ("lip_applied", "d_path_mean", "d_acf_mean", "guess_inversion"):  # (the table shows keys with spaces)
        assert word not in run.out and word.replace("_", " ") not in run.out
    if mode == "--json":
        data = json.loads(run.out)
        assert data["custodian"] == CUSTODIAN
        rows = custodian_rows()
        figures = {r["lip_applied"] for r in rows} | {r["utility"]["D_path"] for r in rows}
        numbers = {v for v in data.values() if isinstance(v, float)}
        assert not numbers & figures


def test_report_and_output_hold_no_secrets(tsdp_cli, panel, tmp_path):
    run_ok(tsdp_cli, panel, *PANEL, "--aux-cols", "z", "--lip-delta", "0.1", "-o", "out.csv", "--seed", BIG_SEED,
           "--secrets", "keys.json", "--quiet")
    report_text = (tmp_path / "out.report.json").read_text()
    output_text = (tmp_path / "out.csv").read_text()
    report = json.loads(report_text)
    assert not all_keys(report) & SECRET_KEYS, all_keys(report) & SECRET_KEYS
    assert "seed" not in report["command"]["parameters"]
    assert BIG_SEED not in report_text and BIG_SEED not in output_text
    secrets = json.loads((tmp_path / "keys.json").read_text())
    assert secrets["master_seed"] == BIG_SEED
    leaked = []
    for series in secrets["series"]:
        numbers = list(series["taps"]) + [x for k in ("alpha", "a", "b") for x in series["r_params"][k]]
        numbers += [series[k] for k in ("shift", "shift_bound", "lipschitz", "alpha") if series.get(k)]
        leaked += [x for x in numbers if abs(x) > 1e-6 and (repr(x) in report_text or repr(x) in output_text)]
    assert not leaked


def test_without_secrets_only_output_and_report_appear(tsdp_cli, panel, tmp_path, dir_snapshot):
    before = set(dir_snapshot(tmp_path))
    run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", "--seed", "5", "--quiet")
    assert set(dir_snapshot(tmp_path)) - before == {"out.csv", "out.report.json", CUSTODIAN}
    assert load_report("out.report.json")["command"]["parameters"]["secrets_written"] is False


def test_secrets_file(tsdp_cli, panel, tmp_path):
    run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", "--seed", "5", "--secrets", "keys.json", "--quiet")
    path = tmp_path / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secrets = json.loads(path.read_text())
    assert secrets["master_seed"] == "5"
    rows = custodian_rows()
    assert [(s["entity"], s["column"]) for s in secrets["series"]] == [(r["entity"], r["column"]) for r in rows]
    for series, row in zip(secrets["series"], rows):
        taps = np.asarray(series["taps"], dtype=float)
        assert taps.shape == (2 * row["M"] + 1,) and np.isfinite(taps).all()
        assert taps.sum() == pytest.approx(row["psi_sum"], rel=1e-12)


def test_same_seed_same_release_other_seed_differs(tsdp_cli, panel, tmp_path):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        run_ok(tsdp_cli, panel, *PANEL, "-o", f"{name}.csv", "--seed", seed, "--quiet")
    a, b, c = (pl.read_csv(tmp_path / f"{n}.csv") for n in "abc")
    assert a.equals(b)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert not np.allclose(a["v"].to_numpy(), c["v"].to_numpy())
    source = pl.read_csv(panel)
    assert not np.allclose(a["v"].to_numpy(), source["v"].to_numpy())


@pytest.mark.parametrize("secrets", ["out.csv", "out.report.json", "-", "./out.csv"])
def test_secrets_path_clashes_are_usage_errors(refuse, panel, secrets):
    refuse(["flip", panel, *PANEL, "-o", "out.csv", "--report", "out.report.json", "--secrets", secrets], 2,
           "--secrets")


def test_existing_secrets_file_needs_force(tsdp_cli, refuse, panel, tmp_path):
    (tmp_path / "keys.json").write_text("{}")
    refuse(["flip", panel, *PANEL, "-o", "out.csv", "--secrets", "keys.json", "--seed", "5"], 2,
           "--secrets", "keys.json", "--force")
    run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", "--secrets", "keys.json", "--seed", "5", "--force", "--quiet")
    assert json.loads((tmp_path / "keys.json").read_text())["master_seed"] == "5"


# ------------------------------------------------------------------------------ randomness


def test_seeded_run_warns(tsdp_cli, panel):
    result = run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", "--seed", "5")
    report = load_report("out.report.json")
    assert report["randomness"] == "seeded"
    assert any("seed" in w for w in report["warnings"])
    assert any(line.startswith("warning:") and "seed" in line for line in result.err.splitlines())


def test_unseeded_run_uses_os_entropy(tsdp_cli, panel):
    result = run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv")
    report = load_report("out.report.json")
    assert report["randomness"] == "os-entropy"
    assert not any("--seed" in w for w in report["warnings"])
    assert "--seed" not in result.err


# ---------------------------------------------------------------------------------- panels


def test_output_keeps_rows_and_only_the_released_columns(tsdp_cli, tmp_path):
    """Rows stay in input order; only the entity, time and released value columns leave: the
    unnamed column z (neither value nor aux) is not published."""
    source = make_panel().sample(fraction=1.0, shuffle=True, seed=7)  # rows in no particular order
    write(source, "panel.csv")
    run_ok(tsdp_cli, "panel.csv", *PANEL, "-o", "out.csv", "--seed", "5", "--quiet")
    out = pl.read_csv(tmp_path / "out.csv")
    source = pl.read_csv(tmp_path / "panel.csv")
    assert out.columns == ["id", "t", "v"] and out.height == source.height
    assert out.drop("v").equals(source.select("id", "t"))
    assert load_report("out.report.json")["output"]["columns"] == ["id", "t", "v"]
    assert (out["v"] != source["v"]).all()
    # the released series keeps the level of each entity (mean preserved by FLIP)
    for entity in ENTITIES:
        mine = out.filter(pl.col("id") == entity)["v"].mean()
        assert mine == pytest.approx(source.filter(pl.col("id") == entity)["v"].mean(), abs=1.5)


def test_row_order_does_not_matter(tsdp_cli, panel, tmp_path):
    shuffled = pl.read_csv(panel).sample(fraction=1.0, shuffle=True, seed=123)
    write(shuffled, "shuffled.csv")
    run_ok(tsdp_cli, panel, *PANEL, "-o", "sorted_out.csv", "--seed", "5", "--quiet")
    run_ok(tsdp_cli, "shuffled.csv", *PANEL, "-o", "shuffled_out.csv", "--seed", "5", "--quiet")
    assert released(tmp_path / "sorted_out.csv") == released(tmp_path / "shuffled_out.csv")
    out = pl.read_csv(tmp_path / "shuffled_out.csv")
    assert out.drop("v").equals(shuffled.select("id", "t"))  # the shuffled order is kept


def test_other_entities_do_not_matter(tsdp_cli, panel, tmp_path):
    write(pl.read_csv(panel).filter(pl.col("id") != "C"), "no_c.csv")
    run_ok(tsdp_cli, panel, *PANEL, "-o", "all.csv", "--seed", "5", "--quiet")
    run_ok(tsdp_cli, "no_c.csv", *PANEL, "-o", "no_c_out.csv", "--seed", "5", "--quiet")
    everything = released(tmp_path / "all.csv")
    without_c = released(tmp_path / "no_c_out.csv")
    assert set(without_c) == {k for k in everything if k[0] != "C"}
    assert without_c == {k: v for k, v in everything.items() if k[0] != "C"}


def test_entities_get_different_filters(tsdp_cli, tmp_path):
    """B is an exact copy of A's data: only the filter (drawn per entity) can tell them apart."""
    source = make_panel(("A", "C"))
    copy = source.filter(pl.col("id") == "A").with_columns(pl.lit("B").alias("id"))
    write(pl.concat([source, copy]), "twins.csv")
    run_ok(tsdp_cli, "twins.csv", *PANEL, "-o", "out.csv", "--seed", "5", "--secrets", "keys.json", "--quiet")
    out = pl.read_csv(tmp_path / "out.csv")
    original = copy["v"].to_numpy()
    change_a = out.filter(pl.col("id") == "A")["v"].to_numpy() - original
    change_b = out.filter(pl.col("id") == "B")["v"].to_numpy() - original
    assert np.abs(change_a).max() > 0.1 and np.abs(change_b).max() > 0.1
    # the two releases of the same data differ well beyond rounding (filters of the family are similar,
    # so the releases stay correlated: spec section 7, guess-inversion)
    assert np.std(change_a - change_b) > 0.02 * np.std(original)
    taps = {s["entity"]: np.asarray(s["taps"]) for s in json.loads((tmp_path / "keys.json").read_text())["series"]}
    assert taps["A"].shape == taps["B"].shape and np.abs(taps["A"] - taps["B"]).max() > 1e-3


def test_aux_cols_are_not_published(tsdp_cli, panel, tmp_path):
    run_ok(tsdp_cli, panel, *PANEL, "--aux-cols", "z", "-o", "out.csv", "--seed", "5", "--quiet")
    out, source = pl.read_csv(tmp_path / "out.csv"), pl.read_csv(panel)
    assert out.columns == ["id", "t", "v"]
    assert out["id"].equals(source["id"]) and out["t"].equals(source["t"])
    assert not np.allclose(out["v"].to_numpy(), source["v"].to_numpy())
    report = load_report("out.report.json")
    assert all(row["aux"] == ["z"] and row["aux_entity"] is None for row in custodian_rows())


def test_aux_entity_is_not_published(tsdp_cli, tmp_path):
    source = make_panel(dates=True)
    write(source, "qwi_like.csv")
    run_ok(tsdp_cli, "qwi_like.csv", *PANEL, "--aux-entity", "A", "-o", "out.csv", "--seed", "5", "--quiet")
    out, source = pl.read_csv(tmp_path / "out.csv"), pl.read_csv(tmp_path / "qwi_like.csv")
    others = source.filter(pl.col("id") != "A")
    assert out.columns == ["id", "t", "v"] and out.drop("v").equals(others.select("id", "t"))
    assert (out["v"].to_numpy() != others["v"].to_numpy()).all()
    report = load_report("out.report.json")
    jsonschema.Draft202012Validator(schema()).validate(report)
    rows = custodian_rows()
    assert sorted(r["entity"] for r in rows) == ["B", "C"]
    assert all(r["aux_entity"] == "A" for r in rows)
    assert any("'A'" in note and "not part of the output" in note for note in report["notes"])


def test_aux_entity_refusals(refuse, panel):
    refuse(["flip", panel, *PANEL, "--aux-entity", "A", "--aux-cols", "z", "-o", "out.csv"], 2,
           "--aux-entity", "--aux-cols")
    refuse(["flip", panel, "--time-col", "t", "--value-cols", "v", "--aux-entity", "A", "-o", "out.csv"], 2,
           "--aux-entity", "--entity-col")
    refuse(["flip", panel, *PANEL, "--aux-entity", "Q", "-o", "out.csv"], 4, "--aux-entity", "'Q'")


# ----------------------------------------------------------------- invariance and options


@pytest.mark.parametrize("extra", [[], ["--aux-cols", "z", "--trend-order", "1"]], ids=["plain", "aux-trend1"])
def test_scale_and_shift_invariance(tsdp_cli, panel, tmp_path, extra):
    a, b = 3.5, -40.0
    source = pl.read_csv(panel)
    write(source.with_columns(pl.col("v") * a + b), "scaled.csv")
    run_ok(tsdp_cli, panel, *PANEL, *extra, "-o", "x.csv", "--seed", "5", "--quiet")
    run_ok(tsdp_cli, "scaled.csv", *PANEL, *extra, "-o", "ax_b.csv", "--seed", "5", "--quiet")
    x = pl.read_csv(tmp_path / "x.csv")["v"].to_numpy()
    y = pl.read_csv(tmp_path / "ax_b.csv")["v"].to_numpy()
    np.testing.assert_allclose(y, a * x + b, rtol=1e-8, atol=1e-8 * np.abs(b))


def test_suffix_keeps_the_original(tsdp_cli, panel, tmp_path):
    run_ok(tsdp_cli, panel, *PANEL, "-o", "plain.csv", "--seed", "5", "--quiet")
    run_ok(tsdp_cli, panel, *PANEL, "--suffix", "_flip", "-o", "qa.csv", "--seed", "5", "--quiet")
    source, qa = pl.read_csv(panel), pl.read_csv(tmp_path / "qa.csv")
    assert qa.columns == ["id", "t", "v", "v_flip"]
    assert qa.drop("v_flip").equals(source.select("id", "t", "v"))
    np.testing.assert_array_equal(qa["v_flip"].to_numpy(), pl.read_csv(tmp_path / "plain.csv")["v"].to_numpy())


@pytest.mark.parametrize("extra", [["--coef-method", "cepstral-paper"], ["--filter-half-length", "3"]], ids=["cepstral-paper", "M3"])
def test_min_lip_above_achieved_is_refused(refuse, panel, extra):
    """--lip-floor 0 releases every date; --min-lip then refuses instead of withholding (its message names
    the series, never a figure of the data)."""
    refuse(["flip", panel, *PANEL, *extra, "--lip-floor", "0", "--min-lip", "1.0", "-o", "out.csv", "--seed", "5"],
           3, "--min-lip 1", "same-date LIP below it", "entity 'A'")


def test_min_lip_met(tsdp_cli, panel):
    run_ok(tsdp_cli, panel, *PANEL, "--min-lip", "0.5", "-o", "out.csv", "--seed", "5", "--quiet")
    assert all(r["lip_applied"] >= 0.5 for r in custodian_rows())


def test_cepstral_paper_warns_about_all_pass(tsdp_cli, panel):
    result = run_ok(tsdp_cli, panel, *PANEL, "--coef-method", "cepstral-paper", "-o", "out.csv", "--seed", "5")
    assert "all-pass" in result.err
    report = load_report("out.report.json")
    assert any("all-pass" in w for row in custodian_rows() for w in row["warnings"])
    # the public warning names the option; each series' defect is a figure of the data (custodian file)
    assert any("cepstral-paper" in w and "custodian file" in w for w in report["warnings"])
    assert not any(str(round(row["allpass_max_defect"], 3)) in result.err for row in custodian_rows())


# ---------------------------------------------------------------- refusals (spec 4.3, issue)


def _with_cell(panel: Path, name: str, entity: str, time: int, column: str, token: str) -> Path:
    """A copy of the panel's CSV text with one cell replaced by ``token`` verbatim."""
    lines = panel.read_text().splitlines()
    header = lines[0].split(",")
    for i, line in enumerate(lines[1:], 1):
        cells = line.split(",")
        if cells[0] == entity and cells[1] == str(time):
            cells[header.index(column)] = token
            lines[i] = ",".join(cells)
            break
    else:
        raise AssertionError("cell not found")
    path = panel.with_name(name)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("token", ["NaN", "nan", "inf", "-inf", "", "NA"],
                         ids=["NaN", "nan", "inf", "-inf", "empty", "NA"])
@pytest.mark.parametrize("column, option", [("v", []), ("z", ["--aux-cols", "z"])], ids=["value", "aux"])
def test_non_finite_values_are_refused(refuse, panel, token, column, option):
    bad = _with_cell(panel, "bad.csv", "B", 73, column, token)
    refuse(["flip", bad, *PANEL, *option, "-o", "out.csv"], 4, f"'{column}'", "'B'", "73")


def test_short_series_names_the_entity(refuse, panel):
    write(pl.read_csv(panel).filter((pl.col("id") != "B") | (pl.col("t") < 15)), "short.csv")
    refuse(["flip", "short.csv", *PANEL, "-o", "out.csv"], 4, "'B'", "15", "20")


def test_gap_names_the_entity(refuse, panel):
    write(pl.read_csv(panel).filter(~((pl.col("id") == "C") & (pl.col("t") == 50))), "gap.csv")
    refuse(["flip", "gap.csv", *PANEL, "-o", "out.csv"], 4, "'t'", "'C'", "50")


def test_irregular_integer_steps_name_the_entity(refuse, panel):
    source = pl.read_csv(panel)
    write(source.with_columns(pl.when(pl.col("id") == "C").then(pl.col("t") * 2).otherwise(pl.col("t")).alias("t")),
          "irregular.csv")
    refuse(["flip", "irregular.csv", *PANEL, "-o", "out.csv"], 4, "'t'", "'C'")


def test_off_grid_date_names_the_entity(refuse):
    source = make_panel(dates=True)
    bad = source.with_columns(
        pl.when((pl.col("id") == "B") & (pl.col("t") == dt.date(2003, 5, 1))).then(pl.lit(dt.date(2003, 5, 15)))
        .otherwise(pl.col("t")).alias("t"))
    write(bad, "dates.csv")
    refuse(["flip", "dates.csv", *PANEL, "-o", "out.csv"], 4, "'t'", "'B'", "2003-05-15")


def test_duplicate_time_is_refused(refuse, panel):
    source = pl.read_csv(panel)
    write(pl.concat([source, source.filter((pl.col("id") == "B") & (pl.col("t") == 50))]), "dup.csv")
    refuse(["flip", "dup.csv", *PANEL, "-o", "out.csv"], 4, "'t'", "'B'", "50", "duplicate")


def test_constant_series_is_refused(refuse, panel):
    write(pl.read_csv(panel).with_columns(
        pl.when(pl.col("id") == "C").then(7.0).otherwise(pl.col("v")).alias("v")), "const.csv")
    refuse(["flip", "const.csv", *PANEL, "-o", "out.csv"], 4, "'C'", "'v'", "constant")


def test_aux_copy_of_the_value_is_refused(refuse, panel):
    """An aux column that is the value column under another name: the attacker already knows X."""
    write(pl.read_csv(panel).with_columns(pl.col("v").alias("v_copy")), "copy.csv")
    line = refuse(["flip", "copy.csv", *PANEL, "--aux-cols", "v_copy", "-o", "out.csv"], 4, "perfectly", "undefined")
    assert "'A'" in line or "'v'" in line, f"names neither the entity nor the column: {line!r}"


@pytest.mark.parametrize("args, code, needles", [
    (["--filter-half-length", "120"], 4, ["--filter-half-length 120", "T = 120"]),
    (["--filter-half-length", "500"], 4, ["--filter-half-length 500", "T = 120"]),
    (["--lip-delta", "1.0"], 2, ["--lip-delta 1"]),
    (["--lip-delta", "-0.1"], 2, ["--lip-delta -0.1"]),
    (["--delta", "0.1"], 2, ["--delta 0.1", "--lip-delta"]),
    (["--epsilon", "1"], 2, ["--epsilon 1", "no epsilon"]),
    (["--trend-order", "30"], 4, ["--trend-order 30", "120"]),
    (["--trend-order", "-1"], 2, ["--trend-order -1"]),
    (["--value-cols", "w"], 4, ["--value-cols", "'w'", "id, t, v, z"]),
    (["--aux-cols", "w"], 4, ["--aux-cols", "'w'", "id, t, v, z"]),
    (["--time-col", "when"], 4, ["--time-col", "'when'", "id, t, v, z"]),
    (["--aux-cols", "v"], 2, ["'v'"]),
    (["--r-params", "{alpha: oops"], 2, ["--r-params"]),
    (["--lip-delta", "0.1", "--r-params", '{"alpha": [0.5, 0.5], "a": [0.5, 2], "b": [2, 3]}'], 2,
     ["--r-params", "0.5"]),
    (["--lip-delta", "0.1", "--r-range", "0.5,2"], 2, ["--r-range 0.5,2"]),
    (["--var-order", "x"], 2, ["--var-order", "'x'"]),
    (["--grid", "10"], 2, ["--grid 10"]),
    (["--coef-method", "fancy"], 2, ["--coef-method", "'fancy'"]),
    (["--min-lip", "1.5"], 2, ["--min-lip 1.5"]),
], ids=lambda v: " ".join(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) else None)
def test_option_refusals(refuse, panel, args, code, needles):
    base = PANEL.copy()
    for flag in [a for a in args if a.startswith("--") and a in base]:  # the test's value replaces the default one
        i = base.index(flag)
        del base[i:i + 2]
    refuse(["flip", panel, *base, *args, "-o", "out.csv"], code, *needles)


def test_existing_output_needs_force(tsdp_cli, refuse, panel):
    run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", "--seed", "5", "--quiet")
    refuse(["flip", panel, *PANEL, "-o", "out.csv", "--seed", "5"], 2, "--output", "out.csv", "--force")
    run_ok(tsdp_cli, panel, *PANEL, "-o", "out.csv", "--seed", "6", "--force", "--quiet")


# ---------------------------------------------------------------- tsdp account on a FLIP report


@pytest.fixture
def flip_report(tsdp_cli, panel, tmp_path) -> Path:
    run_ok(tsdp_cli, panel, *PANEL, "--aux-cols", "z", "-o", "out.csv", "--quiet")  # unseeded: publishable
    return tmp_path / "out.report.json"


def test_account_verify_passes_on_flip_report(tsdp_cli, flip_report, tmp_path):
    result = tsdp_cli("account", "verify", flip_report, "--released", tmp_path / "out.csv", "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    checks = {c["name"]: c for c in out["reports"][0]["checks"]}
    assert out["passed"] and "LIP" in checks["definition"]["detail"]
    assert "not differential privacy" in checks["definition"]["detail"].lower()
    assert all(c["passed"] for c in checks.values()), checks


def test_account_verify_with_epsilon_budget_fails(tsdp_cli, flip_report):
    result = tsdp_cli("account", "verify", flip_report, "--max-epsilon", "1", "--quiet")
    assert result.code == 3
    assert "no epsilon" in result.error_line


def test_account_verify_detects_a_changed_output(tsdp_cli, flip_report, tmp_path):
    table = pl.read_csv(tmp_path / "out.csv")
    table.with_columns(pl.col("v") + 1e-3).write_csv(tmp_path / "out.csv")
    result = tsdp_cli("account", "verify", flip_report, "--released", tmp_path / "out.csv", "--quiet")
    assert result.code == 3 and "sha256" in result.error_line


def test_account_compose_refuses_flip_report(refuse, flip_report):
    refuse(["account", "compose", flip_report], 2, "LIP")


# ---------------------------------------------------------------------------------- config


def test_config_file(tsdp_cli, tmp_path):
    data = Path(shutil.copy(SAMPLE, tmp_path / "qwi.csv"))
    (tmp_path / "flip.toml").write_text(
        "[flip]\n"
        'time-col = "quarter"\n'
        'value-cols = ["ca_white", "md_baltimore"]\n'
        'aux-cols = "ca_asian"\n'
        "lip-delta = 0.1\n"
        "trend-order = 1\n"
        "filter-half-length = 20\n"
    )
    run_ok(tsdp_cli, data, "--config", "flip.toml", "-o", "out.csv", "--seed", "3", "--quiet")
    report = load_report("out.report.json")
    jsonschema.Draft202012Validator(schema()).validate(report)
    params = report["command"]["parameters"]
    assert params["lip_delta"] == 0.1 and params["trend_order"] == 1 and params["filter_half_length"] == 20
    assert params["aux_cols"] == "ca_asian"
    rows = custodian_rows()
    assert [r["column"] for r in rows] == ["ca_white", "md_baltimore"]
    assert all(r["M"] == 20 and r["aux"] == ["ca_asian"] and r["lip_lower_bound"] == pytest.approx(0.9)
               and r["lip_ideal"] >= 0.9 for r in rows)
    out, source = pl.read_csv(tmp_path / "out.csv"), pl.read_csv(data)
    assert out.columns == ["quarter", "ca_white", "md_baltimore"] and out.height == source.height == 100
    assert out["quarter"].equals(source["quarter"])
    assert not np.allclose(out["ca_white"].to_numpy(), source["ca_white"].to_numpy())


def test_config_is_overridden_by_flags(tsdp_cli, tmp_path):
    data = Path(shutil.copy(SAMPLE, tmp_path / "qwi.csv"))
    (tmp_path / "flip.toml").write_text('[flip]\ntime-col = "quarter"\nvalue-cols = "ca_asian"\n'
                                        "trend-order = 1\nfilter-half-length = 20\nlip-delta = 0.1\n")
    run_ok(tsdp_cli, data, "--config", "flip.toml", "--filter-half-length", "15", "-o", "out.csv", "--seed", "3", "--quiet")
    assert custodian_rows()[0]["M"] == 15
