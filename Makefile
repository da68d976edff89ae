# Strata build. `make` builds the library and tools; `make test` runs the Criterion suite.
# Variables: BUILD (output dir), SAN (asan|tsan), CUDA (0 forces CUDA off), PREFIX (install).

# Plain `make` is `all` (the archive, libstrata.so with its soname link, the plugins, the
# build tree's strata.pc and the tools), whatever rule comes first below.
.DEFAULT_GOAL := all

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
# CUDA is built only when the whole toolkit is there: nvcc alone (no cuBLAS) is not enough.
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIB  ?= $(patsubst %/,%,$(firstword $(dir $(wildcard $(CUDA_HOME)/lib64/libcublas.so $(CUDA_HOME)/lib/x86_64-linux-gnu/libcublas.so))))
# A C program that includes cublas_v2.h and links cuBLAS + cudart must build, or CUDA is off.
CUDA_KIT  := $(if $(and $(NVCC),$(CUDA_LIB),$(filter-out 0,$(or $(CUDA),1))),$(shell printf '\043include <cublas_v2.h>\nint main(void){cublasHandle_t h; return (int)cublasCreate(&h);}\n' | \
             $(CC) -x c - -I$(CUDA_HOME)/include -L$(CUDA_LIB) -lcublas -lcudart -o /dev/null 2>/dev/null && echo yes))
CUDA    ?= $(if $(CUDA_KIT),1,0)
ifeq ($(MAKELEVEL)$(CUDA)$(origin CUDA),00file)
ifneq ($(NVCC),)
$(info note: $(NVCC) found but not cuBLAS/cudart (cublas_v2.h, libcublas.so under $(CUDA_HOME)); building without the cuda driver)
endif
endif
V       ?= 0
JOBS    ?= 2
Q       := $(if $(filter 1,$(V)),,@)

# -fno-math-errno: sqrtf never sets errno here, so loops that call it vectorise (AdamW's update
# ran scalar with it); IEEE square roots and quotients are the same bits either way.
# -ffp-contract=off: no a * b + c fused into one rounding, with any compiler (GCC's -std=c11
# already means it; clang would contract by default): every clone rounds as the C says.
CSTD     := -std=c11 -D_GNU_SOURCE -fno-math-errno -ffp-contract=off
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith
OPT      ?= -O3 -g
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) -fPIC -pthread -MMD -MP -Iinclude -I. $(SANFLAGS) $(EXTRA_CFLAGS)
LIBS      = -lxsmm -lxsmmnoblas -lfftw3f -lhwloc -lnuma -lz -lpthread -lm -ldl
TESTLIBS := -lcriterion

ifeq ($(SAN),asan)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -DSTRATA_SANITIZED
OPT      := -O1 -g
else ifeq ($(SAN),fuzz)
SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined -DSTRATA_SANITIZED
OPT      := -O1 -g
else ifeq ($(SAN),tsan)
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer -DSTRATA_SANITIZED
OPT      := -O1 -g
endif

LIB_DIRS := base arch alloc kernel drivers drivers/cpu drivers/shm drivers/net data nn strategy \
            strategy/runtime strategy/process strategy/checkpoint rl

