# One-command set-up: `make run` starts the GUI, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-full validate clean app

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned, so pip takes the local CPU wheel and never a CUDA build
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test,cluster]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m explorer $(SCENARIO)

# the quick suite in one process per core (up to four), each test file whole in one of them;
# the slow validations run serially, so their timings are not shared with another worker
test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile
	$(VENV)/bin/lint-imports

test-full: $(STAMP)
	$(PY) -m pip install --quiet -e ".[build]"   # the frozen app's build test
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m "slow or not slow"

# The one-folder desktop app (PyInstaller): dist/ml-dse-explorer/ml-dse-explorer
app: $(STAMP)
	$(PY) -m pip install --quiet -e ".[build]"
	$(VENV)/bin/pyinstaller --noconfirm explorer.spec

clean:
	rm -rf $(VENV) build dist .pytest_cache

# Accuracy on this machine's CPU: random scenarios measured and predicted (a few minutes).
validate: $(STAMP)
	$(PY) -m predictors validate --device cpu --n 10
