# Hands-on distributed deep learning with TensorFlow — the course's commands.
#   make lab    set up what the notebooks need, then start JupyterLab on the course folder (opens 00_setup)
#   make test   set up everything, then lint, type-check and run the whole test suite (what CI runs)
#   make check  the fast tier for maintainers: lint, type-check and the quick unit tests
#   make student  the learner edition in build/student/ (no instructor/, no tests/)
#   make site     the course website in build/site/ (static HTML of the committed outputs, offline)
#   make room     a JupyterHub for a room on this machine (as root; see classroom/README.md), with nbgrader
#   make assess   grade your own copy of the assessment, unproctored (assessment/ddp/assessment.ipynb; README)
#   make record   record every notebook for the course, each alone on a quiet machine (NB=05 or NB="03 05": those);
#                 refuses, writing nothing, a run disturbed by other processes or other course runs (README)
# Other targets: setup, doctor, notebooks (a development run: re-execute, refuse nothing), bench, clean.

# setup, doctor and lab (and the variables they use) are the learner's commands: tools/learner.mk, which the
# learner edition's Makefile is made from.
SETUP_PROFILE := full
include tools/learner.mk
PYTEST_ARGS ?=

.PHONY: test test-busy check lint typecheck mutants test-unit test-notebooks notebooks record bench clean student site room

# The whole check (issue 31), on WORKERS=2 pytest-xdist workers by default: the notebooks (then test_ssh_hosts and the
# lab's browser test: tests/notebooks/harness.py, WITH_THE_NOTEBOOKS) one after another on one
# worker, the test files on the other, one file at a time, longest first, at nice 10 and in a cgroup of low CPU
# weight where it can, with slots of its own (tests/notebooks/harness.py, tests/conftest.py). WORKERS=1 is plain pytest.
# Fresh clones' times: tools/maintainers/results/2026-11-26-vm-check-time-two-workers.md and the jsonl beside it.
# MARK deselects, e.g. make test MARK='not browser'; PYTEST_ARGS is passed to pytest.
WORKERS ?= 2
MARK ?=
xdist = $(if $(filter 1,$(WORKERS)),,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)

# nbgrader for tests/test_assessment_room.py (the room's grading cycle, issue 55), in a venv of its own: not in the
# learner's venv (requirements/assessment.txt says why); `make room` installs it into the room's venv instead.
NBGRADER_VENV := build/nbgrader-venv
$(NBGRADER_VENV)/.installed: requirements/assessment.txt requirements/constraints.txt | setup
	rm -rf $(NBGRADER_VENV)
	$(PY) -m venv $(NBGRADER_VENV)
	$(NBGRADER_VENV)/bin/python -m pip install -q -r requirements/assessment.txt -c requirements/constraints.txt
	touch $@

test: setup lint typecheck $(NBGRADER_VENV)/.installed
	COURSE_NBGRADER=$(CURDIR)/$(NBGRADER_VENV)/bin/nbgrader \
	  $(PY) -m pytest $(xdist) $(if $(MARK),-m "$(MARK)") --durations=25 $(PYTEST_ARGS)

# The notebooks beside a busy neighbour (one core kept busy while they run: tests/notebooks/harness.py), one after
# another, so that each verdict nbval compares is tried on a machine that is not quiet.
test-busy: setup
	COURSE_BUSY_NEIGHBOUR=1 $(PY) -m pytest notebooks $(PYTEST_ARGS)

# ruff (rules in pyproject.toml) over the library, scripts, tests, tools and benchmarks.
lint: setup
	$(VENV)/bin/ruff check course_lib source_code tests tools benchmarks conftest.py

# mypy over course_lib (settings in pyproject.toml): the annotations are checked, not decoration.
typecheck: setup
	$(VENV)/bin/mypy

