"""The hardened DP-SGD sampler of forecast-train seen by an attacker (tsdp.accounting.dpsgd_lattice).

A hardened step releases ``(round_g(S) + g Z) / B``: S the clipped gradient sum, g a power of two, Z exact
discrete Gaussian of parameter sigma C / g; label/context noise likewise on the lattice g_in. What is
checked, as an attacker would:

1. the noisy gradient is the float image of a lattice point, and its noise in lattice steps has the
   discrete Gaussian law of parameter sigma C / g (chi-square at a coarse lattice, with power against a
   sigma 10 % too large), with standard deviation sigma C at the default lattice;
2. hardened label/context augmentation: outputs on the lattice g_in, the noise's law (chi-square at a
   coarse lattice), inputs untouched;
3. worst-case neighbours (hypothesis, with values parked on and next to rounding boundaries): the rounded
   sums of two clipped sums at distance <= C are at most C + g sqrt(P) = rounded_clip apart, and a
   half-lattice construction attains that exactly (so no smaller covered clip is valid);
4. train(): the gradients Adam receives are on the lattice with the stated noise, the epsilon is
   account_dpsgd's for the hardened setting, the claim states the lattice and its costs; --sampler float
   is the continuous accountant; a config stating another parameter count is refused;
5. the CLI: the report verifies, ``tsdp account dpsgd --sampler hardened`` reproduces its epsilon, and
   every edited lattice figure makes verify fail (exit 3); --sampler float warns and fails verify.

Statistical checks use fixed seeds; a correct implementation fails a two-sided check at 1e-6 (chi-square
goodness of fit) or 1e-7 (variance) with that probability for a random seed.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tsdp.accounting import dpsgd_lattice as dl
from tsdp.accounting.dpsgd_lattice import GradientLattice
from tsdp.accounting.structured import DpSgdSetting, account_dpsgd
from tsdp.errors import UsageError
from tsdp.forecast import claim as fclaim
from tsdp.forecast import sampling, synthetic, trainer
from tsdp.forecast.models import make_model
from tsdp.forecast.optim import Adam
from tsdp.mechanisms.noise import snap

TAIL = 1e-6  # chi-square goodness of fit
P_TAIL = 1e-7  # variance test


def is_integer(a) -> bool:
    a = np.asarray(a, dtype=np.float64)
    return bool(np.all(np.isfinite(a)) and np.array_equal(a, np.rint(a)))


def dg_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    w = np.exp(-0.5 * (support / scale) ** 2)
    return w / w.sum()


def chi2_pvalue(k: np.ndarray, scale: float) -> float:
    """Pearson chi-square p-value of the integers ``k`` against the discrete Gaussian of parameter
    ``scale``; the tails are pooled into the outermost bins expecting at least 5 draws."""
    r = int(math.ceil(40 * scale))
    support = np.arange(-r, r + 1)
    expected = k.size * dg_pmf(scale, support)
    observed = np.bincount(np.clip(k.astype(np.int64), -r, r) + r, minlength=support.size).astype(float)
    core = np.flatnonzero(expected >= 5)
    lo, hi = core[0] + 1, core[-1] - 1
    e = np.concatenate([[expected[:lo].sum()], expected[lo:hi], [expected[hi:].sum()]])
    o = np.concatenate([[observed[:lo].sum()], observed[lo:hi], [observed[hi:].sum()]])
    assert o.sum() == k.size
    return float(stats.chi2.sf(float(np.sum((o - e) ** 2 / e)), e.size - 1))


def variance_ok(x: np.ndarray, std: float) -> bool:
    """sum(x^2) / std^2 within the chi2(n) quantiles at P_TAIL and 1 - P_TAIL (known mean 0)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    statistic = float(np.sum(x * x)) / std**2
    return bool(stats.chi2.ppf(P_TAIL, x.size) <= statistic <= stats.chi2.isf(P_TAIL, x.size))


# ===================================================================== 1. dp_gradient on the lattice


