#!/usr/bin/env python3
"""The report contract: every JSON report validated against docs/report.schema.json (JSON
Schema 2020-12) and every SARIF report against the vendored SARIF 2.1.0 schema, with Debian's
python3-jsonschema. Validated: the recorded golden reports of tests/checks_arch/golden/ (the
exact JSON the golden tests compare), fresh json/jsonl/sarif outputs of fixtures with planted
defects, and any reports captured from a test run (CKPT_CAPTURE_REPORTS=DIR).

    validate_reports.py CKPT SOURCE_DIR [CAPTURED_DIR]       exit 0 ok, 1 invalid, 77 skipped
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)

ckpt, src = sys.argv[1], sys.argv[2]
captured = sys.argv[3] if len(sys.argv) > 3 else None
schema = json.load(open(os.path.join(src, "docs/report.schema.json")))
jsonschema.Draft202012Validator.check_schema(schema)
report_v = jsonschema.Draft202012Validator(schema)
record_v = jsonschema.Draft202012Validator({"$ref": "#/$defs/jsonl_record", "$defs": schema["$defs"]})
sarif_schema = json.load(open(os.path.join(src, "tests/data/sarif-schema-2.1.0.json")))
sarif_v = jsonschema.Draft4Validator(sarif_schema)

errors = []
counts = {"golden json": 0, "json": 0, "jsonl lines": 0, "sarif": 0, "captured": 0}


def check(validator, doc, where):
    for e in validator.iter_errors(doc):
        errors.append(f"{where}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
        return False
    return True


def check_output(fmt, text, where):
    if fmt == "json":
        counts["json"] += 1
        check(report_v, json.loads(text), where)
    elif fmt == "jsonl":
        lines = text.splitlines()
        if not lines or json.loads(lines[-1]).get("record") != "summary":
            errors.append(f"{where}: jsonl does not end with its summary line")
        for i, line in enumerate(lines):
            counts["jsonl lines"] += 1
            check(record_v, json.loads(line), f"{where} line {i + 1}")
    elif fmt == "sarif":
        counts["sarif"] += 1
        check(sarif_v, json.loads(text), where)


version = subprocess.run([ckpt, "--version"], capture_output=True, text=True, check=True).stdout.split()[1]

# 1. The golden reports, with the version fields the golden test strips put back.
for path in sorted(glob.glob(os.path.join(src, "tests/checks_arch/golden/*.jsonl"))):
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        rec = json.loads(line)
        if rec.get("report") is None:
            continue
        doc = {"ckpt_version": version, "schema_version": 1, **rec["report"]}
        counts["golden json"] += 1
        check(report_v, doc, f"{os.path.basename(path)}:{n} ({rec['case']})")

# 2. Fresh outputs of every format, portable and per engine, header-only and --deep.
cases = [[], ["--defect", "truncated-shard"], ["--defect", "stray-shard", "--shards", "2"],
         ["--defect", "malformed-template"], ["--defect", "missing-tensor"], ["--quant", "mlx4"],
         ["--defect", "lfs-pointer-shard"], ["--defect", "config-field-removed"]]
with tempfile.TemporaryDirectory() as tmp:
    for i, extra in enumerate(cases):
        d = os.path.join(tmp, f"m{i}")
        subprocess.run([ckpt, "fixture", "llama", d, *extra], capture_output=True, check=True)
        for flags in ([], ["--engine", "vllm"], ["--engine", "mlx-lm,swiftlm"], ["--deep"]):
            outs = {}
            for fmt in ("json", "jsonl", "sarif"):
                r = subprocess.run([ckpt, "verify", d, "--format", fmt, *flags], capture_output=True, text=True)
                if r.returncode not in (0, 1):
                    errors.append(f"verify {extra} {flags} --format {fmt}: exit {r.returncode}: {r.stderr}")
                    continue
                outs[fmt] = r.stdout
                check_output(fmt, r.stdout, f"fixture {extra} {flags} --format {fmt}")
            if "json" in outs and "jsonl" in outs:  # the two formats carry the same findings
                a = json.loads(outs["json"])["findings"]
                b = [{k: v for k, v in json.loads(l).items() if k != "record"} for l in outs["jsonl"].splitlines()[:-1]]
                if a != b:
                    errors.append(f"fixture {extra} {flags}: jsonl findings differ from json")

# 3. Reports a test run captured.
if captured:
    for path in sorted(glob.glob(os.path.join(captured, "*"))):
        fmt = path.rsplit(".", 1)[-1]
        counts["captured"] += 1
        try:
            check_output(fmt, open(path, encoding="utf-8").read(), os.path.basename(path))
        except json.JSONDecodeError as e:
            errors.append(f"{path}: not JSON: {e}")

print("validated: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
for e in errors[:50]:
    print("INVALID:", e)
sys.exit(1 if errors else 0)
