#!/usr/bin/env python3
"""The transcripts in the docs are the binary's real output. A transcript is a fenced block whose
first line is `$ ckpt ...`, optionally followed by a "(`exit N`)" line; the command is run (in a
scratch directory holding `ckpt demo`'s checkpoints where the doc says /tmp/ckpt-demo) and its
stdout and exit status must equal the block. Timings are the one thing normalised ("checked in
… ms"), as the docs write them.

    doc_examples.py CKPT SOURCE_DIR [--update]   exit 0 equal, 1 different (--update rewrites the docs)
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The docs whose transcripts run against the demo's checkpoints.
DOCS = ["docs/engines.md"]
DEMO_DIR = "/tmp/ckpt-demo"

ckpt, src = sys.argv[1], sys.argv[2]
update = "--update" in sys.argv[3:]
FENCE = re.compile(r"^```[a-z]*\n(\$ ckpt [^\n]*)\n(.*?)^```\n(?:\(`exit (\d+)`\)\n)?", re.M | re.S)
TIMING = re.compile(r"checked in [0-9.]+ (ms|s)")


def run(command, scratch):
    argv = shlex.split(command)
    assert argv[0] == "ckpt", command
    argv = [ckpt] + [a.replace(DEMO_DIR, scratch) for a in argv[1:]]
    env = dict(os.environ, NO_COLOR="1")
    env.pop("CI", None)
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    out = TIMING.sub("checked in … ms", p.stdout.replace(scratch, DEMO_DIR))
    return out, p.returncode


failures = []
checked = 0
with tempfile.TemporaryDirectory() as tmp:
    scratch = os.path.join(tmp, "ckpt-demo")
    subprocess.run([ckpt, "demo", "--dir", scratch], check=True, capture_output=True,
                   env=dict(os.environ, NO_COLOR="1"))
    for doc in DOCS:
        path = os.path.join(src, doc)
        text = open(path, encoding="utf-8").read()
        pieces, last = [], 0
        for m in FENCE.finditer(text):
            command, body, doc_rc = m.group(1)[2:], m.group(2), m.group(3)
            out, rc = run(command, scratch)
            checked += 1
            expected_rc = int(doc_rc) if doc_rc is not None else 0
            if out != body or rc != expected_rc:
                diff_at = next((i for i, (a, b) in enumerate(zip(out.splitlines(), body.splitlines())) if a != b),
                               min(len(out.splitlines()), len(body.splitlines())))
                failures.append(f"{doc}: `{command}`: exit {rc} (doc: {expected_rc}); first different line {diff_at + 1}:\n"
                                f"  doc:    {(body.splitlines() + [''])[diff_at]!r}\n"
                                f"  binary: {(out.splitlines() + [''])[diff_at]!r}")
            block = f"```\n$ {command}\n{out}```\n" + (f"(`exit {rc}`)\n" if rc != 0 else "")
            pieces += [text[last:m.start()], block]
            last = m.end()
        pieces.append(text[last:])
        if update:
            open(path, "w", encoding="utf-8").write("".join(pieces))

if checked == 0:
    print("FAIL: no transcripts found in " + ", ".join(DOCS))
    sys.exit(1)
if failures and not update:
    print("\n".join(failures))
    print(f"FAIL: {len(failures)} of {checked} transcripts differ from the binary "
          f"(regenerate: python3 tests/package/doc_examples.py CKPT . --update)")
    sys.exit(1)
print(f"doc examples: {checked} transcripts in {', '.join(DOCS)}"
      + (f" rewritten ({len(failures)} changed)" if update else " equal to the binary's output"))