# sigma C = 5 * 2^-4 and 3 * 2^-4 with g = 2^-4: lattice parameters 5 and 3, so that the integer bins fill
@pytest.mark.parametrize("sigma, clip, scale", [(1.25, 0.25, 5.0), (0.75, 0.25, 3.0)])
def test_dp_gradient_noise_is_discrete_gaussian_in_lattice_steps(sigma, clip, scale):
    g = 2.0**-4
    assert sigma * clip / g == scale
    total = np.random.default_rng(1).uniform(-40, 40, 120_000)  # off the lattice
    out = trainer.dp_gradient(total, sigma, clip, 8, np.random.default_rng(2), granularity=g)
    assert is_integer(out * 8 / g)  # B = 8 and g are powers of two: the products are exact
    assert np.all(np.mod(out * 8, g) == 0)
    snapped = snap(total, g)
    assert is_integer(snapped / g) and np.all(np.abs(snapped - total) <= g / 2)
    k = (out * 8 - snapped) / g
    assert is_integer(k) and k.std() > 1
    assert chi2_pvalue(k, scale) > TAIL
    # teeth: the same statistic rejects a sigma 10 % too large
    assert chi2_pvalue(k, 1.1 * scale) < TAIL
    # the input enters only through its rounding: two sums that round alike give identical outputs
    nudged = snapped + (np.random.default_rng(3).uniform(-0.49, 0.49, total.size) * g)
    again = trainer.dp_gradient(nudged, sigma, clip, 8, np.random.default_rng(2), granularity=g)
    np.testing.assert_array_equal(again, out)


def test_dp_gradient_with_a_batch_size_not_a_power_of_two_is_the_image_of_a_lattice_point():
    """Dividing by B = 3 is post-processing of the lattice point round_g(S) + g Z: each output is exactly the
    float quotient of an integer multiple of g by 3."""
    g = 2.0**-4
    total = np.random.default_rng(4).uniform(-40, 40, 50_000)
    out = trainer.dp_gradient(total, 1.25, 0.25, 3, np.random.default_rng(5), granularity=g)
    lattice_point = np.rint(out * 3 / g) * g
    np.testing.assert_array_equal(lattice_point / 3, out)
    assert is_integer((lattice_point - snap(total, g)) / g)


@pytest.mark.parametrize("sigma, clip, batch", [(1.3, 0.7, 8), (4.0, 1e-4, 256)])
def test_dp_gradient_at_the_default_lattice_has_std_sigma_c(sigma, clip, batch):
    lattice = GradientLattice(sigma, clip, 200_000)
    g = lattice.granularity
    out = trainer.dp_gradient(np.zeros(200_000), sigma, clip, batch, np.random.default_rng(6), granularity=g)
    assert is_integer(out * batch / g)
    assert variance_ok(out * batch, sigma * clip)
    assert not variance_ok(out * batch, 1.02 * sigma * clip)  # 2 %: about 6 standard errors of the variance
    assert abs(out.mean() * batch) <= 5.3 * sigma * clip / math.sqrt(out.size)


# ===================================================================== 2. hardened augmentation


def _windows(seed=7, n=20_000):
    rng = np.random.default_rng(seed)
    return rng.uniform(-3, 3, (n, 6)), rng.uniform(-3, 3, (n, 3))


