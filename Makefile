# The two commands that matter: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
JOBS      ?= $(shell nproc)
SCENARIO  ?= examples/llama3-8b-h100x8.yaml
# CI is strict: warnings are errors and the GUI must build, so a missing package fails CI instead
# of silently shrinking what it tests.
WERROR    := $(if $(CI),ON,OFF)
WITH_QT   ?= $(if $(CI),ON,AUTO)
WITH_CUDA ?= $(if $(CI),ON,AUTO)
CMAKE_ARGS ?=
# CI builds from scratch on two cores: a unity build (each target's .cpp files compiled in batches
# of 16, so the heavy headers are parsed once per batch; clang-tidy then reads the same batches)
# without debug information takes a third of the default build's time. The code must stay
# unity-clean (no two files of a target with the same file-local name): `make CI=1 build` checks.
UNITY     ?= $(if $(CI),ON,OFF)
OPT_FLAGS ?= $(if $(CI),-O2 -DNDEBUG,-O2 -g -DNDEBUG)
# Seconds each fuzz target runs under `make fuzz` (CI runs each for FUZZ_SECONDS=20).
FUZZ_SECONDS ?= 300

SHARDSCOPE := $(BUILD_DIR)/cli/shardscope

.PHONY: all deps configure build run test test-asan fuzz sanitize-build gui screenshots install-check \
        clean format format-check tidy gpu-build pytorch-env test-pytorch

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(OPT_FLAGS)" -DCMAKE_UNITY_BUILD=$(UNITY) -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
	  -DSHARDSCOPE_WERROR=$(WERROR) -DSHARDSCOPE_WITH_QT=$(WITH_QT) -DSHARDSCOPE_WITH_CUDA=$(WITH_CUDA) $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD_DIR) --parallel $(JOBS)

run: build
	@$(SHARDSCOPE) simulate $(SCENARIO) --json $(BUILD_DIR)/default-summary.json --trace $(BUILD_DIR)/default-trace.json

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --parallel $(JOBS) -LE 'pytorch|timing'
	@cd $(BUILD_DIR) && ctest --output-on-failure -L timing
	@scripts/optional-parts $(BUILD_DIR)

# The PyTorch oracle suites: real FSDP2 and FSDP1 (CPU, gloo and the fake process group) against
# shardscope, in a venv of pinned PyPI packages under $(BUILD_DIR) (tests/pytorch/README.md).
PYTORCH_VENV := $(BUILD_DIR)/pytorch-venv
pytorch-env:
	@scripts/pytorch-env $(PYTORCH_VENV)

test-pytorch: build pytorch-env
	@cd $(BUILD_DIR) && ctest --output-on-failure --parallel $(JOBS) -L pytorch

# A build to carry to a lent GPU machine (no package registry there): Release, CUDA required, no
# GUI, fmt header-only and yaml-cpp and the C++ runtime static (docs/exec.md); unity batches, about
# 3 minutes on a 2-core machine.
GPU_DIR ?= build-gpu
gpu-build: deps
	@cmake -S . -B $(GPU_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDSCOPE_PORTABLE=ON \
	  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
	  -DSHARDSCOPE_WITH_CUDA=ON -DSHARDSCOPE_WITH_QT=OFF $(CMAKE_ARGS)
	@cmake --build $(GPU_DIR) --parallel $(JOBS) --target shardscope cuda_tests executor_bench

# One clang build (-O1, ASan + UBSan, libFuzzer's coverage counters) serves both the sanitizer
# tests and the fuzzers, so CI compiles the project under sanitizers once. No comparison tracing
# (trace-cmp): it would slow every test several-fold for 20 s of fuzzing per target.
sanitize-build: deps
	@cmake --preset sanitize -DSHARDSCOPE_WITH_QT=$(WITH_QT) $(CMAKE_ARGS)
	@cmake --build $(ASAN_DIR) --parallel $(JOBS)

# The unit, golden and GUI tests under AddressSanitizer and UBSan (any report fails the test). Left
# out: the suites that drive the whole CLI over every example, plan and published run
# (cli.behaviour, the planned cli.plan_emit cases, docs.examples, published_runs) and the four
# planner tests that search whole spaces, which `make test` runs: under the sanitizers they took
# 20 of the 25 CPU-minutes, in code the other unit tests (the planner's included),
# hostile.acceptance and the fuzzers reach here too.
ASAN_SKIP := ^(cli\.behaviour|cli\.plan_emit\..*-best|docs\.examples|published_runs|Planner\.(FindsExactlyTheTopOfAnExhaustiveSearchWhileSimulatingLess|ConfigurationsWithOnePredictionRankAsOne|TheMemoryRulesHoldOnEveryConfigurationOfTheSpace|SameInputSameAnswerWhateverTheThreads))$$
test-asan: sanitize-build
	@cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  QT_QPA_PLATFORM=offscreen ctest --output-on-failure --parallel $(JOBS) -L 'unit|golden|gui' -E '$(ASAN_SKIP)'

# libFuzzer targets: every reader of user files, each from its seed corpus in fuzz/corpus.
fuzz: sanitize-build
	@scripts/run-fuzzers $(ASAN_DIR) $(FUZZ_SECONDS)

# Installs into a scratch prefix and builds a consumer with find_package(shardscope).
install-check: build
	@scripts/install-check $(BUILD_DIR)

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
	@$(BUILD_DIR)/cli/shardscope run examples/fsdp2-overlap-oracle.yaml --backend host --jitter 0.05 --slow-rank 1:1.2 \
	  --timeline $(BUILD_DIR)/measured-overlap.json > /dev/null
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui $(BUILD_DIR)/measured-overlap.json --screenshot docs/screenshots/measured-beside-plan.png
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui $(SCENARIO) --budget 80GiB --screenshot docs/screenshots/sweep.png \
	  --sweep "fsdp.reshard_after_forward=true,false;training.activation_checkpointing=none,selective_op,full;training.micro_batch=1,2,4"
	@QT_QPA_PLATFORM=offscreen $(BUILD_DIR)/gui/shardscope-gui examples/plan-llama3-8b-2-nodes.yaml --plan either \
	  --screenshot docs/screenshots/plan.png

format:
	@git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cu' | xargs clang-format -i

# Fails when any tracked C++ file differs from what clang-format would write.
format-check:
	@git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cu' | xargs clang-format --dry-run --Werror

# clang-tidy with the checks in .clang-tidy over every translation unit of the build.
tidy: build
	@scripts/run-clang-tidy $(BUILD_DIR)

clean:
	@rm -rf $(BUILD_DIR) $(ASAN_DIR)
