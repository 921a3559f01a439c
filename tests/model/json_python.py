#!/usr/bin/python3
"""The oracle of json_python_test.cpp: Python's own verdict on JSON files.

Usage: json_python.py MANIFEST SCRATCH_DIR
MANIFEST lists one file path per line. Prints first `DEPTH_LIMIT n` (the deepest '['*n+']'*n
this interpreter reads at the call depth used for every file), then one line per listed file,
in order:
  OK <json.dumps(v, ensure_ascii=True, separators=(',', ':'), allow_nan=True)>
  REJECT <exception type>: <message, first 200 characters>
The file is read as transformers reads config.json: open(path, encoding='utf-8'), json.loads.

CPython 3.11 counts JSON nesting against the recursion limit shared with the Python frames
below json.loads, so the depth a loader accepts depends on how deep it calls. Every file here,
and the depth probe, is read with six frames below json.loads: <module> and main() as in a
script, then verdict and the three stand-ins below for a loader's chain (four frames, about what
from_pretrained -> ... -> _dict_from_json_file costs). ckpt's bound (src/io/limits.h
kMaxJsonDepth) is the DEPTH_LIMIT this prints.
"""
import json
import os
import sys


# Three stand-ins for a loader's chain (from_pretrained -> get_config_dict ->
# _dict_from_json_file); each is one Python frame below json.loads.
def from_pretrained(path):
    return get_config_dict(path)


def get_config_dict(path):
    return _dict_from_json_file(path)


def _dict_from_json_file(path):
    with open(path, "r", encoding="utf-8") as reader:
        text = reader.read()
    return json.loads(text)


def verdict(path):
    """(accepted, line) for one file; called from main() only, so the call depth is fixed."""
    try:
        value = from_pretrained(path)
    except RecursionError as e:
        return False, "REJECT RecursionError: %s" % str(e)[:200]
    except Exception as e:  # JSONDecodeError, UnicodeDecodeError, ValueError (> 4300 digits)
        return None, "REJECT %s: %s" % (type(e).__name__, str(e)[:200].replace("\n", " "))
    return True, "OK " + json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=True)


def main():
    manifest, scratch = sys.argv[1], sys.argv[2]
    out = sys.stdout
    # The deepest '['*n+']'*n read through verdict() from here (bisection; RecursionError above).
    probe = os.path.join(scratch, "depth_probe.json")
    lo, hi = 1, 5000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        with open(probe, "w", encoding="utf-8") as f:
            f.write("[" * mid + "]" * mid)
        accepted, _ = verdict(probe)
        if accepted:
            lo = mid
        else:
            hi = mid - 1
    os.remove(probe)
    out.write("DEPTH_LIMIT %d\n" % lo)
    with open(manifest, "r", encoding="utf-8") as m:
        paths = [line.rstrip("\n") for line in m if line.strip()]
    for p in paths:
        out.write(verdict(p)[1] + "\n")


main()
