# Two commands on a fresh Debian machine, as root:
#   make demo   set everything up, build the images, grade the example entry
#   make test   set everything up, run the tests: the unit tests spread over the cores
#               (pytest-xdist), then the integration tests one at a time against a real
#               Docker engine (they start containers and count them); prints the 25 slowest
PYTHON ?= python3
REPORTS ?= reports/demo
export PIP_ROOT_USER_ACTION := ignore
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup images demo test unit lint gpu-test clean

setup:
	bash scripts/setup.sh

images: setup
	$(PYTHON) -m grader images build --suite demo

demo: images
	$(PYTHON) -m grader bundle create examples/triton -o build/triton-example.tar
	$(PYTHON) -m grader run build/triton-example.tar -o $(REPORTS) --format json,html,md,junit
	@echo "reports: $(REPORTS)/report.html $(REPORTS)/report.json"

test: setup
	$(PYTHON) -m pytest -q -n auto tests/unit
	$(PYTHON) -m pytest -q --run-docker --durations=25 tests --ignore=tests/unit

unit:
	$(PYTHON) -m pytest -q -n auto tests/unit

lint:
	$(PYTHON) -m ruff check grader tests
	$(PYTHON) -m mypy grader

gpu-test:
	$(PYTHON) -m pytest -q --run-docker --run-gpu tests/gpu

clean:
	rm -rf build reports .pytest_cache
