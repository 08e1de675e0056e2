#!/usr/bin/env bash
# Build, test and run streampool. See `./run.sh help`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

# Debian packages the build needs.
PACKAGES=(libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libmimalloc-dev
          cmake ninja-build g++ clang pkg-config
          python3-dev python3-pybind11 python3-pytest python3-numpy nlohmann-json3-dev ccache
          python3-venv python3-pip python3-setuptools python3-wheel python3-distributed
          chromium)  # chromium: the policy report page's test opens it headless

# Build parallelism: the cores, unless STREAMPOOL_JOBS says otherwise.
JOBS="${STREAMPOOL_JOBS:-$(nproc)}"

usage() {
  cat <<EOF
usage: ./run.sh <command> [args]

  deps                 install missing Debian packages (needs root)
  build [type]         configure and build into build/<type> (default Release)
  demo [flags...]      build streampool-demo (Release) and run it; its files go to
                       build/demo/ (--output_dir=DIR elsewhere; --help: its flags)
  test                 build Release, run ctest, then check the installed package
                       (find_package and pkg-config consumers, C and C++,
                       import streampool and a pyACL program from the prefix),
                       static and shared (relocated prefix, exported symbols),
                       and pip install . into a fresh virtual environment
  docs                 API reference of include/streampool with Doxygen into
                       build/docs (installs doxygen if missing; fails on warnings)
  sanitize [which]     ASan+UBSan build in build/asan and TSan build in build/tsan,
                       each running ctest; which = address | thread | all (default)
  fuzz [seconds]       libFuzzer build of the C API fuzzer (clang), run for seconds
                       (default 60) from the committed corpus
  bench [args...]      build Release and run every benchmark; JSON results go to
                       build/bench-results/<name>.json; args go to each benchmark
  gpu-check [--build-only | --no-build]
                       the checks only a GPU can make: builds build/gpu-check
                       (Release, with tests and benchmarks; the GPU benchmark
                       needs the CUDA toolkit) and a bundle of its binaries and
                       their libraries (build/gpu-check/bundle) to carry to a GPU
                       machine; then, where there is a GPU, runs within 8 minutes
                       the gpu-labelled tests, the GPU benchmark (JSON in
                       build/gpu-check/results/), tools/gpu/torch_compare.py and
                       streampool-replay --compare-executor=cuda on traces/lab/,
                       and prints a summary. Without a GPU it only builds.
                       --build-only: build, never run; --no-build: run what an
                       earlier build (or a carried bundle) left, building only
                       if there is none
EOF
}

log() { printf '==> %s\n' "$*" >&2; }

installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

cmd_deps() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  if [[ "$(id -u)" != 0 ]]; then
    echo "missing packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  log "installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# configure <build dir> <build type> [extra cmake args...]
configure() {
  local dir="$1" type="$2"
  shift 2
  # Through ccache where the machine has it: a rebuild of unchanged sources
  # costs nothing, also from another clone (paths below the root are hashed
  # relative to it).
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR="$ROOT"
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" "${launcher[@]}" "$@"
}

# configure_and_build <build dir> <build type> [extra cmake args...]
configure_and_build() {
  configure "$@"
  cmake --build "$1" -j"$JOBS"
}

# build/release is configured one way by every command that builds there
# (build, demo, test, bench): a compiler warning fails it (-Werror), so a
# later command finds nothing to rebuild.
RELEASE_ARGS=(-DSTREAMPOOL_WERROR=ON)

BUILD_TYPES=(Debug Release RelWithDebInfo MinSizeRel)

