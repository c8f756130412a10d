# tsdp: two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test bench clean sample-data

install: $(STAMP)

# (Re)install into .venv whenever the project metadata changes.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,spark,deep,plot,bench]'
	@touch $(STAMP)

demo: $(STAMP)
	@mkdir -p demo_output
	$(BIN)/tsdp release --config configs/demo.toml --force
	@echo "released series: demo_output/traffic_released.parquet"
	@echo "privacy report:  demo_output/traffic_released.report.json"

test: $(STAMP)
	$(BIN)/python -m pytest -n 2

# Speed targets (each prints its figure and a ratio against a reference timed in the same run);
# bench/reproduce_*.py reproduce the papers' experiments and are run one by one.
bench: $(STAMP)
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/release_throughput.py
	$(BIN)/python bench/accountant.py
	$(BIN)/python bench/release_mechanisms.py
	$(BIN)/python bench/bound_selection.py
	$(BIN)/python bench/flip_scale.py
	$(BIN)/python bench/mean_scale.py
	$(BIN)/python bench/bestfit_pack.py
	$(BIN)/python bench/noise.py
	TSDP_BENCH_ENV=$(BENCH_ENV) $(BIN)/python bench/forecast_speed.py
	$(BIN)/python bench/scale.py --sizes 1e6,1e7

# A bench-only environment with CPU torch and Opacus, the reference of bench/forecast_speed.py
# (never a dependency of tsdp). TORCH_INDEX: where CPU builds of torch are published; empty when
# the configured package index already holds them.
BENCH_ENV   ?= .bench-venv
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
.PHONY: bench-env
bench-env:
	@test -x $(BENCH_ENV)/bin/python || $(PYTHON) -m venv $(BENCH_ENV)
	$(BENCH_ENV)/bin/python -m pip install --quiet --retries 0 \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) "torch==2.13.0+cpu" "opacus==1.6.0"

sample-data: $(STAMP)
	$(BIN)/python sample_data/generate.py

clean:
	rm -rf $(VENV) demo_output .pytest_cache .hypothesis *.egg-info

# Empirical privacy audit (specs/audit.md): each mechanism's claimed epsilon against an empirical
# lower bound on worst-case neighbours, N = 10^6 releases per side (a few minutes).
.PHONY: audit
audit: $(STAMP)
	$(BIN)/python bench/privacy_audit.py