# CUDA: with nvcc, the cuda driver (drivers/cuda: host C + kernels) is built as its own shared
# object, libstrata-cuda.so, which links cuBLAS and the CUDA runtime; the library loads it the
# first time the CUDA accelerator is asked for, so CPU-only programs never map those libraries.
# Without a GPU at run time the driver's probe says so.
CUDA_SRCS := $(wildcard drivers/cuda/*.cu)
CUDA_C_SRCS := $(wildcard drivers/cuda/*.c)
ifeq ($(CUDA),1)
CUDA_OBJS := $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o) $(CUDA_C_SRCS:%.c=$(BUILD)/obj/%.o)
CUDA_PLUGIN := $(BUILD)/libstrata-cuda.so
TEST_CUDA_CFLAGS := -DSTRATA_HAVE_CUDA
CUDA_LIBS := -L$(CUDA_LIB) -Wl,-rpath,$(CUDA_LIB) -lcublasLt -lcublas -lcudart -lstdc++
NVFLAGS   := -O3 -std=c++17 -Xcompiler -fPIC,-fno-exceptions,-fno-rtti -Iinclude -I. -MMD -MP \
             -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# Which CUDA calls allocate on the host (decision 0051): run by tools/gpu-check.sh on a GPU.
CUDA_TOOLS := $(BUILD)/bin/strata-cuda-heap-probe
endif

LIB_SRCS := $(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

# Failure injection (base/faults.h) exists only in the test suite's archive: the sources that
# hold an injection point are built a second time with STRATA_TESTING, and those objects
# replace theirs in libstrata-testing.a. libstrata.a and libstrata.so hold none of it.
FAULT_SRCS := $(shell grep -l 'STRATA__FAULT\|STRATA__INJECTED\|STRATA_TESTING' $(LIB_SRCS))
TESTING_OBJS := $(filter-out $(FAULT_SRCS:%.c=$(BUILD)/obj/%.o),$(LIB_OBJS)) \
                $(FAULT_SRCS:%.c=$(BUILD)/obj-testing/%.o)
TESTING_LIB := $(BUILD)/libstrata-testing.a

TOOL_SRCS := $(wildcard tools/strata-*.c)
TOOLS     := $(TOOL_SRCS:tools/%.c=$(BUILD)/bin/%)
MPICC     := $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
ifeq ($(SAN),)
TOOLS     += $(BUILD)/bin/strata-bench-mpi $(BUILD)/bin/strata-bench-procs \
             $(BUILD)/bin/strata-bench-sched $(BUILD)/bin/strata-bench-link \
             $(BUILD)/bin/strata-count-isend.so
endif
endif
# The MPI link (drivers/mpi) is its own shared object, libstrata-mpi.so, linked with Open MPI
# (mpicc's flags); the library loads it when the mpi strategy is asked for.
ifneq ($(MPICC),)
MPI_PLUGIN := $(BUILD)/libstrata-mpi.so
MPI_CFLAGS := $(shell $(MPICC) --showme:compile)
MPI_LIBS   := $(shell $(MPICC) --showme:link)
endif
# oneDNN (libdnnl-dev): strata-bench-gemm --bf16 measures its bf16 matmul (issue 21's choice).
ifneq ($(wildcard /usr/include/oneapi/dnnl/dnnl.h),)
$(BUILD)/obj/tools/strata-bench-gemm.o: EXTRA_CFLAGS += -DSTRATA_HAVE_DNNL
$(BUILD)/bin/strata-bench-gemm: TOOL_EXTRA_LIBS := -ldnnl -lgomp
endif
TOOL_COMMON := $(filter-out tools/strata-%.c,$(wildcard tools/*.c))
TOOL_COMMON_OBJS := $(TOOL_COMMON:%.c=$(BUILD)/obj/%.o)
# strata-train's parts (tools/train/, private header train.h): linked into that tool only.
TRAIN_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/train/*.c))
$(BUILD)/bin/strata-train: $(TRAIN_OBJS)
$(BUILD)/bin/strata-train: TOOL_EXTRA_OBJS := $(TRAIN_OBJS)
# HDF5 (Debian's libhdf5-dev, serial): strata-train's reader (tools/train/h5.c) and the test
# binary link it; the library never does (docs/decisions/0021).
HDF5_CFLAGS := $(or $(shell pkg-config --cflags hdf5 2>/dev/null),-I/usr/include/hdf5/serial)
HDF5_LIBS   := $(or $(shell pkg-config --libs hdf5 2>/dev/null),-lhdf5_serial)
H5_OBJ      := $(BUILD)/obj/tools/train/h5.o
$(H5_OBJ): EXTRA_CFLAGS += $(HDF5_CFLAGS)
$(BUILD)/obj/tools/train/predict.o: EXTRA_CFLAGS += $(HDF5_CFLAGS)
$(BUILD)/obj/tools/train/mesh.o: EXTRA_CFLAGS += $(HDF5_CFLAGS)
$(BUILD)/bin/strata-train: TOOL_EXTRA_LIBS := $(HDF5_LIBS)

TEST_SRCS := $(sort $(wildcard tests/*/*.c))
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(BUILD)/tests/strata-tests