cmd_build() {
  local type="${1:-Release}" t
  (($# <= 1)) || { echo "run.sh build: one build type at most, got: $*" >&2; exit 2; }
  for t in "${BUILD_TYPES[@]}"; do
    if [[ "$type" == "$t" ]]; then
      cmd_deps
      if [[ "$type" == Release ]]; then
        configure_and_build build/release Release "${RELEASE_ARGS[@]}"
      else
        configure_and_build "build/${type,,}" "$type"
      fi
      return
    fi
  done
  echo "run.sh build: unknown build type '$type' (one of: ${BUILD_TYPES[*]})" >&2
  exit 2
}

cmd_demo() {
  # Only the demo is built. Build output goes to stderr so that stdout is the
  # demo's alone. A later --output_dir among the flags wins over this one.
  cmd_deps >&2
  configure build/release Release "${RELEASE_ARGS[@]}" >&2
  cmake --build build/release -j"$JOBS" --target streampool-demo >&2
  exec "$ROOT/build/release/tools/streampool-demo" --output_dir="$ROOT/build/demo" "$@"
}

install_check() {
  local prefix="$ROOT/build/install-prefix"
  local consumer="$ROOT/build/install-consumer"
  log "install into $prefix"
  rm -rf "$prefix" "$consumer"
  cmake --install build/release --prefix "$prefix"

  log "consumer via find_package(streampool)"
  cmake -S tests/install -B "$consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix"
  cmake --build "$consumer"
  "$consumer/consumer"

  log "consumer via pkg-config"
  local pc flags
  pc="$(find "$prefix" -name streampool.pc -print -quit)"  # lib/ or lib/<multiarch>/
  [[ -n "$pc" ]] || { echo "streampool.pc not installed under $prefix" >&2; exit 1; }
  flags="$(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --cflags --libs --static streampool)"
  # shellcheck disable=SC2086  # flags are a word list
  cc -std=c11 -Wall -Wextra tests/install/consumer.c $flags -o "$consumer/consumer-pkgconfig"
  "$consumer/consumer-pkgconfig"
  # shellcheck disable=SC2086
  c++ -std=c++20 -Wall -Wextra tests/install/consumer_cpp.cc $flags \
    -o "$consumer/consumer_cpp-pkgconfig"
  "$consumer/consumer_cpp-pkgconfig"
  "$consumer/consumer_cpp"
  "$consumer/consumer_cudart"
  # shellcheck disable=SC2086
  c++ -std=c++20 -Wall -Wextra tests/install/consumer_cudart.cc \
    $(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --cflags --libs --static streampool-cudart) \
    -o "$consumer/consumer_cudart-pkgconfig"
  "$consumer/consumer_cudart-pkgconfig"
  "$consumer/consumer_acl"
  # shellcheck disable=SC2086
  c++ -std=c++20 -Wall -Wextra tests/install/consumer_acl.cc \
    $(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --cflags --libs --static streampool-acl) \
    -o "$consumer/consumer_acl-pkgconfig"
  "$consumer/consumer_acl-pkgconfig"

  # The Python package, with the PYTHONPATH the README gives, under Debian's
  # interpreter and under the python3 on PATH when it is the same minor
  # version (the extension's ABI).
  log "import streampool from the prefix"
  local site py
  site="$(find "$prefix" -type d -path '*/site-packages/streampool' -print -quit)"
  [[ -n "$site" ]] || { echo "the Python package is not installed under $prefix" >&2; exit 1; }
  site="$(dirname "$site")"
  for py in /usr/bin/python3 "$(command -v python3)"; do
    if [[ "$("$py" -c 'import sys; print(sys.version_info[:2])')" \
          == "$(/usr/bin/python3 -c 'import sys; print(sys.version_info[:2])')" ]]; then
      PYTHONPATH="$site" "$py" tests/install/consumer.py "$site"
    fi
  done

  # An unchanged pyACL program with only the acl package's directory on
  # PYTHONPATH (docs/acl.md's setting), from the prefix moved elsewhere: the
  # acl package finds the streampool package by a path relative to itself.
  local moved="$ROOT/build/install-prefix-moved"
  log "pyACL program from the prefix moved to $moved"
  rm -rf "$moved"
  mv "$prefix" "$moved"
  for py in /usr/bin/python3 "$(command -v python3)"; do
    if [[ "$("$py" -c 'import sys; print(sys.version_info[:2])')" \
          == "$(/usr/bin/python3 -c 'import sys; print(sys.version_info[:2])')" ]]; then
      PYTHONPATH="$moved/lib/streampool/pyacl" "$py" tests/install/consumer_pyacl.py "$moved"
    fi
  done
  mv "$moved" "$prefix"
  log "install check passed"
}

# check_exports <libstreampool.so>: the dynamic symbol table holds the public
# API only: sp* C functions and streampool:: symbols outside ::internal.
check_exports() {
  local so="$1" symbols bad
  symbols="$(nm -D --defined-only -C "$so" | cut -d' ' -f3-)"
  [[ -n "$symbols" ]] || { echo "$so exports nothing" >&2; exit 1; }
  bad="$(grep -Ev '^(sp[A-Z][A-Za-z0-9]*|((typeinfo|typeinfo name|vtable) for )?streampool::.*)$' \
           <<<"$symbols" || true)"
  bad+="$(grep -E '^((typeinfo|typeinfo name|vtable) for )?streampool::internal::' \
           <<<"$symbols" || true)"
  if [[ -n "$bad" ]]; then
    echo "$so exports symbols outside the public API:" >&2
    echo "$bad" >&2
    exit 1
  fi
  log "$(wc -l <<<"$symbols") exported symbols, all public: $(grep -c '^sp' <<<"$symbols") sp*, $(grep -vc '^sp' <<<"$symbols") streampool::"
}

# The same consumers against a shared build, installed and then moved to
# another prefix (the package must be relocatable). The examples run on the
# shared library too, which proves every public C++ symbol they use is
# exported.
install_check_shared() {
  local build="$ROOT/build/shared"
  local stage="$ROOT/build/install-shared-stage"
  local prefix="$ROOT/build/install-shared"
  local consumer="$ROOT/build/install-consumer-shared"
  log "shared library build ($build)"
  configure_and_build "$build" Release -DBUILD_SHARED_LIBS=ON -DSTREAMPOOL_BUILD_TESTS=OFF \
    -DSTREAMPOOL_BUILD_BENCH=OFF -DSTREAMPOOL_BUILD_TOOLS=OFF -DSTREAMPOOL_BUILD_EXAMPLES=ON \
    -DSTREAMPOOL_WERROR=ON
  run_ctest "$build"

  log "install into $stage, then move to $prefix"
  rm -rf "$stage" "$prefix" "$consumer"
  cmake --install "$build" --prefix "$stage"
  mv "$stage" "$prefix"
  local so
  so="$(find "$prefix" -name 'libstreampool.so.*.*.*' -print -quit)"
  [[ -n "$so" ]] || { echo "no libstreampool.so installed under $prefix" >&2; exit 1; }
  [[ -z "$(find "$prefix" -name 'libstreampool.a')" ]] || { echo "static library in a shared install" >&2; exit 1; }
  check_exports "$so"
  local libdir
  libdir="$(dirname "$so")"

  log "shared consumers via find_package(streampool)"
  cmake -S tests/install -B "$consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_SKIP_RPATH=ON
  cmake --build "$consumer"
  local bin ldd_out
  for bin in consumer consumer_cpp consumer_cudart; do
    # Linked against the relocated .so, not a static copy.
    ldd_out="$(LD_LIBRARY_PATH="$libdir" ldd "$consumer/$bin")"
    grep -q "$libdir/libstreampool.so" <<<"$ldd_out" \
      || { echo "$bin does not load $libdir/libstreampool.so" >&2; exit 1; }
    LD_LIBRARY_PATH="$libdir" "$consumer/$bin"
  done

  log "shared consumers via pkg-config"
  local flags
  flags="$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs streampool)"
  # shellcheck disable=SC2086  # flags are a word list
  cc -std=c11 -Wall -Wextra tests/install/consumer.c $flags -o "$consumer/consumer-pkgconfig"
  # shellcheck disable=SC2086
  c++ -std=c++20 -Wall -Wextra tests/install/consumer_cpp.cc $flags \
    -o "$consumer/consumer_cpp-pkgconfig"
  LD_LIBRARY_PATH="$libdir" "$consumer/consumer-pkgconfig"
  LD_LIBRARY_PATH="$libdir" "$consumer/consumer_cpp-pkgconfig"
  # shellcheck disable=SC2086
  c++ -std=c++20 -Wall -Wextra tests/install/consumer_cudart.cc \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs streampool-cudart) \
    -o "$consumer/consumer_cudart-pkgconfig"
  LD_LIBRARY_PATH="$libdir" "$consumer/consumer_cudart-pkgconfig"
  log "shared install check passed"
}

# `pip install .` as the README gives it (offline: --no-build-isolation, the
# installed setuptools) into a fresh virtual environment that sees Debian's
# packages (pytest, numpy, distributed); then, from there alone, the
# package's import and a replay, and the replay tests. The pip build is
# build/pip, compiled through ccache with the flags of build/release, so that
# it costs seconds after the release build.
pip_install_check() {
  local venv="$ROOT/build/pip-venv" site
  log "pip install . into a fresh virtual environment ($venv)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  STREAMPOOL_CMAKE_ARGS="-DSTREAMPOOL_WERROR=ON" STREAMPOOL_JOBS="$JOBS" \
    "$venv/bin/pip" install --quiet --no-build-isolation --no-index --no-deps --no-cache-dir "$ROOT"
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  (cd "$venv" && env -u PYTHONPATH "$venv/bin/python" "$ROOT/tests/install/consumer.py" "$site")
  (cd "$venv" && env -u PYTHONPATH STREAMPOOL_TRACES_DIR="$ROOT/traces" \
    STREAMPOOL_REPLAY="$ROOT/build/release/tools/streampool-replay" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$ROOT/tests/python/test_replay.py" "$ROOT/tests/python/test_distributed_replay.py")
  log "pip install check passed"
}

# run_ctest <build dir> [ctest args...]: ctest, then why each skipped test
# skipped. ctest lists skips without their reason; the reason is the line
# after gtest's "file:line: Skipped" in the run's log. Grouped by reason, with
# a count and the first test.
run_ctest() {
  local dir="$1" rc=0
  shift
  ctest --test-dir "$dir" --output-on-failure -j2 "$@" || rc=$?
  local log="$dir/Testing/Temporary/LastTest.log"
  if [[ -f "$log" ]] && grep -q ': Skipped$' "$log"; then
    echo "Skipped tests, by reason (count, first test):"
    awk '/^[0-9]+\/[0-9]+ Testing: / { sub(/^[0-9]+\/[0-9]+ Testing: /, ""); test = $0 }
         skip { reason = $0; skip = 0
                if (!(reason in n)) { order[++k] = reason; first[reason] = test }
                n[reason]++ }
         /: Skipped$/ { skip = 1 }
         END { for (i = 1; i <= k; i++) printf "  %4d  %s\n        (%s)\n", n[order[i]], order[i], first[order[i]] }' "$log"
  fi
  return "$rc"
}

cmd_test() {
  cmd_deps
  configure_and_build build/release Release "${RELEASE_ARGS[@]}"
  run_ctest build/release
  install_check
  install_check_shared
  pip_install_check
}

cmd_docs() {
  if ! command -v doxygen >/dev/null; then
    if [[ "$(id -u)" != 0 ]]; then
      echo "doxygen is missing; install it with: sudo apt-get install doxygen" >&2
      exit 1
    fi
    log "installing doxygen"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends doxygen
  fi
  rm -rf build/docs
  mkdir -p build/docs
  # The Doxyfile fails on any warning (WARN_AS_ERROR = FAIL_ON_WARNINGS) and
  # also logs them to build/docs/warnings.log; print them either way.
  local rc=0
  doxygen Doxyfile >build/docs/doxygen.log 2>&1 || rc=$?
  if [[ -s build/docs/warnings.log ]]; then
    cat build/docs/warnings.log >&2
    rc=1
  fi
  if ((rc != 0)); then
    tail -n 20 build/docs/doxygen.log >&2
    echo "docs: doxygen failed or warned" >&2
    exit 1
  fi
  log "API reference in build/docs/html/index.html"
}

cmd_sanitize() {
  local which="${1:-all}"
  case "$which" in
    address | thread | all) ;;
    *)
      echo "run.sh sanitize: unknown sanitizer '$which' (one of: address, thread, all)" >&2
      exit 2
      ;;
  esac
  cmd_deps
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
  # Sanitized code runs several times slower; the torture test's time bound
  # is halved there (its ops per second are lower, its interleavings as wild).
  export STREAMPOOL_TORTURE_SECONDS="${STREAMPOOL_TORTURE_SECONDS:-15}"
  # Benchmarks are not run under sanitizers; skip building them.
  # -O1 and line tables only: what ASan and TSan recommend, enough for symbolized
  # stacks, and half the compile time of -O2 -g on the test files.
  local common=(-DSTREAMPOOL_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
  if [[ "$which" == address || "$which" == all ]]; then
    log "ASan+UBSan build (build/asan)"
    configure_and_build build/asan RelWithDebInfo -DSTREAMPOOL_SANITIZE=address "${common[@]}"
    run_ctest build/asan
  fi
  if [[ "$which" == thread || "$which" == all ]]; then
    log "TSan build (build/tsan)"
    configure_and_build build/tsan RelWithDebInfo -DSTREAMPOOL_SANITIZE=thread "${common[@]}"
    run_ctest build/tsan
  fi
}

cmd_bench() {
  cmd_build Release
  local out="$ROOT/build/bench-results" src name bin ran=0
  mkdir -p "$out"
  shopt -s nullglob
  for src in bench/*_benchmark.cc; do
    name="$(basename "$src" .cc)"
    bin="build/release/bench/$name"
    # gpu_benchmark is built only where the CUDA toolkit is.
    if [[ ! -x "$bin" ]]; then
      log "$name: not built here, skipped"
      continue
    fi
    log "$name"
    "$bin" --benchmark_format=console --benchmark_out="$out/$name.json" \
      --benchmark_out_format=json "$@"
    ran=$((ran + 1))
  done
  if ((ran == 0)); then
    log "no benchmarks (bench/*_benchmark.cc)"
  else
    # Ratios against the baselines, as Markdown: stdout and summary.md.
    log "summary ($out/summary.md)"
    python3 tools/bench_summary.py "$out" --out "$out/summary.md" \
      --command "./run.sh bench${*:+ $*}"
    log "results in $out"
  fi
}

cmd_fuzz() {
  # Seconds to fuzz (default 60). The committed corpus is the seed; new inputs
  # go to a scratch copy so a run never edits the repository.
  local seconds="${1:-60}"
  cmd_deps
  log "libFuzzer build (build/fuzz, clang, ASan+UBSan)"
  CC=clang CXX=clang++ configure_and_build build/fuzz RelWithDebInfo \
    -DSTREAMPOOL_BUILD_FUZZERS=ON -DSTREAMPOOL_BUILD_TESTS=OFF -DSTREAMPOOL_BUILD_BENCH=OFF \
    -DSTREAMPOOL_BUILD_EXAMPLES=OFF
  local corpus="build/fuzz/corpus"
  rm -rf "$corpus" && mkdir -p "$corpus" && cp tests/fuzz/corpus/* "$corpus"/
  log "fuzzing the C API for ${seconds}s"
  (cd build/fuzz && ./tests/fuzz/capi_fuzzer -max_total_time="$seconds" -max_len=4096 \
    -print_final_stats=1 corpus)
  log "fuzzing found nothing in ${seconds}s"
}

# ----------------------------------------------------------------- gpu-check

GPU_CHECK_DIR="build/gpu-check"
GPU_CHECK_BUNDLE="$GPU_CHECK_DIR/bundle"
GPU_CHECK_SECONDS=480

# The device tests' names: tests/gpu/<name>.cc, each an executable <name>.
gpu_test_names() {
  local src
  for src in tests/gpu/*_test.cc; do basename "$src" .cc; done
}

# Builds what gpu-check runs into build/gpu-check, then the bundle: those
# binaries (stripped), every shared library they load but the C library's
# own (the C++ runtime apart, in lib/cxx, so that PyTorch keeps the
# machine's), and the Python package, so that a GPU machine without this
# one's packages runs them as they are.
gpu_check_build() {
  local dir="$GPU_CHECK_DIR" launcher=() targets=() t known
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR="$ROOT"
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DSTREAMPOOL_BUILD_TESTS=ON -DSTREAMPOOL_BUILD_BENCH=ON -DSTREAMPOOL_BUILD_EXAMPLES=OFF
  mapfile -t targets < <(gpu_test_names)
  targets+=(streampool-replay)
  # The GPU benchmark exists where CMake found the toolkit; the Python
  # package (torch_compare.py's streampool run) where pybind11 is.
  known="$(ninja -C "$dir" -t targets all)"
  for t in gpu_benchmark streampool_python streampool_python_torch; do
    if grep -q "^$t: " <<<"$known"; then
      targets+=("$t")
    else
      log "gpu-check: $t cannot be built here, left out"
    fi
  done
  cmake --build "$dir" -j"$JOBS" --target "${targets[@]}"

  local bundle="$GPU_CHECK_BUNDLE" bins=() bin
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib/cxx"
  for t in $(gpu_test_names); do bins+=("$dir/tests/$t"); done
  bins+=("$dir/tools/streampool-replay")
  [[ -x "$dir/bench/gpu_benchmark" ]] && bins+=("$dir/bench/gpu_benchmark")
  for bin in "${bins[@]}"; do
    cp "$bin" "$bundle/bin/"
    strip --strip-unneeded "$bundle/bin/$(basename "$bin")" 2>/dev/null || true
  done
  # ldd's "name => /path" lines; the C library's own stay the machine's.
  local lib
  while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | ld-linux*) ;;
      libstdc++.so* | libgcc_s.so*) cp -L "$lib" "$bundle/lib/cxx/" ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done < <(ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
  if [[ -d "$dir/python/streampool" ]]; then
    cp -rL "$dir/python" "$bundle/python"
  fi
  log "gpu-check: bundle $(du -sh "$bundle" | cut -f1) in $bundle (carry it with the working tree)"
}

# Whether this machine has a GPU a CUDA runtime can use: nvidia-smi lists
# one, or (no nvidia-smi) the replay tool's CUDA runtime can be made.
gpu_present() {
  local out
  if command -v nvidia-smi >/dev/null 2>&1; then
    out="$(nvidia-smi -L 2>/dev/null || true)"
    grep -q '^GPU ' <<<"$out"
    return
  fi
  local probe="$GPU_CHECK_DIR/results/probe.trace"
  printf 'alloc 1 256 1\nfree 1 1\n' >"$probe"
  out="$(env LD_LIBRARY_PATH="$(gpu_check_libs)" "$GPU_CHECK_BUNDLE/bin/streampool-replay" \
    --compare-executor=cuda "$probe" 2>/dev/null || true)"
  grep -q '^  decisions equal: ' <<<"$out"
}

# The library path of the bundled binaries.
gpu_check_libs() {
  echo "$ROOT/$GPU_CHECK_BUNDLE/lib:$ROOT/$GPU_CHECK_BUNDLE/lib/cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# Seconds left of gpu-check's budget (at least 1, for timeout).
gpu_check_left() {
  local left=$((GPU_CHECK_DEADLINE - $(date +%s)))
  echo $((left > 0 ? left : 1))
}

# gpu_check_step <name> <log> <command...>: runs the command within what is
# left of the budget, its output to the terminal and the log, and records
# "passed", "failed (exit N)" or "timed out" for the summary.
GPU_CHECK_RESULTS=()
gpu_check_step() {
  local name="$1" logfile="$2" rc=0
  shift 2
  log "gpu-check: $name"
  timeout --kill-after=10 "$(gpu_check_left)" "$@" 2>&1 | tee "$logfile" || rc=${PIPESTATUS[0]}
  case "$rc" in
    0) GPU_CHECK_RESULTS+=("$name: passed") ;;
    124 | 137) GPU_CHECK_RESULTS+=("$name: timed out (gpu-check's ${GPU_CHECK_SECONDS}s)") ;;
    *) GPU_CHECK_RESULTS+=("$name: failed (exit $rc)") ;;
  esac
  return 0
}

# The device tests through CTest where this is the tree they were built in
# (CTest's files name its paths), else each bundled binary as CTest would
# run it: checker fatal, then as shipped.
gpu_check_tests() {
  local res="$1" cache="$GPU_CHECK_DIR/CMakeCache.txt"
  if [[ -f "$cache" ]] && grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$cache" &&
     [[ -x "$GPU_CHECK_DIR/tests/$(gpu_test_names | head -n1)" ]]; then
    # One at a time: the tests read the device's free memory.
    gpu_check_step "device tests (ctest -L gpu)" "$res/ctest.log" \
      ctest --test-dir "$GPU_CHECK_DIR" -L gpu --output-on-failure -j1
    return
  fi
  gpu_check_step "device tests (bundled binaries)" "$res/ctest.log" \
    env LD_LIBRARY_PATH="$(gpu_check_libs)" bash -c '
      rc=0
      for t in "$1"/bin/*_test; do
        STREAMPOOL_CHECK_STREAM_ORDER=fatal "$t" || rc=1
        STREAMPOOL_CHECK_STREAM_ORDER=0 "$t" || rc=1
      done
      exit $rc' _ "$GPU_CHECK_BUNDLE"
}

cmd_gpu_check() {
  local build=auto arg
  for arg in "$@"; do
    case "$arg" in
      --build-only) build=only ;;
      --no-build) build=no ;;
      *) usage >&2; exit 2 ;;
    esac
  done
  local res="$GPU_CHECK_DIR/results"
  if [[ "$build" != no || ! -x "$GPU_CHECK_BUNDLE/bin/streampool-replay" ]]; then
    cmd_deps
    [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null 2>&1 ||
      log "gpu-check: no CUDA toolkit found; the GPU benchmark will not be built"
    gpu_check_build
  fi
  [[ "$build" == only ]] && { log "gpu-check: built only (--build-only)"; return 0; }
  mkdir -p "$res"
  if ! gpu_present; then
    echo "gpu-check: no GPU here; built only"
    return 0
  fi

  GPU_CHECK_DEADLINE=$(($(date +%s) + GPU_CHECK_SECONDS))
  local bin="$GPU_CHECK_BUNDLE/bin" libs
  libs="$(gpu_check_libs)"
  gpu_check_tests "$res"
  if [[ -x "$bin/gpu_benchmark" ]]; then
    gpu_check_step "GPU benchmark" "$res/gpu_benchmark.txt" env LD_LIBRARY_PATH="$libs" \
      "$bin/gpu_benchmark" --benchmark_out="$res/gpu_benchmark.json" --benchmark_out_format=json
  else
    GPU_CHECK_RESULTS+=("GPU benchmark: not built (no CUDA toolkit where it was built)")
  fi
  # PyTorch loads the machine's C++ runtime: the bundle's goes to our
  # binaries only.
  if [[ -f tools/gpu/torch_compare.py ]]; then
    gpu_check_step "PyTorch comparison" "$res/torch_compare.txt" \
      env PYTHONPATH="$ROOT/$GPU_CHECK_BUNDLE/python${PYTHONPATH:+:$PYTHONPATH}" \
      LD_LIBRARY_PATH="$ROOT/$GPU_CHECK_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      python3 tools/gpu/torch_compare.py
  fi
  gpu_check_step "replay on the GPU" "$res/replay_compare.txt" env LD_LIBRARY_PATH="$libs" \
    "$bin/streampool-replay" --compare-executor=cuda traces/lab/*.trace

  echo
  echo "gpu-check summary (results in $res):"
  local line failed=0
  for line in "${GPU_CHECK_RESULTS[@]}"; do
    echo "  $line"
    [[ "$line" == *": passed" || "$line" == *"not built"* ]] || failed=1
  done
  if [[ -f "$res/ctest.log" ]]; then
    grep -E 'tests passed|tests failed out of' "$res/ctest.log" | sed 's/^/  tests: /' || true
    # A skipped device test found no GPU to run on after all.
    echo "  test cases skipped: $(grep -cE '\(Skipped\)$|^\[  SKIPPED \] .* \([0-9]+ ms\)$' \
      "$res/ctest.log" || true)"
  fi
  if [[ -f "$res/replay_compare.txt" ]]; then
    echo "  replay: $(grep -c "equals the simulator's: yes" "$res/replay_compare.txt") trace(s)" \
      "agree with the simulator before the first rule-3 difference," \
      "$(grep -c "equals the simulator's: no" "$res/replay_compare.txt") do not," \
      "$(grep -c '^  skipped: ' "$res/replay_compare.txt") skipped"
  fi
  if [[ -f "$res/gpu_benchmark.txt" ]]; then
    sed -n '/^streampool (spExecutorCuda) against/,$p' "$res/gpu_benchmark.txt" | sed 's/^/  /'
  fi
  return $failed
}

main() {
  local cmd="${1:-}"
  (($# > 0)) && shift
  case "$cmd" in
    deps) cmd_deps ;;
    build) cmd_build "$@" ;;
    demo) cmd_demo "$@" ;;
    test) cmd_test ;;
    docs) cmd_docs ;;
    sanitize) cmd_sanitize "$@" ;;
    bench) cmd_bench "$@" ;;
    gpu-check) cmd_gpu_check "$@" ;;
    fuzz) cmd_fuzz "$@" ;;
    help | -h | --help) usage ;;
    "")
      usage >&2
      exit 2
      ;;
    *)
      echo "run.sh: unknown command '$cmd'" >&2
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