@pytest.mark.parametrize("resolution", [None, 2])
def test_hardened_augmentation_on_its_lattice_with_the_stated_noise(monkeypatch, resolution):
    """Context noise 0.3 v and label noise 0.5 v (v = 2): every output is a multiple of its g_in, the
    noise in lattice steps has the discrete Gaussian law of parameter noise v / g_in (at a coarse lattice,
    INPUT_RESOLUTION 2, so the bins fill: parameters 4.8 and 4) or standard deviation noise v (default
    lattice), and the inputs are not modified."""
    if resolution is not None:
        monkeypatch.setattr(dl, "INPUT_RESOLUTION", resolution)
    v = 2.0
    ctx, tgt = _windows()
    ctx0, tgt0 = ctx.copy(), tgt.copy()
    out_ctx, out_tgt = sampling.augment(ctx, tgt, 0.5, 0.3, v, np.random.default_rng(8), hardened=True)
    np.testing.assert_array_equal(ctx, ctx0)
    np.testing.assert_array_equal(tgt, tgt0)
    for x, y, noise in ((ctx, out_ctx, 0.3), (tgt, out_tgt, 0.5)):
        g_in = dl.input_granularity(noise, v)
        assert g_in == 2.0 ** (math.floor(math.log2(noise * v)) - (resolution or 20))
        assert is_integer(y / g_in)
        k = (y - snap(x, g_in)) / g_in
        assert is_integer(k)
        scale = noise * v / g_in
        if resolution is not None:
            assert scale in (4.0, 4.8)
            assert chi2_pvalue(k.ravel(), scale) > TAIL
            assert chi2_pvalue(k.ravel(), 1.1 * scale) < TAIL
        else:
            assert variance_ok(y - snap(x, g_in), noise * v)
            assert not variance_ok(y - snap(x, g_in), 1.05 * noise * v)
    # negative control: the float augmentation is off that lattice
    f_ctx, _ = sampling.augment(ctx, tgt, 0.5, 0.3, v, np.random.default_rng(8), hardened=False)
    assert not is_integer(f_ctx / dl.input_granularity(0.3, v))


# ===================================================================== 3. worst-case neighbours


def _adversarial_pair(data, lattice: GradientLattice):
    """Two clipped sums S, S' with ||S - S'|| <= C, coordinates parked on or next to rounding boundaries.

    Everything is an integer multiple of h = g / 256, far below 2^53 h, so S' = S + Delta is exact and the
    boundary (j + 1/2) g is hit exactly when the offset is 0 (ties round to even)."""
    g, c, p = lattice.granularity, lattice.clip_norm, lattice.parameters
    h = g / 256
    js = data.draw(st.lists(st.integers(-10**6, 10**6), min_size=p, max_size=p))
    offsets = data.draw(st.lists(st.integers(-3, 3), min_size=p, max_size=p))
    s = (256 * np.array(js, dtype=np.float64) + 128 + np.array(offsets, dtype=np.float64)) * h
    direction = np.array(data.draw(st.lists(st.integers(-1000, 1000), min_size=p, max_size=p)), dtype=np.float64)
    if not np.any(direction):
        direction[0] = 1.0
    length = data.draw(st.floats(0.0, 1.0))
    step = np.trunc(direction / np.linalg.norm(direction) * length * c / h) * h  # toward 0: norm <= C
    return s, s + step, step


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.data(), sigma=st.floats(0.3, 30.0), clip=st.floats(1e-4, 10.0), p=st.integers(1, 40))
def test_rounded_sums_of_neighbours_differ_by_at_most_the_rounded_clip(data, sigma, clip, p):
    lattice = GradientLattice(sigma, clip, p)
    s, s2, step = _adversarial_pair(data, lattice)
    assert np.array_equal(s2 - s, step)  # exact
    assert float(np.linalg.norm(step)) <= clip * (1 + 1e-15)
    moved = float(np.linalg.norm(snap(s2, lattice.granularity) - snap(s, lattice.granularity)))
    assert moved <= lattice.rounded_clip * (1 + 1e-13)  # float error of the two norms


@pytest.mark.parametrize("m", [1, 3, 8, 30])
def test_half_lattice_neighbours_attain_the_rounded_clip_exactly(m):
    """P = m^2 coordinates, each S_i = (j_i + 1/2) g with j_i even (ties round down to j_i g) and
    S'_i = S_i + a g with a odd (rounds up to (j_i + a + 1) g): ||S' - S|| = a g m = C exactly, and the
    rounded sums are (a + 1) g m = C + g sqrt(P) apart, the rounded_clip itself."""
    a = 2**20 + 1
    e = -3
    g = 2.0 ** (e - 28)
    clip = a * m * g
    sigma = 1.5 * 2.0**28 / (a * m)  # sigma C = 1.5 * 2^e: the lattice's g is the one above
    lattice = GradientLattice(sigma, clip, m * m)
    assert lattice.granularity == g
    j = 2 * np.arange(m * m, dtype=np.float64) - 2 * m * m  # even
    s = (j + 0.5) * g
    s2 = s + a * g
    assert np.linalg.norm(s2 - s) == pytest.approx(clip, rel=1e-15, abs=0)
    moved = np.linalg.norm(snap(s2, g) - snap(s, g))
    assert moved == pytest.approx(clip + g * m, rel=1e-15, abs=0)  # exact sums: no float-sum margin needed
    assert moved <= lattice.rounded_clip
    assert moved > clip  # the unrounded clip is refuted ...
    assert moved > clip + 0.999 * g * m  # ... and so is any clip below C + g sqrt(P) by 0.1 % of g sqrt(P)