# Objects are kept: they are the incremental build.
.SECONDARY:

.PHONY: FORCE all lib tools test test-suite run-main asan tsan fuzz fuzz-run deps test-deps bench-deps install uninstall clean run bench-coll bench-procs bench-precision bench-kernels bench-grad-allreduce bench-train bench-gpu bench-ckpt bench-trace bench-insitu bench-sharded bench-invariant bench-conv bench-scale bench-contention bench-latency bench-surrogates bench-all check-heap
all: lib tools

lib: $(BUILD)/libstrata.a $(BUILD)/libstrata.so $(BUILD)/libstrata.so.0 $(CUDA_PLUGIN) \
     $(MPI_PLUGIN) $(BUILD)/pkgconfig/strata.pc
tools: $(TOOLS) $(CUDA_TOOLS)

# A change of compiler or flags rebuilds every object (the stamp changes only then).
FLAGS_STAMP := $(BUILD)/.flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@# a build without the cuda driver must not load a plugin an earlier CUDA build left
	@$(if $(filter 1,$(CUDA)),:,rm -f $(BUILD)/libstrata-cuda.so)
	@echo '$(CC) $(CSTD) $(WARN) $(OPT) $(SANFLAGS) $(LIBS) $(CUDA) $(CUDA_LIBS)' | cmp -s - $@ || \
	        echo '$(CC) $(CSTD) $(WARN) $(OPT) $(SANFLAGS) $(LIBS) $(CUDA) $(CUDA_LIBS)' > $@
FORCE:

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

# The TSan start-up shim must not itself be instrumented: it runs before TSan is ready.
$(BUILD)/obj/tests/support/tsan_criterion_shim.o: SANFLAGS := $(if $(filter tsan,$(SAN)),-D__SANITIZE_THREAD__,)

$(BUILD)/obj-testing/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS_ALL) -DSTRATA_TESTING -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/libstrata.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(TESTING_LIB): $(TESTING_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# Only the public API is exported (strata.map); internal symbols stay inside the library.
$(BUILD)/libstrata.so: $(LIB_OBJS) strata.map
	$(Q)$(CC) -shared $(SANFLAGS) -Wl,-soname,libstrata.so.0 -Wl,--version-script=strata.map \
	        -o $@ $(LIB_OBJS) $(LIBS)

# The soname a program linked with build/libstrata.so asks the dynamic linker for.
$(BUILD)/libstrata.so.0: $(BUILD)/libstrata.so
	$(Q)ln -sf libstrata.so $@

# strata.pc with its directories: the build tree's (headers in the sources, libraries in
# $(BUILD)), or an install's (PREFIX). Its Libs carry an rpath, so a program linked with the
# documented line finds libstrata.so.0 without LD_LIBRARY_PATH.
STRATA_VERSION := $(shell sed -n 's/.*STRATA_VERSION_STRING "\(.*\)"/\1/p' include/strata/version.h)
pc = sed -e 's|@LIBDIR@|$(1)|g' -e 's|@INCLUDEDIR@|$(2)|g' -e 's|@VERSION@|$(STRATA_VERSION)|' \
         strata.pc.in > $(3)
$(BUILD)/pkgconfig/strata.pc: strata.pc.in include/strata/version.h
	@mkdir -p $(dir $@)
	$(Q)$(call pc,$(abspath $(BUILD)),$(CURDIR)/include,$@)

# The MPI link plugin: one object and Open MPI; it exports one function (drivers/mpi/plugin.map).
# Under a sanitizer the runtime is the program's (clang's TSan is not linked into a .so).
$(BUILD)/obj/drivers/mpi/mpi.o: EXTRA_CFLAGS += $(MPI_CFLAGS) -fvisibility=hidden
$(BUILD)/libstrata-mpi.so: $(BUILD)/obj/drivers/mpi/mpi.o drivers/mpi/plugin.map
	$(Q)$(CC) -shared $(SANFLAGS) -Wl,--version-script=drivers/mpi/plugin.map \
	        $(if $(SAN),,-Wl,--no-undefined) -o $@ $< $(MPI_LIBS)

# The CUDA driver plugin: its objects, cuBLAS and the CUDA runtime; it exports one function
# (drivers/cuda/plugin.map) and resolves everything else within itself (--no-undefined).
$(CUDA_C_SRCS:%.c=$(BUILD)/obj/%.o): EXTRA_CFLAGS += -I$(CUDA_HOME)/include -fvisibility=hidden
$(BUILD)/libstrata-cuda.so: $(CUDA_OBJS) drivers/cuda/plugin.map
	$(Q)$(CC) -shared $(SANFLAGS) -Wl,--version-script=drivers/cuda/plugin.map \
	        -Wl,--no-undefined -o $@ $(CUDA_OBJS) $(CUDA_LIBS) -lhwloc -lpthread -lm

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(TOOL_COMMON_OBJS) $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(SANFLAGS) -pthread -o $@ $< $(TOOL_EXTRA_OBJS) $(TOOL_COMMON_OBJS) $(BUILD)/libstrata.a \
	        $(LIBS) $(TOOL_EXTRA_LIBS)

$(BUILD)/bin/strata-cuda-heap-probe: tools/cuda/heap_probe.cu tools/heapcount.c tools/heapcount.h
	@mkdir -p $(dir $@)
	$(Q)$(NVCC) -O2 -std=c++17 -I. -Iinclude -o $@ tools/cuda/heap_probe.cu tools/heapcount.c \
	        -Xlinker --export-dynamic -L$(CUDA_LIB) -Xlinker -rpath,$(CUDA_LIB) -lcublasLt -lcublas -ldl

# The Open MPI peer of the collectives benchmark: built only where mpicc exists.
$(BUILD)/bin/strata-bench-mpi: tools/mpi/strata-bench-mpi.c
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) -O3 -o $@ $<

