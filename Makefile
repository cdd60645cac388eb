# Quick start: `make run` (set up, then the default sweep of the builtin suite) and
# `make test` (set up, then the whole test suite). Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
VENV_PYTHON := $(VENV)/bin/python
EXTRAS ?= xla,torchax,models,reports,ray,test
RUN_ARGS ?= --suite-name=builtin --accelerator=cpu
# Tests run on every core (pytest-xdist), a file per worker at a time, so that a module's
# shared fixture (a sweep) runs once. (xdist's loadgroup does not group under pytest 9.)
PYTEST_ARGS ?= -n auto --dist loadfile
STAMP := $(VENV)/.installed-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup run test clean-venv

setup: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install --quiet --upgrade pip
	$(VENV_PYTHON) -m pip install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

run: setup
	$(VENV_PYTHON) experiment_runner.py $(RUN_ARGS)

test: setup
	$(VENV_PYTHON) -m pytest $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
