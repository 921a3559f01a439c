#!/usr/bin/env bash
# examples/launcher/entrypoint.sh with a stub server: it execs the server on the verified
# directory only when ckpt verify exits 0.   launcher_test.sh CKPT SOURCE_DIR
set -euo pipefail
export CKPT=$(realpath "$1")
entry=$(realpath "$2")/examples/launcher/entrypoint.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/server" <<'STUB'
#!/usr/bin/env bash
# stub server: records how it was started
{ echo "pid=$$"; echo "model_dir=$CKPT_MODEL_DIR"; printf 'arg=%s\n' "$@"; } > "$STUB_LOG"
STUB
chmod +x "$tmp/server"
export STUB_LOG=$tmp/server.log

"$CKPT" fixture llama "$tmp/good" >/dev/null
"$CKPT" fixture llama "$tmp/bad" --defect truncated-shard >/dev/null

# A good directory: the server runs (exec'd: same pid as the entrypoint), on that directory.
bash -c 'echo "shell=$$" > "$0.pid"; exec "$@"' "$tmp/run" "$entry" "$tmp/good" "$tmp/server" serve "{model_dir}" --port 8000 \
  > "$tmp/good.out" 2>&1 || fail "good model: entrypoint failed: $(cat "$tmp/good.out")"
grep -qx "model_dir=$tmp/good" "$STUB_LOG" || fail "server not given the model dir: $(cat "$STUB_LOG")"
grep -qx "arg=$tmp/good" "$STUB_LOG" || fail "{model_dir} not substituted: $(cat "$STUB_LOG")"
grep -qx "arg=--port" "$STUB_LOG" || fail "server args lost"
[ "$(sed -n 's/^shell=//p' "$tmp/run.pid")" = "$(sed -n 's/^pid=//p' "$STUB_LOG")" ] || fail "server was not exec'd"

# A broken one: refused with ckpt's exit code, the server never starts.
rm -f "$STUB_LOG"
set +e
"$entry" "$tmp/bad" "$tmp/server" serve "{model_dir}" > "$tmp/bad.out" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || fail "broken model: exit $rc, expected 1: $(cat "$tmp/bad.out")"
[ ! -e "$STUB_LOG" ] || fail "the server started on a broken model"
grep -q "ST014" "$tmp/bad.out" || fail "no finding shown"
grep -q "refused $tmp/bad" "$tmp/bad.out" || fail "no refusal line"

# A cache repo made by the preparation step: resolved after it, to the snapshot, then verified.
export CKPT_CACHE_DIR=$tmp/hub
CKPT_PREPARE="\"$CKPT\" fixture llama \"$tmp/hub\" --hf-cache org/tiny >/dev/null" \
  "$entry" org/tiny "$tmp/server" serve "{model_dir}" > "$tmp/cache.out" 2>&1 || fail "cache model: $(cat "$tmp/cache.out")"
grep -q "^model_dir=$tmp/hub/models--org--tiny/snapshots/[0-9a-f]\{40\}$" "$STUB_LOG" || fail "not the snapshot: $(cat "$STUB_LOG")"

# Not in the cache: exit 2 and a refusal line, no server.
rm -f "$STUB_LOG"
set +e
"$entry" org/absent "$tmp/server" > "$tmp/absent.out" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "absent model: exit $rc, expected 2: $(cat "$tmp/absent.out")"
grep -q "org/absent is not in the cache.*not starting" "$tmp/absent.out" || fail "no refusal line: $(cat "$tmp/absent.out")"
[ ! -e "$STUB_LOG" ] || fail "the server started without a model"
"$entry" 2>/dev/null && fail "usage error accepted"
echo "launcher: good model served (exec'd, {model_dir} substituted), truncated one refused (exit 1), cache repo resolved after preparation"
