# Quick start: `make run` (set up, then the default sweep of the builtin suite) and
# `make test` (set up, then the whole test suite: `make test-unit` and `make test-e2e` run
# its two tiers alone). All create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
EXTRAS ?= xla,torchax,models,reports,ray,test
RUN_ARGS ?= --suite-name=builtin --accelerator=cpu
# Tests run on every core (pytest-xdist), a file per worker at a time, so that a module's
# shared fixture (a sweep) runs once. (xdist's loadgroup does not group under pytest 9.)
# One worker more than the cores: a test waiting on a child's timeout or a signal leaves its
# core to the others (on 2 cores, 3 workers took 1 to 9% less wall time than 2 in four
# A B pairs, median 537 s against 561 s).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST_ARGS ?= -n $(TEST_WORKERS) --dist loadfile
# Two tiers (tests/conftest.py): the unit tier starts no process and takes under a minute;
# the end-to-end tier (marker e2e) runs the CLI, its children, fork servers, Ray. `make test`
# runs both in one pytest run (the long end-to-end tests first, the unit tier fills the gaps).
# Tests marked slow stay out of all three (setup.cfg); -m slow runs them.
UNIT := -m "not slow and not e2e"
E2E := -m "e2e and not slow and not quiet"
# Tests marked quiet time a real difference of speed (the bisections of a 30% slower commit)
# and need the host to themselves: beside the suite's other processes a 2-core machine's
# timings moved by 20 to 50%, and a bisection named a wrong commit in CI. They run after
# the rest, one at a time; both parts run, and either failing fails the target.
QUIET := -m "quiet and not slow"
# The files that hold quiet tests: the quiet tier collects only these (a collection of the
# whole suite, to deselect all but two tests, took 4 to 11 s).
QUIET_FILES = $(shell grep -rl --include='test_*.py' 'mark\.quiet' tests)
STAMP := $(VENV)/.installed-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup run test test-unit test-e2e bytecode clean-venv

setup: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install --quiet --upgrade pip
	$(VENV_PYTHON) -m pip install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

run: setup
	$(VENV_PYTHON) experiment_runner.py $(RUN_ARGS)

test: setup bytecode
	status=0; $(VENV_PYTHON) -m pytest $(PYTEST_ARGS) -m "not slow and not quiet" || status=$$?; \
	$(VENV_PYTHON) -m pytest $(QUIET) $(QUIET_FILES) || status=$$?; exit $$status

test-unit: setup bytecode
	$(VENV_PYTHON) -m pytest $(PYTEST_ARGS) $(UNIT)

test-e2e: setup bytecode
	status=0; $(VENV_PYTHON) -m pytest $(PYTEST_ARGS) $(E2E) || status=$$?; \
	$(VENV_PYTHON) -m pytest $(QUIET) $(QUIET_FILES) || status=$$?; exit $$status

# The project's modules compiled once, before the tests start some 400 Python processes:
# where PYTHONDONTWRITEBYTECODE is set (as on CI's machines) none of them writes what it
# compiles, and each compiled again every module it imported (pip compiles installed
# packages, not an editable project). Folders whose name starts with a dot are left out.
bytecode: setup
	$(VENV_PYTHON) -m compileall -q -x '/\.' .

clean-venv:
	rm -rf $(VENV)
