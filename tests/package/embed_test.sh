#!/usr/bin/env bash
# Install and embed: `cmake --install` into a temporary prefix, check what is (and is not)
# installed, then build examples/embed/ against the installed package (CMake and pkg-config)
# and run it on a good and a broken fixture.
# With a shared libckpt (-DBUILD_SHARED_LIBS=ON) also its SONAME, exports and run-time lookup.
#   embed_test.sh BUILD_DIR SOURCE_DIR [shared]     (shared: fail unless BUILD_DIR's libckpt is shared)
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") want=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(cd "$prefix" && find . -path '*/pkgconfig/ckpt.pc' | head -1)
[ -n "$pc" ] || fail "no pkgconfig/ckpt.pc installed"
libdir=$(dirname "$(dirname "${pc#./}")")  # lib, or lib/<multiarch> under /usr
for f in bin/ckpt bin/ckpt-fetch bin/ckpt-smoke include/ckpt/ckpt.h include/ckpt/version.h "$libdir/cmake/ckpt/ckptConfig.cmake" \
         "$libdir/cmake/ckpt/ckptTargets.cmake" share/man/man1/ckpt.1 share/man/man1/ckpt-fetch.1 share/man/man1/ckpt-smoke.1 \
         share/bash-completion/completions/ckpt share/zsh/vendor-completions/_ckpt \
         share/fish/vendor_completions.d/ckpt.fish; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
[ -e "$prefix/$libdir/libckpt.a" ] || [ -e "$prefix/$libdir/libckpt.so" ] || fail "no libckpt in $libdir"
# Internal headers stay out: only the public API (docs/api.md) is installed.
for h in hub.h timings.h arch.h quant.h tokenizer.h; do
  [ ! -e "$prefix/include/ckpt/$h" ] || fail "internal header $h installed"
done
[ -z "$(find "$prefix/include" -type f ! -path '*/include/ckpt/*')" ] || fail "files outside include/ckpt/"
# Every installed header compiles on its own with nothing but the installed include dir.
for h in "$prefix"/include/ckpt/*.h; do
  echo "#include <ckpt/$(basename "$h")>" | g++ -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ - || fail "$(basename "$h") does not compile alone"
done
echo "installed: $(find "$prefix" -type f | wc -l) files; headers: $(ls "$prefix/include/ckpt" | tr '\n' ' ')"

# The consumer project, configured against the installed package only.
cmake -S "$src/examples/embed" -B "$tmp/embed" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$tmp/embed" >/dev/null
grep -q "$prefix" "$tmp/embed/CMakeCache.txt" || fail "the example did not find the installed package"

"$prefix/bin/ckpt" fixture llama "$tmp/good" >/dev/null
"$prefix/bin/ckpt" fixture llama "$tmp/broken" --defect truncated-shard >/dev/null
"$tmp/embed/verify_before_load" "$tmp/good" > "$tmp/good.out" || fail "good fixture refused"
grep -q "^loading $tmp/good" "$tmp/good.out" || fail "no 'loading' line: $(cat "$tmp/good.out")"
set +e
"$tmp/embed/verify_before_load" "$tmp/broken" vllm > "$tmp/broken.out" 2> "$tmp/broken.err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "broken fixture: exit $rc, expected 1"
grep -q "ST014" "$tmp/broken.err" || fail "no ST014 in the refusal: $(cat "$tmp/broken.err")"
grep -q "refusing to load" "$tmp/broken.err" || fail "no refusal line"
[ ! -s "$tmp/broken.out" ] || fail "broken fixture printed a 'loading' line"
"$tmp/embed/verify_before_load" "$tmp/good" no-such-engine 2>/dev/null && fail "unknown engine accepted"

"$tmp/embed/api_tour" "$tmp/tour" > "$tmp/tour.out" || fail "api_tour failed"
head -1 "$tmp/tour.out" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert any(f["code"]=="IX002" for f in r["findings"]), r' \
  || fail "api_tour JSON lacks IX002"
grep -qx "template: <|user|>hi" "$tmp/tour.out" || fail "api_tour template output: $(tail -1 "$tmp/tour.out")"

# The shared variant (-DBUILD_SHARED_LIBS=ON): what a distribution and a consumer rely on.
shared=$prefix/$libdir/libckpt.so
[ "$want" != shared ] || [ -e "$shared" ] || fail "$build is not a -DBUILD_SHARED_LIBS=ON build (no libckpt.so installed)"
if [ -e "$shared" ]; then
  soname=$(readelf -d "$shared" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [[ $soname =~ ^libckpt\.so\.[0-9]+\.[0-9]+$ ]] || fail "SONAME '$soname' is not libckpt.so.MAJOR.MINOR"
  [ -e "$prefix/$libdir/$soname" ] || fail "no $soname symlink installed"
  readelf -d "$tmp/embed/verify_before_load" | grep -q "NEEDED.*\[$soname\]" || fail "the example does not link $soname"
  # It runs from the install prefix: the library it loads is the installed one.
  loaded=$(ldd "$tmp/embed/verify_before_load" | awk -v s="$soname" '$1 == s {print $3}')
  [ "$(realpath "$loaded")" = "$(realpath "$prefix/$libdir/$soname")" ] || fail "the example loads '$loaded', not the installed $soname"
  ldd -r "$shared" 2>&1 | grep -q "undefined symbol" && fail "undefined symbols in $soname: $(ldd -r "$shared" 2>&1 | grep -m3 undefined)"
  # Only ckpt's own symbols are exported (cmake/libckpt.map): no simdjson, fmt or std:: copies.
  others=$(nm -DC --defined-only "$shared" | grep -v ' ckpt::' || true)
  [ -z "$others" ] || fail "$soname exports symbols outside ckpt::, e.g. $(head -3 <<< "$others")"
  echo "shared: $soname, $(nm -D --defined-only "$shared" | wc -l) exported symbols, all in ckpt::"
fi
# The CLI carries its own copy of the modules (start-up time): it needs no libckpt at run time.
for exe in ckpt ckpt-fetch ckpt-smoke; do
  ! readelf -d "$prefix/bin/$exe" | grep -q "NEEDED.*libckpt" || fail "$exe needs libckpt at run time"
  ! readelf -d "$prefix/bin/$exe" | grep -q "R.*PATH" || fail "$exe carries an RPATH/RUNPATH"
done

# pkg-config, for build systems other than CMake.
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
static=""
[ -e "$prefix/$libdir/libckpt.a" ] && static="--static"
rpath=""  # a shared libckpt outside the loader's search path is found by the consumer's RUNPATH
[ -e "$shared" ] && rpath="-Wl,-rpath,$(pkg-config --variable=libdir ckpt)"
g++ "$src/examples/embed/verify_before_load.cpp" -o "$tmp/pc_gate" $(pkg-config --cflags --libs $static ckpt) $rpath
"$tmp/pc_gate" "$tmp/good" >/dev/null || fail "pkg-config build refused the good fixture"
if "$tmp/pc_gate" "$tmp/broken" 2>/dev/null; then fail "pkg-config build loaded the broken fixture"; fi
echo "embed: CMake and pkg-config consumers built against $prefix ($([ -e "$shared" ] && echo shared || echo static) libckpt); good fixture loaded, truncated one refused (ST014)"
