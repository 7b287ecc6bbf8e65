# Two commands for a fresh machine (Python 3.11, pip, gcc, make):
#   make demo   sets up .venv and renders the built-in demo to out/demo.wav and out/demo.png
#   make test   sets up .venv and runs the default test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-slow bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/impactsound demo --out out

# two workers (pytest-xdist) sharing one asset cache: the default suite in 7-8 min on 2 cores instead of ~9.5
# (about 10 on a fresh clone, where Numba compiles every kernel first)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	for f in bench/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out .cache
