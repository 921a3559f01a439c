#!/usr/bin/env bash
# The Debian package: cpack writes ckpt_<version>_<arch>.deb (and ckpt-dev), its dependencies
# are computed (a shared build adds libckpt0.MINOR), it unpacks into a temporary root where
# ckpt --version, demo, verify, explain and the ckpt-fetch sibling run, and lintian reports no
# errors.   deb_test.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb is not installed"; exit 77; }

(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" > "$tmp/cpack.log" 2>&1) \
  || fail "cpack: $(tail -20 "$tmp/cpack.log")"
version=$("$build/ckpt" --version | cut -d' ' -f2)
arch=$(dpkg --print-architecture)
deb=$tmp/out/ckpt_${version}_${arch}.deb
dev=$tmp/out/ckpt-dev_${version}_${arch}.deb
[ -f "$deb" ] || fail "no $(basename "$deb"); cpack wrote: $(ls "$tmp/out")"
[ -f "$dev" ] || fail "no $(basename "$dev")"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libcurl4 libssl3 libsimdjson; do  # libssl3: libcrypto is dlopen'ed
  grep -q "$lib" <<< "$depends" || fail "Depends lacks $lib (not computed?): $depends"
done
dpkg-deb -c "$deb" > "$tmp/contents"
dpkg-deb -c "$dev" > "$tmp/dev-contents"
grep -q "/usr/share/man/man1/ckpt.1.gz$" "$tmp/contents" || fail "no compressed man page"
grep -q "/usr/share/man/man1/ckpt.1$" "$tmp/contents" && fail "an uncompressed man page"
grep -q "/usr/share/bash-completion/completions/ckpt$" "$tmp/contents" || fail "no bash completion"
grep -q "/usr/share/doc/ckpt/copyright$" "$tmp/contents" || fail "no copyright file"
grep -q "/usr/include\|libckpt" "$tmp/contents" && fail "headers or the library in the runtime package"
grep -q "/usr/include/ckpt/ckpt.h$" "$tmp/dev-contents" || fail "no headers in ckpt-dev"
grep -q "/pkgconfig/ckpt.pc$" "$tmp/dev-contents" || fail "no pkg-config file in ckpt-dev"
# A shared build (-DBUILD_SHARED_LIBS=ON) adds the library package, named after the soname.
debs=("$deb" "$dev")
lib=$(ls "$tmp/out"/libckpt*_"${version}_${arch}.deb" 2>/dev/null || true)
if [ -n "$lib" ]; then
  libpkg=$(dpkg-deb -f "$lib" Package)
  dpkg-deb -c "$lib" > "$tmp/lib-contents"
  grep -q "/usr/lib/.*libckpt\.so\.[0-9.]*$" "$tmp/lib-contents" || fail "no libckpt.so in $libpkg"
  soname=$(dpkg-deb -f "$lib" Package | sed 's/^libckpt/libckpt.so./')
  grep -q "/$soname -> " "$tmp/lib-contents" || fail "$libpkg lacks the $soname link"
  dpkg-deb -I "$lib" triggers | grep -qx "activate-noawait ldconfig" || fail "$libpkg has no ldconfig trigger"
  grep -q "$libpkg (= $version)" <<< "$(dpkg-deb -f "$dev" Depends)" || fail "ckpt-dev does not depend on $libpkg"
  grep -q "libckpt\.so -> " "$tmp/dev-contents" || fail "ckpt-dev lacks the libckpt.so link"
  debs+=("$lib")
  echo "shared: $(basename "$lib") holds $soname"
fi

root=$tmp/root
dpkg-deb -x "$deb" "$root"
bin=$root/usr/bin
[ "$("$bin/ckpt" --version)" = "ckpt $version" ] || fail "--version: $("$bin/ckpt" --version)"
(cd "$tmp" && "$bin/ckpt" demo --dir "$tmp/demo" > "$tmp/demo.out" 2>&1) || fail "demo: $(tail -20 "$tmp/demo.out")"
"$bin/ckpt" fixture llama "$tmp/model" >/dev/null
"$bin/ckpt" verify "$tmp/model" > "$tmp/verify.out" || fail "verify: $(cat "$tmp/verify.out")"
grep -q "^OK: 0 errors" "$tmp/verify.out" || fail "verify output: $(cat "$tmp/verify.out")"
"$bin/ckpt" explain ST014 | grep -q "^ST014 — " || fail "explain"
"$bin/ckpt" resolve org/absent --offline --cache-dir "$tmp/hub" 2> "$tmp/resolve.err" && fail "resolve found nothing?"
grep -q "not in the cache\|not cached\|no such" "$tmp/resolve.err" || fail "ckpt-fetch sibling did not run: $(cat "$tmp/resolve.err")"
grep -q "cannot run" "$tmp/resolve.err" && fail "sibling missing: $(cat "$tmp/resolve.err")"

if ! command -v lintian >/dev/null; then
  echo "SKIP: lintian is not installed (the package itself was built and run)"
  exit 77
fi
lintian --tag-display-limit 0 "${debs[@]}" > "$tmp/lintian.out" 2>&1 || true
cat "$tmp/lintian.out"
if grep -q "^E: " "$tmp/lintian.out"; then fail "lintian reports errors"; fi
echo "deb: $(basename "$deb") ($(stat -c %s "$deb") bytes), $(basename "$dev")${lib:+ and $(basename "$lib")} built, unpacked and run; lintian: $(grep -c '^W: ' "$tmp/lintian.out" || true) warnings, 0 errors"
