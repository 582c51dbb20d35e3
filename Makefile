# The two commands that matter: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
SCENARIO  ?= examples/llama3-8b-h100x8.yaml
WERROR    := $(if $(CI),ON,OFF)
CMAKE_ARGS ?=

SHARDSCOPE := $(BUILD_DIR)/cli/shardscope

.PHONY: all deps configure build run test clean format

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSHARDSCOPE_WERROR=$(WERROR) $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD_DIR) --parallel $(JOBS)

run: build
	@$(SHARDSCOPE) simulate $(SCENARIO) --json $(BUILD_DIR)/default-summary.json --trace $(BUILD_DIR)/default-trace.json

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --parallel $(JOBS)

format:
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