# Strata across processes against the same MPI_Allreduce, in one program (mpicc + the library).
$(BUILD)/bin/strata-bench-procs: tools/mpi/strata-bench-procs.c tools/timing.c $(BUILD)/libstrata.a \
                                  $(MPI_PLUGIN)
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) -O3 $(CSTD) -Iinclude -I. -o $@ $< tools/timing.c $(BUILD)/libstrata.a $(LIBS)

# The schedule's time and MPI messages per all_reduce (its MPI_Isend wraps the link's: exported).
$(BUILD)/bin/strata-bench-sched: tools/mpi/strata-bench-sched.c tools/timing.c $(BUILD)/libstrata.a \
                                  $(MPI_PLUGIN)
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) -O3 $(CSTD) -Iinclude -I. -rdynamic -o $@ $< tools/timing.c $(BUILD)/libstrata.a \
	        $(LIBS)

# MPI messages a process sends, preloaded into any program under mpirun (bench-sharded-procs.sh).
$(BUILD)/bin/strata-count-isend.so: tools/mpi/strata-count-isend.c
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) -O2 $(CSTD) -shared -fPIC -o $@ $<

# alpha and beta of the link between two ranks (ping-pong; plain MPI and the tools' median).
$(BUILD)/bin/strata-bench-link: tools/mpi/strata-bench-link.c tools/timing.c
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) -O3 $(CSTD) $(WARN) -I. -o $@ $< tools/timing.c

# -rdynamic: the CUDA allocation counters the test binary defines (tests/support/cudacount.c)
# must be what the CUDA plugin's calls resolve to.
$(TEST_BIN): $(TEST_OBJS) $(TOOL_COMMON_OBJS) $(H5_OBJ) $(TESTING_LIB) $(CUDA_PLUGIN) $(MPI_PLUGIN)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(SANFLAGS) -pthread -rdynamic -o $@ $(TEST_OBJS) $(TOOL_COMMON_OBJS) $(H5_OBJ) \
	        $(TESTING_LIB) $(LIBS) $(HDF5_LIBS) $(TESTLIBS) -ldl

