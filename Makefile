# Every target runs inside the Debian 13 dev root (scripts/dev builds it once).
.PHONY: test bench asan info wheel lint format docs
C_SOURCES = $(shell find csrc -name '*.c' -o -name '*.h')
test:   ## the test suite on lavapipe (what CI runs)
	scripts/dev python3 -m pytest -q -rs
bench:  ## the main job: helios bench on the default device (small shapes; lavapipe is a CPU)
	scripts/dev helios bench --suite=cuda --shapes=small --iters=10 --warmup=3 --repeats=2 --out=build/bench/latest.json --force
asan:   ## the suite with the C core under AddressSanitizer and UBSan
	HELIOS_ASAN=1 scripts/dev python3 -m pytest -q -rs -p no:cacheprovider
info:
	scripts/dev helios info
wheel:  ## a manylinux wheel for the dev root's Python in dist/ (SPIR-V inside; at run time it needs only libc and a Vulkan loader + driver)
	scripts/dev scripts/build_wheel.sh dist
lint:   ## ruff (lint + format check), clang-format check, mypy over the API layer (run by CI)
	scripts/dev sh -c 'ruff check . && ruff format --check . && clang-format --dry-run -Werror $(C_SOURCES) && mypy'
format: ## rewrite Python and C in the project's format
	scripts/dev sh -c 'ruff check --fix . && ruff format . && clang-format -i $(C_SOURCES)'
docs:   ## the API reference from the docstrings (build/docs/index.html); warnings are errors
	scripts/dev sphinx-build -q -W --keep-going -b html docs/api build/docs
