# The learner's commands, in one place: the course's Makefile includes this file, and `make student`
# (tools/student.py) writes it, under a learner header, as the learner edition's Makefile.
#   make lab     set up what the notebooks need, then start JupyterLab (opens notebooks/00_setup.ipynb)
#   make doctor  check this machine: versions, Horovod, devices, the Fashion-MNIST files
#   make assess  grade your own copy of the assessment (assessment/ddp/assessment.ipynb), unproctored

SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
export COURSE_VENV := $(abspath $(VENV))
# Quiet TensorFlow's C++ start-up chatter; errors and warnings from Python still show.
export TF_CPP_MIN_LOG_LEVEL ?= 2
PORT ?= 8888
# The set-up's profile: what the notebooks need. The course's Makefile sets full (linters, nbval, Chromium too).
SETUP_PROFILE ?= learner

.PHONY: setup lab doctor assess

setup:
	@COURSE_PROFILE=$(SETUP_PROFILE) bash tools/setup.sh

doctor: setup
	@$(PY) -m course_lib doctor

# A learner's set-up (no test-only pieces), then the lab; a full set-up also serves.
lab:
	@COURSE_PROFILE=learner bash tools/setup.sh
	$(PY) -m course_lib.environment.lab --port $(PORT)

# The graded assessment, self-paced (course_lib/assessment/selfgrade.py): runs your notebook with the same tests a
# room's grader uses and prints the score, what you missed and a self-issued completion record. NOTEBOOK= another copy.
NOTEBOOK ?= assessment/ddp/assessment.ipynb
assess: setup
	$(PY) -m course_lib.assessment.selfgrade --notebook $(NOTEBOOK)