def test_just_below_and_just_above_a_boundary_nearly_attains_the_rounded_clip():
    """Without ties: S_i just below (j + 1/2) g rounds down, S'_i = S_i + a g + 2 eps just above rounds up;
    the rounded distance is C + g sqrt(P) - 2 eps sqrt(P), within 2^-9 g sqrt(P) of the rounded clip."""
    m, a, eps_steps = 5, 2**20, 2.0**-10
    g = 2.0**-31
    clip = m * (a + 2 * eps_steps) * g
    sigma = 1.5 * 2.0**-3 / clip
    lattice = GradientLattice(sigma, clip, m * m)
    assert lattice.granularity == g
    j = np.arange(m * m, dtype=np.float64) * 7
    s = (j + 0.5 - eps_steps) * g
    s2 = s + (a + 2 * eps_steps) * g
    assert np.linalg.norm(s2 - s) <= clip * (1 + 1e-15)
    moved = np.linalg.norm(snap(s2, g) - snap(s, g))
    assert moved <= lattice.rounded_clip * (1 + 1e-15)
    assert moved >= clip + g * m - 2 * eps_steps * g * m * (1 + 1e-9)  # C + g sqrt(P) nearly attained


# ===================================================================== 4. train()


N, LENGTH, CTX, HOR, VALW = 6, 300, 8, 4, 2
TRAIN_LENGTH = LENGTH - HOR * (1 + VALW)


@pytest.fixture(scope="module")
def split() -> trainer.Split:
    return trainer.split_panel(synthetic.traffic_panel(N, LENGTH, seed=0), CTX, HOR, VALW)


def config(**changes) -> trainer.TrainConfig:
    base = dict(context=CTX, horizon=HOR, model="linear", batch_size=2, clip_norm=1.0, noise_multiplier=2.0,
                delta=1e-5, val_windows=VALW, steps=150)
    return trainer.TrainConfig(**{**base, **changes})


def _spy_training(monkeypatch, model):
    sums, grads = [], []
    real_sum, real_step = model.clipped_grad_sum, Adam.step

    def spy_sum(theta, ctx, tgt, clip, **kw):
        out = real_sum(theta, ctx, tgt, clip, **kw)
        sums.append(out[1].copy())
        return out

    def spy_step(self, theta, grad):
        grads.append(np.array(grad, copy=True))
        return real_step(self, theta, grad)

    monkeypatch.setattr(model, "clipped_grad_sum", spy_sum)
    monkeypatch.setattr(Adam, "step", spy_step)
    return sums, grads


def test_train_hardened_by_default_puts_the_noisy_gradient_on_the_lattice(split, monkeypatch):
    cfg = config()
    assert cfg.sampler.name == "hardened"
    model = make_model("linear", CTX, HOR)
    sums, grads = _spy_training(monkeypatch, model)
    result = trainer.train(model, split, cfg, np.random.default_rng(11))
    setting = result.plan.setting
    assert setting.sampler.name == "hardened" and setting.parameters == model.n_params and setting.clip_norm == 1.0
    g = 2.0 ** (math.floor(math.log2(2.0 * 1.0)) - 28)
    assert setting.lattice.granularity == g
    assert len(grads) == len(sums) == 150  # a WOR batch is never empty
    noisy = np.stack(grads) * 2  # B = 2: exact
    assert is_integer(noisy / g)
    k = (noisy - np.stack([snap(s, g) for s in sums])) / g
    assert is_integer(k)
    scale = 2.0 * 1.0 / g
    assert variance_ok(k, scale) and not variance_ok(k, 1.1 * scale)
    # the epsilon is the hardened accountant's for the steps taken, and above the float one
    hardened = DpSgdSetting(N, TRAIN_LENGTH, CTX, HOR, 2, 2.0, sampler="hardened", parameters=model.n_params,
                            clip_norm=1.0)
    assert setting == hardened
    assert result.epsilon == account_dpsgd(hardened, 1e-5, steps=150).epsilon
    assert result.epsilon > account_dpsgd(DpSgdSetting(N, TRAIN_LENGTH, CTX, HOR, 2, 2.0), 1e-5, steps=150).epsilon