# Tests find the build through these definitions.
$(TEST_OBJS): EXTRA_CFLAGS += -DSTRATA_TESTING $(TEST_CUDA_CFLAGS) -DSTRATA_BUILD_DIR='"$(abspath $(BUILD))"' \
        -DSTRATA_SOURCE_DIR='"$(CURDIR)"' -DSTRATA_SAN='"$(SAN)"' $(HDF5_CFLAGS)

# The suite: Criterion's own summary line closes it. The heap and install checks are tests too.
# `make test` and `make run` check their system dependencies first (installing what is
# missing, idempotently), so that each works alone on a fresh clone.
test: test-deps
	+$(Q)$(MAKE) --no-print-directory test-suite

# The log is kept (build/test.log); a failed run repeats its failures last, where a CI log's
# tail shows them, since Criterion prints them as they happen among other tests' output.
test-suite: all $(TEST_BIN)
	$(Q){ $(TEST_BIN) --jobs $(JOBS) $(TESTARGS) 2>&1; echo $$? > $(BUILD)/test.rc; } \
	        | tee $(BUILD)/test.log; rc=$$(cat $(BUILD)/test.rc); \
	if [ "$$rc" != 0 ]; then echo "== the failures of this run (from $(BUILD)/test.log):"; \
	        grep -E -A3 '\[FAIL\]|Assertion|Timed out|CRASH|signal' $(BUILD)/test.log \
	                | grep -v 'take turns' | tail -60; fi; exit $$rc

asan:
	+$(Q)$(MAKE) --no-print-directory BUILD=build-asan SAN=asan CUDA=0 test \
	        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	        LSAN_OPTIONS=suppressions=$(CURDIR)/tests/support/lsan.supp

# clang's TSan: with tests/support/tsan_criterion_shim.c, Criterion's runner starts under it.
# A race report stops the test that raced (halt_on_error), so the suite fails on it.
tsan:
	+$(Q)$(MAKE) --no-print-directory BUILD=build-tsan SAN=tsan CUDA=0 CC=clang test \
	        TSAN_OPTIONS=halt_on_error=1

# libFuzzer on the checkpoint and weights loaders and the IDX/gzip reader, FUZZ_SECONDS each
# (default 60), from the kept corpora (tools/fuzz/corpus/<target>).
FUZZ_SECONDS ?= 60
fuzz: test-deps
	+$(Q)$(MAKE) --no-print-directory BUILD=build-fuzz SAN=fuzz CUDA=0 CC=clang fuzz-run

