# `make demo` and `make test` bootstrap everything from a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit browser serve bench-quality bench-speed bench-video bench-live bench-turned bench-cut bench-small-faces bench-group-tone bench-mirror bench-hands bench-soak clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py --output out/demo.png

lint: $(STAMP)
	$(PY) -m ruff check faceweave tests benchmarks examples tools
	$(PY) -m ruff format --check faceweave tests benchmarks examples tools

typecheck: $(STAMP)
	$(PY) -m mypy

unit: $(STAMP)
	$(PY) -m pytest

test: lint typecheck unit

browser:
	bash tools/install_browser.sh

serve: $(STAMP)
	$(VENV)/bin/faceweave serve --host 127.0.0.1 --port 8000 --data ./faceweave-data

bench-video: $(STAMP)
	$(PY) benchmarks/video.py

bench-live: $(STAMP)
	$(PY) benchmarks/live.py

bench-quality: $(STAMP)
	$(PY) benchmarks/quality.py

bench-speed: $(STAMP)
	$(PY) benchmarks/speed.py

bench-turned: $(STAMP)
	$(PY) benchmarks/turned.py

bench-cut: $(STAMP)
	$(PY) benchmarks/cut.py

bench-small-faces: $(STAMP)
	$(PY) benchmarks/small_faces.py

bench-group-tone: $(STAMP)
	$(PY) benchmarks/group_tone.py

bench-mirror: $(STAMP)
	$(PY) benchmarks/mirror.py

bench-hands: $(STAMP)
	$(PY) benchmarks/hands.py

bench-soak: $(STAMP)
	$(PY) benchmarks/soak.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
