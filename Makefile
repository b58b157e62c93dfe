# One-command entry points: `make lab` (the main job: JupyterLab on the quickstart notebook), `make demo`
# (the same search headless) and `make test` (ruff, mypy and the test suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: lab demo test bench bench-defaults bench-tables bench-peers docs clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# nvcc/ptxas from pinned PyPI wheels where no CUDA toolkit is installed
	# gpu: CuPy (CUDA 12 build) and NVML bindings, so the tests cover the import, the probe and the refusal without a GPU
	$(BIN)/python -m pip install -q -e ".[test,lab,dist,gpu,nvrtc,triton,sass$$(command -v nvcc >/dev/null 2>&1 || echo ,cuda)]"
	# the NVIDIA-ACF tests also run a ptxas that takes --apply-controls (13.5, from its wheel; beside the venv, off PATH)
	$(BIN)/python scripts/ptxas_wheel.py 13.5.37 $(VENV)/ptxas-13.5
	touch $(STAMP)

# .jupyter/jupyter_server_config.py (first on JUPYTER_CONFIG_PATH, over the user's own Jupyter config) saves
# notebooks without outputs, execution counts or widget state, so running them leaves the repository clean.
# LAB_ARGS: more `jupyter lab` arguments, e.g. make lab LAB_ARGS="--no-browser --port 8899"
LAB_ARGS ?=
lab: $(STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		$(BIN)/jupyter lab notebooks/01_quickstart.ipynb $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

demo: $(STAMP)
	$(BIN)/compileiq-lab demo
	$(BIN)/compileiq-lab tune reduction --space ptxas --objectives registers,sass_instructions --generations 5 --export reduction.acf

test: $(STAMP)
	$(BIN)/ruff check compileiq_lab tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/bench_overhead.py
	$(BIN)/python bench/bench_toy.py
	$(BIN)/python bench/bench_compile.py

bench-defaults: $(STAMP)
	$(BIN)/python bench/bench_defaults.py
	$(BIN)/python bench/bench_defaults.py --pools auto --mutate 0.5,1,2,3

# exhaustive real-compiler tables (bench/tables/; needs nvcc, ptxas, gcc and valgrind; about 25 minutes on 2 cores)
bench-tables: $(STAMP)
	$(BIN)/python bench/make_tables.py

# every peer side by side on the tables (Optuna 5 into this venv, CompileIQ 1.1 into its own cached venv);
# writes bench/results/peers.{json,md}
bench-peers: $(STAMP)
	$(BIN)/python -m pip install -q "optuna==5.0.0"
	$(BIN)/python bench/bench_peers.py

# the teaching notebooks executed headless (no GPU needed) and rendered to docs/notebooks/*.html; their run times
# and exercise checks go to bench/results/notebooks.{json,md}
docs: $(STAMP)
	$(BIN)/python bench/bench_notebooks.py --html docs/notebooks

clean:
	rm -rf $(VENV) compileiq_runs .pytest_cache
