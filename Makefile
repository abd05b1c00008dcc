# Every target runs inside the Debian 13 dev root (tools/dev builds it once).
.PHONY: test test-full bench asan info wheel lint format docs
C_SOURCES = $(shell find csrc -name '*.c' -o -name '*.h')
# Both cores (pytest-xdist), then the tests that judge timings alone (a second worker's
# load on a 2-core machine is noise they must not see); the slowest tests are listed. A
# worker that crashes fails the run, naming its test (XDIST): a restarted worker once left
# the run waiting at 99% instead.
PYTEST = python3 -m pytest -q -rs --durations=15
XDIST = -n auto --dist loadgroup --max-worker-restart=0
test:   ## the test suite (what CI runs): per-variant tests take one variant per structural class + the small ones
	tools/dev sh -c '$(PYTEST) $(XDIST) -m "not timing" && $(PYTEST) -m timing'
test-full: ## every test over every variant the device lists (on a GPU: minutes; on lavapipe: over an hour cold)
	tools/dev sh -c '$(PYTEST) $(XDIST) -m "not timing" --full && $(PYTEST) -m timing --full'
bench:  ## the main job: helios bench on the default device (small shapes; lavapipe is a CPU)
	tools/dev helios bench --suite=cuda --shapes=small --iters=10 --warmup=3 --repeats=2 --out=build/bench/latest.json --force
	@echo "make bench: helios runs inside the development box: tools/dev helios ... (not on the host's PATH)" >&2
asan:   ## the suite with the C core under AddressSanitizer and UBSan
	HELIOS_ASAN=1 tools/dev python3 -m pytest -q -rs -p no:cacheprovider
info:
	tools/dev helios info
wheel:  ## a manylinux wheel for the dev root's Python in dist/ (SPIR-V inside; at run time it needs only libc and a Vulkan loader + driver)
	tools/dev tools/build_wheel.sh dist
lint:   ## ruff (lint + format check), clang-format check, mypy over the whole package, stubtest of _helios.pyi against the extension (run by CI)
	tools/dev sh -c 'ruff check . && ruff format --check . && clang-format --dry-run -Werror $(C_SOURCES) && mypy && python3 -m mypy.stubtest helios._helios'
format: ## rewrite Python and C in the project's format
	tools/dev sh -c 'ruff check --fix . && ruff format . && clang-format -i $(C_SOURCES)'
docs:   ## the manual (Sphinx + MyST; guides, status, API reference from the docstrings) in build/docs/index.html; warnings are errors
	tools/dev sphinx-build -q -W --keep-going -b html docs build/docs
