#!/usr/bin/env python3
"""jinja2 side of bench/template_bench: render each template in-process, as transformers does.

stdin: JSON {"templates": {name: text}, "context": {...}, "repeats": N, "clock": "cpu"|"wall",
             "sample_seconds": S (a sample is a batch of renders lasting at least S)}
stdout: JSON {name: median seconds per render} (templates that raise are left out)
Same environment as tests/jinja/oracle.py; templates are compiled once, then only render()
is timed, matching what the C++ side times, on the same clock (the thread's CPU time, or
wall time).
"""
import json
import statistics
import sys
import time
import os

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "jinja"))
import oracle  # noqa: E402


def main():
    req = json.load(sys.stdin)
    env = oracle.environment(True, True)
    ctx = req["context"]
    repeats = req.get("repeats", 21)
    clock = time.thread_time if req.get("clock", "wall") == "cpu" else time.perf_counter
    sample_s = req.get("sample_seconds", 2e-4)
    out = {}
    for name, text in req["templates"].items():
        try:
            tmpl = env.from_string(text)
            tmpl.render(**ctx)
        except Exception:  # noqa: BLE001
            continue
        # batch renders so each sample is well above timer resolution
        batch = 1
        t0 = clock()
        tmpl.render(**ctx)
        one = clock() - t0
        if one < sample_s:
            batch = max(1, int(sample_s / max(one, 1e-7)))
        samples = []
        for _ in range(repeats):
            t0 = clock()
            for _ in range(batch):
                tmpl.render(**ctx)
            samples.append((clock() - t0) / batch)
        out[name] = statistics.median(samples)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
