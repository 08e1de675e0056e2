#!/usr/bin/env bash
# Build, test and run streampool. See `./run.sh help`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

# Debian packages the build needs.
PACKAGES=(libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libmimalloc-dev
          cmake ninja-build g++ clang pkg-config
          python3-dev python3-pybind11 python3-pytest python3-numpy nlohmann-json3-dev ccache)

JOBS="$(nproc)"

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
                       static and shared (relocated prefix, exported symbols)
  docs                 API reference of include/streampool with Doxygen into
                       build/docs (installs doxygen if missing; fails on warnings)
  sanitize [which]     ASan+UBSan build in build/asan and TSan build in build/tsan,
                       each running ctest; which = address | thread | all (default)
  fuzz [seconds]       libFuzzer build of the C API fuzzer (clang), run for seconds
                       (default 60) from the committed corpus
  bench [args...]      build Release and run every benchmark; JSON results go to
                       build/bench-results/<name>.json; args go to each benchmark
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

# configure_and_build <build dir> <build type> [extra cmake args...]
configure_and_build() {
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
  cmake --build "$dir" -j"$JOBS"
}

cmd_build() {
  local type="${1:-Release}"
  cmd_deps
  configure_and_build "build/${type,,}" "$type"
}

cmd_demo() {
  # Only the demo is built. Build output goes to stderr so that stdout is the
  # demo's alone. A later --output_dir among the flags wins over this one.
  cmd_deps >&2
  cmake -S "$ROOT" -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
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
  # PYTHONPATH (the README's setting), from the prefix moved elsewhere: the
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
  bad="$(grep -Ev '^(sp[A-Z][A-Za-z]*|((typeinfo|typeinfo name|vtable) for )?streampool::.*)$' \
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
  ctest --test-dir "$build" --output-on-failure -j2

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

cmd_test() {
  # A compiler warning fails this build (-Werror). build/release keeps the
  # setting in its CMake cache for the other commands that build there.
  cmd_deps
  configure_and_build build/release Release -DSTREAMPOOL_WERROR=ON
  ctest --test-dir build/release --output-on-failure -j2
  install_check
  install_check_shared
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
  case "$which" in address | thread | all) ;; *) usage >&2; exit 2 ;; esac
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
    ctest --test-dir build/asan --output-on-failure -j2
  fi
  if [[ "$which" == thread || "$which" == all ]]; then
    log "TSan build (build/tsan)"
    configure_and_build build/tsan RelWithDebInfo -DSTREAMPOOL_SANITIZE=thread "${common[@]}"
    ctest --test-dir build/tsan --output-on-failure -j2
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