def test_train_hardened_claim_states_the_lattice_and_its_costs(split):
    cfg = config(steps=40)
    model = make_model("linear", CTX, HOR)
    result = trainer.train(model, split, cfg, np.random.default_rng(12))
    claim = fclaim.dpsgd_claim(cfg, result.plan, result)
    p = claim.parameters
    g = 2.0 ** (math.floor(math.log2(2.0)) - 28)
    s = 2.0 / g
    n = 40 * model.n_params
    assert p["sampler"] == "hardened"
    assert p["granularity"] == g
    assert p["parameters"] == model.n_params
    u, terms = 2.0**-53, result.plan.setting.max_batch_windows
    factor = (1 + (model.n_params + 4) * u / (1 - (model.n_params + 4) * u)) * (
        1 + 2 * (terms + 2) * u / (1 - (terms + 2) * u) * terms)
    assert p["rounded_clip_norm"] == pytest.approx(factor + g * math.sqrt(model.n_params), rel=1e-15, abs=0)
    assert p["accounted_noise_multiplier"] == pytest.approx(2.0 / (factor + g * math.sqrt(model.n_params)),
                                                            rel=1e-15, abs=0)
    assert p["rounding_slack"] == pytest.approx(math.sqrt(2 * n) * 0.042 / s**2 + math.exp(-100), rel=1e-12, abs=0)
    k = (1 + 1 / s) * (n + 2 * math.sqrt(800 * n) + 1600) + n / (2 * s)
    assert p["epsilon_shift"] == pytest.approx(k / (24 * s * s), rel=1e-12, abs=0)
    assert claim.epsilon == result.epsilon
    assert "label_granularity" not in p and "context_granularity" not in p
    assert "tsdp.accounting.dpsgd_lattice" in claim.theorem


def test_train_hardened_with_label_and_context_noise(split, monkeypatch):
    """Augmented: the windows the model sees are on the input lattices, and the claim states them."""
    cfg = config(steps=20, label_noise=0.5, context_noise=0.25, value_bound=50.0)
    model = make_model("linear", CTX, HOR)
    seen = []
    real = model.clipped_grad_sum

    def spy(theta, ctx, tgt, clip, **kw):
        seen.append((ctx.copy(), tgt.copy()))
        return real(theta, ctx, tgt, clip, **kw)

    monkeypatch.setattr(model, "clipped_grad_sum", spy)
    result = trainer.train(model, split, cfg, np.random.default_rng(13))
    g_ctx, g_tgt = dl.input_granularity(0.25, 50.0), dl.input_granularity(0.5, 50.0)
    assert all(is_integer(c / g_ctx) and is_integer(t / g_tgt) for c, t in seen)
    p = fclaim.dpsgd_claim(cfg, result.plan, result).parameters
    assert p["label_granularity"] == g_tgt and p["context_granularity"] == g_ctx
    assert p["tau_label"] == round(dl.hardened_tau(0.5, 50.0), 10)
    assert result.epsilon == account_dpsgd(result.plan.setting, 1e-5, steps=20).epsilon


