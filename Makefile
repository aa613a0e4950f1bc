# Hands-on distributed deep learning with TensorFlow — the course's commands.
#   make lab    set up everything, then start JupyterLab on notebooks/
#   make test   set up everything, then run the whole test suite (what CI runs)
# Other targets: setup, doctor, notebooks (re-execute and commit-ready outputs), bench, clean.

SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
export COURSE_VENV := $(abspath $(VENV))
# Quiet TensorFlow's C++ start-up chatter; errors and warnings from Python still show.
export TF_CPP_MIN_LOG_LEVEL ?= 2
PORT ?= 8888
PYTEST_ARGS ?=

.PHONY: setup lab test test-unit test-notebooks doctor notebooks bench clean

setup:
	@bash tools/setup.sh

doctor: setup
	@$(PY) -m course_lib doctor

lab: setup
	$(PY) -m course_lib.environment.lab --port $(PORT)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest -m "not horovod and not browser" --ignore=notebooks $(PYTEST_ARGS)

test-notebooks: setup
	$(PY) -m pytest notebooks $(PYTEST_ARGS)

notebooks: setup
	$(PY) tools/run_notebooks.py

bench: setup
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