# Break the course on purpose in a scratch copy, one named mutant at a time; each must be killed
# (docs/mutants.md lists which check kills which). tests/test_mutants.py runs a sample in make test.
mutants: setup
	$(PY) tools/maintainers/mutants.py

# The fast tier for maintainers (under 3 minutes after set-up): lint, types, and the tests that launch no
# Horovod run, drive no browser and take under about 2 s each, on CHECK_WORKERS pytest-xdist workers (these
# tests judge no timing of their own, so two at once is safe: 115 s instead of about 190 s on 2 cores).
# `make test` stays the whole thing (CI).
CHECK_WORKERS ?= 2
check: setup lint typecheck
	$(PY) -m pytest tests -m "not horovod and not browser and not slow" -q -n $(CHECK_WORKERS) $(PYTEST_ARGS)

# Every test but the notebooks, Horovod launches and browser tests (the tests/ folder only: pytest's
# testpaths would add notebooks/ otherwise).
test-unit: setup
	$(PY) -m pytest tests -m "not horovod and not browser" $(PYTEST_ARGS)

test-notebooks: setup
	$(PY) -m pytest $(xdist) notebooks $(PYTEST_ARGS)

# A development run (tools/maintainers/run_notebooks.py): executes every notebook (or NB=05) in a fresh kernel and writes its
# outputs, refusing nothing; docs/run_times.json is left alone, and the stamps stay uncompleted, so
# tests/test_recording.py fails until the course is recorded again with `make record`.
NB ?=
notebooks: setup
	$(PY) tools/navigation.py
	$(PY) tools/maintainers/run_notebooks.py $(NB)

# The course's recording (tools/maintainers/run_notebooks.py --record; README "For maintainers"): every notebook (or NB=05,
# NB="03 05") executed alone in a fresh kernel while the recorder watches the machine. A notebook is refused (its
# file unchanged, exit status 3, one message saying why and what to do) when other processes used more than 0.10
# CPU cores on average over its run or 0.5 over any 20 s (docs/recording.md), another course run held a slot, or a
# launch queued; a recorded one gets its machine: stamp completed and its entry in docs/run_times.json.
# RECORDING='<id>' continues a recording that a refusal stopped (the refusal prints the command).
RECORDING ?=
record: setup
	$(PY) tools/navigation.py
	$(PY) tools/maintainers/run_notebooks.py --record $(if $(RECORDING),--recording '$(RECORDING)') $(NB)

bench: setup
	$(PY) benchmarks/run.py

# The learner edition: notebooks without solution cells, course_lib, scripts, set-up (tools/student.py).
student: setup
	$(PY) tools/student.py

# The course website from the committed outputs, never executed; works offline (tools/site.py).
site: setup
	$(PY) tools/site.py

# One server and workspace per learner (classroom/README.md), e.g.
#   sudo COURSE_ROOM_USERS=ana,ben COURSE_ROOM_PASSWORD='a-long-password' make room
ROOM_DATA := $(CURDIR)/build/room-data/tensorflow_datasets
# nbgrader (requirements/assessment.txt) and its exchange, world-writable with the sticky bit as nbgrader needs;
# the instructor's gradebook (created 0600 by the first command block) and course folder stay theirs alone
# (classroom/README.md, "Assessment").
COURSE_ROOM_EXCHANGE ?= /srv/nbgrader/exchange
export COURSE_ROOM_EXCHANGE
room: setup student
	$(PY) -m pip install -q -r requirements/assessment.txt -c requirements/constraints.txt
	@mkdir -p $(COURSE_ROOM_EXCHANGE) && chmod 1777 $(COURSE_ROOM_EXCHANGE)
	@mkdir -p $(ROOM_DATA)
	@TFDS_DATA_DIR=$(ROOM_DATA) $(PY) -m course_lib prepare-data
	@chmod -R a+rX $(CURDIR)/build/room-data
	$(COURSE_VENV)/bin/jupyterhub -f $(CURDIR)/classroom/jupyterhub_config.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
