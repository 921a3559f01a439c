#!/usr/bin/env python3
"""Runs a composite action's `run:` steps locally, as the GitHub runner would: each step's
`env:` with `${{ inputs.* }}`, `${{ github.action_path }}` and `${{ steps.ID.outputs.* }}`
expanded, GITHUB_ENV / GITHUB_OUTPUT / GITHUB_PATH carried from step to step, RUNNER_TEMP
set. `uses:` steps (actions/cache) are listed and skipped: they need GitHub's services.

    run_action.py ACTION_YML --input NAME=VALUE ... [--workdir DIR]
prints each step's name, its output, and finally `outputs: {json}`; exit = the failing step's code.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

ap = argparse.ArgumentParser()
ap.add_argument("action")
ap.add_argument("--input", action="append", default=[])
ap.add_argument("--workdir", default=None)
a = ap.parse_args()
action = yaml.safe_load(open(a.action))
inputs = {k: str(v.get("default", "")) for k, v in action.get("inputs", {}).items()}
for kv in a.input:
    k, _, v = kv.partition("=")
    if k not in inputs:
        sys.exit(f"unknown input {k}")
    inputs[k] = v
for k, v in action.get("inputs", {}).items():
    if v.get("required") and not inputs[k]:
        sys.exit(f"input {k} is required")

tmp = tempfile.mkdtemp(prefix="action-")
runner_temp = os.path.join(tmp, "runner_temp")
os.makedirs(runner_temp)
env = dict(os.environ, RUNNER_TEMP=runner_temp, GITHUB_ACTIONS="true", CI="true")
steps_out = {}
path_prefix = []


def expand(text):
    def sub(m):
        expr = m.group(1).strip()
        if expr.startswith("inputs."):
            return inputs[expr[len("inputs."):]]
        if expr == "github.action_path":
            return os.path.dirname(os.path.abspath(a.action))
        if expr == "runner.temp":
            return runner_temp
        m2 = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if m2:
            return steps_out.get(m2.group(1), {}).get(m2.group(2), "")
        raise SystemExit(f"unsupported expression ${{{{ {expr} }}}}")
    return re.sub(r"\$\{\{(.*?)\}\}", sub, str(text))


def read_kv(path):
    """GITHUB_ENV / GITHUB_OUTPUT syntax: NAME=value lines and NAME<<DELIM heredocs."""
    out, lines, i = {}, open(path).read().splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            i += 1
            val = []
            while lines[i] != delim:
                val.append(lines[i])
                i += 1
            out[name] = "\n".join(val)
        elif "=" in line:
            name, val = line.split("=", 1)
            out[name] = val
        i += 1
    return out


status = 0
for n, step in enumerate(action["runs"]["steps"]):
    name = step.get("name", f"step {n}")
    if "uses" in step:
        print(f"=== {name}: skipped ({step['uses']} needs GitHub's services)", flush=True)
        continue
    files = {k: os.path.join(tmp, f"{k}.{n}") for k in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH")}
    for f in files.values():
        open(f, "w").close()
    step_env = dict(env, **files)
    step_env.update({k: expand(v) for k, v in step.get("env", {}).items()})
    if path_prefix:
        step_env["PATH"] = ":".join(path_prefix) + ":" + env["PATH"]
    print(f"=== {name}", flush=True)
    r = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
                       env=step_env, cwd=a.workdir)
    env.update(read_kv(files["GITHUB_ENV"]))
    if "id" in step:
        steps_out[step["id"]] = read_kv(files["GITHUB_OUTPUT"])
    path_prefix = [p for p in open(files["GITHUB_PATH"]).read().splitlines() if p] + path_prefix
    if r.returncode != 0:
        print(f"=== {name}: exit {r.returncode}", flush=True)
        status = r.returncode
        break

outputs = {k: expand(v["value"]) for k, v in action.get("outputs", {}).items()}
print("outputs: " + json.dumps(outputs), flush=True)
sys.exit(status)