# Each target gets FUZZ_SECONDS; a finding fails the run (the log's tail is shown either way).
FUZZ_TARGETS := ckpt idx weights
fuzz-run: $(BUILD)/libstrata.a
	@mkdir -p $(BUILD)/bin
	$(Q)for t in $(FUZZ_TARGETS); do \
	        $(CC) $(CFLAGS_ALL) -fsanitize=fuzzer,address,undefined tools/fuzz/fuzz-$$t.c \
	                $(BUILD)/libstrata.a $(LIBS) -o $(BUILD)/bin/fuzz-$$t || exit 1; \
	        mkdir -p $(BUILD)/fuzz-corpus/$$t && cp tools/fuzz/corpus/$$t/* $(BUILD)/fuzz-corpus/$$t/; \
	        echo "== fuzz-$$t, $(FUZZ_SECONDS) s"; \
	        $(BUILD)/bin/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	                -print_final_stats=1 $(BUILD)/fuzz-corpus/$$t > $(BUILD)/fuzz-$$t.log 2>&1; \
	        rc=$$?; tail -12 $(BUILD)/fuzz-$$t.log; [ $$rc = 0 ] || exit $$rc; \
	done

# System dependencies in three sets, each installed (non-interactively, idempotently, only what
# is missing) by the target that needs it (issue 58, item 19):
#  - DEPS, `make deps` (and so `make run`, `make all` on a fresh machine): what the library,
#    strata-train and strata-plot need to build and run the main job, and its data (FFTW:
#    the spectral convolutions, decision 0061);
#  - TEST_DEPS, added by `make test` (asan, tsan): the suite's framework and what its tests
#    drive: Open MPI (the mpi strategy), gfortran (the Fortran bindings), PyTorch (a
#    safetensors export loaded), a threaded OpenBLAS (the host-BLAS test links it as an
#    application would; Strata never does), clang (tsan, fuzz), NumPy, pip and setuptools
#    (the Python package installed offline), h5py (--predict's file read as a user would);
#  - BENCH_DEPS, added by every `make bench-*`: the peers' needs (PyTorch, Open MPI, gfortran
#    for the Fortran example, LibTorch's C++ API), oneDNN (strata-bench-gemm --bf16), bc (the
#    scripts' ratios).
DEPS       := build-essential pkg-config libhwloc-dev libnuma-dev zlib1g-dev libxsmm-dev \
              libhdf5-dev libfftw3-dev dataset-fashion-mnist gnuplot-nox fonts-liberation
TEST_DEPS  := libcriterion-dev clang openmpi-bin libopenmpi-dev gfortran python3-torch \
              libopenblas-pthread-dev python3-numpy python3-pip python3-setuptools python3-h5py \
              python3-onnx
BENCH_DEPS := bc openmpi-bin libopenmpi-dev gfortran python3-torch libdnnl-dev libtorch-dev
# $(call install_missing,PACKAGES): apt-get install those of PACKAGES not installed yet.
install_missing = @missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
	        grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	        echo "installing:$$missing"; \
	        SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	        $$SUDO apt-get update -qq && \
	        DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
deps:
	$(call install_missing,$(DEPS))

test-deps: deps
	$(call install_missing,$(TEST_DEPS))

bench-deps: deps
	$(call install_missing,$(BENCH_DEPS))

# The main job: the default model on Fashion-MNIST with the default strategy; its metrics and
# their curves land in $(BUILD)/run/ (metrics.csv, metrics.png).
run: deps
	+$(Q)$(MAKE) --no-print-directory run-main

run-main: tools
	@mkdir -p $(BUILD)/run
	$(BUILD)/bin/strata-train --metrics-csv $(BUILD)/run/metrics.csv
	tools/strata-plot $(BUILD)/run/metrics.csv

bench-coll: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-coll.sh

# Processes: training (spawn, mpi) against ddp's threads and PyTorch DDP, and all_reduce across
# processes against Open MPI's MPI_Allreduce.
bench-procs: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-procs.sh

bench-precision: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-precision.sh

# The CPU kernel sets: GFLOP/s over the step's GEMMs beside the measured peaks, and training
# against PyTorch fp32 and autocast (decision 0034).
bench-kernels: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-kernels.sh $(REPS)

# Gradients all-reduced in f32 or bf16 on 2 devices: speed (ddp, spawn, PyTorch DDP) and
# accuracy after 10 epochs.
bench-grad-allreduce: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-grad-allreduce.sh $(REPS)

# One GPU: Strata against PyTorch eager and Lightning (both must be installed there).
bench-gpu: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-gpu.sh $(REPS)

# Checkpoint save/load against torch.save/torch.load and the fsync floors.
bench-ckpt: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-ckpt.sh $(REPS)

# What --trace costs, against PyTorch's profiler.
bench-trace: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-trace.sh $(REPS)

# The in-situ example (C, Fortran; alone and mpirun -np 2) against PyTorch on TorchFort's
# advection workload (tools/peers/torch_insitu.py), with the step's floor.
bench-insitu: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-insitu.sh $(REPS) $(STEPS)

bench-train: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-train.sh $(REPS)

# The sharded strategies (issue 33): zero1, zero2 (and fsdp once strata-train accepts it) on 2
# devices against single and ddp, against PyTorch's ZeroRedundancyOptimizer over DDP/Gloo, and
# their per-device plan at 1, 2 and 4 devices beside the ZeRO formulas. EPOCHS per run (1).
bench-sharded: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-sharded.sh $(or $(REPS),5) $(or $(EPOCHS),1)

# Convolutional models against PyTorch: TorchFort's FCN in-situ, the Fashion-MNIST CNN.
bench-conv: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-conv.sh

# Prediction latency of the inference-only runtime against PyTorch eager and LibTorch (C++
# peer built against libtorch-dev), batch 1 and 16, the default MLP and the CNN (issue 54).
bench-latency: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-latency.sh $(or $(REPS),5) $(or $(ITERS),2000)

# Training beside busy threads of other processes (issue 58, item 17): quiet against loaded.
bench-contention: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-contention.sh $(or $(REPS),5)

# The surrogate examples (issue 55): FNO-2D, a MeshGraphNet-style surrogate and the ViT
# (examples/vit.sh) against their PyTorch peers (tools/peers/torch_fno.py, torch_mesh.py,
# torch_vit.py): validation error, speed, ddp on 2.
bench-surrogates: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-surrogates.sh $(or $(REPS),3) $(or $(EPOCHS),10)

bench-invariant: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	tools/bench-invariant.sh $(or $(REPS),5) $(or $(EPOCHS),1)

# The alpha-beta model of the collectives at 2 ... 16 384 processes (issue 46, decision 0037):
# alpha and beta of shared memory and of TCP between network namespaces, the sum kernel's
# rate, the model checked against runs at PROCS processes here, and its curves
# ($(BUILD)/scale/scale.png, drawn by gnuplot).
bench-scale: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	BUILD=$(BUILD) tools/bench-scale.sh $(or $(REPS),5) $(or $(PROCS),2 4 8 16)

# Every bench behind docs/benchmarks.md's summary, each once (REPS alternated pairs, default
# 5), then the summary rewritten from the rows measured quietly (load average <= 1.5 before
# and after each bench; decision 0073). BENCH_QUICK=1: tiny sizes, into a copy of the file.
bench-all: bench-deps
	+$(Q)$(MAKE) --no-print-directory tools
	BUILD=$(BUILD) tools/bench-all.sh

install: lib tools
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/strata $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	        $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/bin/strata-train tools/strata-plot tools/strata-from-torch \
	        tools/strata-to-torch $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libstrata.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libstrata.so $(DESTDIR)$(PREFIX)/lib/libstrata.so.0
	$(if $(CUDA_PLUGIN),install -m 755 $(CUDA_PLUGIN) $(DESTDIR)$(PREFIX)/lib/)
	$(if $(MPI_PLUGIN),install -m 755 $(MPI_PLUGIN) $(DESTDIR)$(PREFIX)/lib/)
	ln -sf libstrata.so.0 $(DESTDIR)$(PREFIX)/lib/libstrata.so
	install -m 644 include/strata/*.h $(DESTDIR)$(PREFIX)/include/strata/
	install -m 644 fortran/strata.f90 $(DESTDIR)$(PREFIX)/include/strata/
	$(call pc,$(PREFIX)/lib,$(PREFIX)/include,$(DESTDIR)$(PREFIX)/lib/pkgconfig/strata.pc)

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/strata $(DESTDIR)$(PREFIX)/lib/libstrata.* \
	       $(DESTDIR)$(PREFIX)/lib/libstrata-cuda.so $(DESTDIR)$(PREFIX)/lib/libstrata-mpi.so \
	       $(DESTDIR)$(PREFIX)/lib/pkgconfig/strata.pc $(DESTDIR)$(PREFIX)/bin/strata-train \
	       $(DESTDIR)$(PREFIX)/bin/strata-plot $(DESTDIR)$(PREFIX)/bin/strata-from-torch \
	       $(DESTDIR)$(PREFIX)/bin/strata-to-torch

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(LIB_OBJS:.o=.d) $(CUDA_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(TOOL_SRCS:%.c=$(BUILD)/obj/%.d) $(TOOL_COMMON_OBJS:.o=.d) \
         $(TRAIN_OBJS:.o=.d) $(TESTING_OBJS:.o=.d) $(BUILD)/obj/drivers/mpi/mpi.d

# Reinforcement learning in situ (issue 56): the cart-pole example under TD3, SAC and PPO against
# its PyTorch peer (tools/peers/torch_rl_cartpole.py): episodes to solve, agent throughput.
.PHONY: bench-rl
bench-rl: bench-deps
	+$(Q)$(MAKE) --no-print-directory lib
	tools/bench-rl.sh $(or $(REPS),3) $(or $(STEPS),150000)
