# The two commands that matter: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
SCENARIO  ?= examples/llama3-8b-h100x8.yaml
WERROR    := $(if $(CI),ON,OFF)
CMAKE_ARGS ?=

SHARDSCOPE := $(BUILD_DIR)/cli/shardscope

.PHONY: all deps configure build run test gui screenshots clean format

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

# The desktop GUI on the default scenario (needs a display; Qt is installed by install-deps).
gui: build
	@$(BUILD_DIR)/gui/shardscope-gui $(SCENARIO)

# Refreshes docs/screenshots/*.png, rendered offscreen.
screenshots: build
	@mkdir -p docs/screenshots
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui $(SCENARIO) --screenshot docs/screenshots/default.png
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui $(SCENARIO) --zoom 1600:1800 --screenshot docs/screenshots/backward-zoom.png
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui examples/llama2-13b-fsdp1-hybrid.yaml --set fsdp.backward_prefetch=BACKWARD_PRE \
	  --baseline-set fsdp.backward_prefetch=none --screenshot docs/screenshots/compare-prefetch.png
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui $(SCENARIO) --budget 80GiB --screenshot docs/screenshots/sweep.png \
	  --sweep "fsdp.reshard_after_forward=true,false;training.activation_checkpointing=none,selective_op,full;training.micro_batch=1,2,4"

format:
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