def test_train_float_sampler_is_the_continuous_accountant(split, monkeypatch):
    cfg = config(steps=60, sampler="float")
    model = make_model("linear", CTX, HOR)
    sums, grads = _spy_training(monkeypatch, model)
    result = trainer.train(model, split, cfg, np.random.default_rng(14))
    setting = DpSgdSetting(N, TRAIN_LENGTH, CTX, HOR, 2, 2.0)
    assert result.plan.setting == setting and setting.lattice is None
    assert result.epsilon == account_dpsgd(setting, 1e-5, steps=60).epsilon
    assert fclaim.dpsgd_claim(cfg, result.plan, result).parameters["sampler"] == "float"
    g = 2.0 ** (math.floor(math.log2(2.0)) - 28)
    assert not is_integer(np.stack(grads) * 2 / g)  # negative control: floating-point noise


def test_with_model_refuses_another_parameter_count():
    model = make_model("linear", CTX, HOR)
    assert trainer.with_model(config(), model).parameters == model.n_params
    assert trainer.with_model(config(parameters=model.n_params), model).parameters == model.n_params
    with pytest.raises(UsageError, match=f"{model.n_params} parameters"):
        trainer.with_model(config(parameters=model.n_params + 1), model)


def test_train_refuses_a_config_stating_another_parameter_count(split):
    model = make_model("linear", CTX, HOR)
    with pytest.raises(UsageError, match="parameters"):
        trainer.train(model, split, config(parameters=model.n_params // 2), np.random.default_rng(0))


def test_plan_without_parameter_count_is_refused():
    with pytest.raises(UsageError, match="parameter count"):
        trainer.plan_training(config(), N, TRAIN_LENGTH)


def test_train_refuses_a_plan_for_another_parameter_count(split):
    model = make_model("linear", CTX, HOR)
    plan = trainer.plan_training(config(steps=5, parameters=1), N, TRAIN_LENGTH)
    with pytest.raises(UsageError):
        trainer.train(model, split, config(steps=5), np.random.default_rng(0), plan=plan)


# ===================================================================== 5. the CLI

START = datetime(2024, 1, 1)
ARGS = ["--time-col", "time", "--value-col", "v", "--series-col", "id", "--context-length", "4",
        "--forecast-length", "2", "--batch-size", "2", "--model", "linear", "--delta", "1e-5",
        "--noise-multiplier", "1", "--steps", "5"]  # unseeded: verify fails seeded runs


@pytest.fixture
def small(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    rows = [f"{sid},{(START + timedelta(hours=t)).strftime('%Y-%m-%d %H:%M:%S')},{10 + (7 * t + 3 * k) % 13}\n"
            for k, sid in enumerate("abc") for t in range(60)]
    path = tmp_path / "small.csv"
    path.write_text("id,time,v\n" + "".join(rows))
    return path


def _train(tsdp_cli, small, *extra) -> tuple[dict, object]:
    run = tsdp_cli("forecast-train", small, *ARGS, *extra, "-o", "fc.csv")
    assert run.code == 0, run.err
    return json.loads(Path("fc.report.json").read_text()), run


def _verify(tsdp_cli, report: dict, name: str):
    path = Path(name)
    path.write_text(json.dumps(report))
    run = tsdp_cli("account", "verify", path, "--json")
    checks = {c["name"]: c for c in json.loads(run.out)["reports"][0]["checks"]}
    return run.code, checks


def test_cli_report_is_hardened_verifies_and_is_reproduced_by_account_dpsgd(tsdp_cli, small):
    report, run = _train(tsdp_cli, small, "--quiet")
    claim = report["claim"]
    p = claim["parameters"]
    assert p["sampler"] == "hardened" and p["parameters"] == make_model("linear", 4, 2).n_params
    assert p["granularity"] == 2.0 ** (math.floor(math.log2(1.0 * p["clip_norm"])) - 28)
    assert "--sampler float" not in run.err
    code, checks = _verify(tsdp_cli, report, "same.report.json")
    assert code == 0 and all(c["passed"] for c in checks.values()), checks
    assert checks["sampler"]["detail"].startswith("exact discrete noise")
    acc = tsdp_cli("account", "dpsgd", "--series", p["series"], "--length", p["train_length"], "--context-length",
                   p["context"], "--forecast-length", p["horizon"], "--batch-size", p["batch_size"],
                   "--noise-multiplier", repr(p["noise_multiplier"]), "--steps", p["compositions"], "--delta",
                   repr(claim["delta"]), "--top", p["top"], "--bottom", p["bottom"], "--instances", p["instances"],
                   "--unit", "w-event", "--w", claim["unit"]["w"], "--discretization", repr(p["discretization"]),
                   "--sampler", "hardened", "--parameters", p["parameters"], "--clip-norm", repr(p["clip_norm"]),
                   "--json")
    assert acc.code == 0, acc.err
    assert json.loads(acc.out)["epsilon"] == claim["epsilon"]
    flt = tsdp_cli("account", "dpsgd", "--series", p["series"], "--length", p["train_length"], "--context-length",
                   p["context"], "--forecast-length", p["horizon"], "--batch-size", p["batch_size"],
                   "--noise-multiplier", repr(p["noise_multiplier"]), "--steps", p["compositions"], "--delta",
                   repr(claim["delta"]), "--discretization", repr(p["discretization"]), "--json")
    assert json.loads(flt.out)["epsilon"] != claim["epsilon"]  # the lattice's cost is in the figure


def _edit(key, change):
    def apply(report):
        params = report["claim"]["parameters"]
        if change is None:
            params.pop(key)
        else:
            params[key] = change(params[key])
    return apply


TAMPERS = {
    "granularity halved": (_edit("granularity", lambda g: g / 2), "parameters"),
    "rounded clip lowered to C": (lambda r: r["claim"]["parameters"].update(
        rounded_clip_norm=r["claim"]["parameters"]["clip_norm"]), "parameters"),
    "rounding slack lowered": (_edit("rounding_slack", lambda x: x / 2), "parameters"),
    "rounding slack zeroed": (_edit("rounding_slack", lambda x: 0.0), "parameters"),
    "epsilon shift dropped": (_edit("epsilon_shift", None), "parameters"),
    "accounted multiplier raised to sigma": (lambda r: r["claim"]["parameters"].update(
        accounted_noise_multiplier=r["claim"]["parameters"]["noise_multiplier"]), "parameters"),
    "parameters divided": (_edit("parameters", lambda n: max(1, n // 1000)), "parameters"),
    "relabelled float": (_edit("sampler", lambda s: "float"), "sampler"),
}


@pytest.mark.parametrize("name", list(TAMPERS))
def test_cli_edited_hardened_report_fails_verify(tsdp_cli, small, name):
    report, _ = _train(tsdp_cli, small, "--quiet")
    edit, failing = TAMPERS[name]
    edited = copy.deepcopy(report)
    edit(edited)
    assert edited != report
    code, checks = _verify(tsdp_cli, edited, "edited.report.json")
    assert code == 3
    assert not checks[failing]["passed"], checks[failing]


def test_cli_consistently_understated_parameter_count_fails_verify(tsdp_cli, small):
    report, _ = _train(tsdp_cli, small, "--quiet")
    p = report["claim"]["parameters"]
    setting = DpSgdSetting(p["series"], p["train_length"], p["context"], p["horizon"], p["batch_size"],
                           p["noise_multiplier"], sampler="hardened", parameters=1, clip_norm=p["clip_norm"])
    lattice = setting.lattice
    slack, shift = setting.lattice_cost(p["compositions"])
    p.update(parameters=1, rounded_clip_norm=lattice.rounded_clip, rounding_slack=slack, epsilon_shift=shift,
             accounted_noise_multiplier=lattice.accounted_multiplier)
    report["claim"]["epsilon"] = account_dpsgd(setting, report["claim"]["delta"], steps=p["compositions"]).epsilon
    code, _ = _verify(tsdp_cli, report, "edited.report.json")
    assert code == 3


def test_cli_float_sampler_warns_and_fails_verify(tsdp_cli, small):
    report, run = _train(tsdp_cli, small, "--sampler", "float")
    assert "--sampler float" in run.err
    assert any("--sampler float" in w for w in report["warnings"])
    assert report["claim"]["parameters"]["sampler"] == "float"
    assert "granularity" not in report["claim"]["parameters"]
    code, checks = _verify(tsdp_cli, report, "same.report.json")
    assert code == 3 and not checks["sampler"]["passed"]
