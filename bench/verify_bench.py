#!/usr/bin/env python3
"""ckpt verify vs a careful Python verifier (bench/verify_baseline.py), same inputs,
same run: sparse header-only stand-ins of a 22k-tensor MoE checkpoint (the real
Qwen3.5-25B-REAP-A3B index's names), of three smaller real layouts (Llama-3.1-8B bnb int8,
Qwen3-14B MLX 4-bit, Llama-3.1-70B in 162 shards; each from its real index, the shapes the
registry plans for its real config and quantization) and of DeepSeek-V3 (~92k tensors in 163
shards), each carrying what a real download carries (bench/standin_sidefiles.py): the model's real
config.json, tokenizer_config.json and generation_config.json, the family's real chat
template, and a tokenizer.json of the real vocabulary size. The baseline does the same
categories of work: structure, the side files parsed, tokenizer ids and merges checked, the
template compiled in transformers' sandboxed jinja2 environment and the probe rendered.

Before timing, both tools are checked to agree: the clean stand-in passes both, and a
planted defect (a shard 300 MB short; a superseded duplicate tensor) fails both.
Then N paired rounds alternate the two tools; reported: medians and their ratio.

    python3 bench/verify_bench.py BUILD_DIR [--rounds N] [--keep DIR]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus", "configs")
TEMPLATES = os.path.join(HERE, "..", "..", "shared", "corpus", "templates")
# case -> (corpus config folder, chat template to ship when tokenizer_config.json has none)
SIDE_FILES = {
    "moe-22k": ("Qwen3.5-25B-REAP-A3B-Coding", os.path.join("llama.cpp", "Qwen3.5-4B.jinja")),
    "deepseek-v3-92k": ("DeepSeek-V3-config", None),
    "llama-3.1-8b-bnb8": ("Llama-3.1-8B-Computer-Networks", os.path.join("llama.cpp", "meta-llama-Llama-3.1-8B-Instruct.jinja")),
    "qwen3-14b-mlx4": ("Qwen3-14B-MLX-4bit", None),
    "llama-3.1-70b-162-shards": ("Reflection-Llama-3.1-70B", None),
}


CPU = []  # CPU seconds (user + system) of each run, in order
RSS = []  # peak resident set of each run, MB


def run(cmd):
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)  # this child's own rusage (CPU, peak RSS)
        dt = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    CPU.append(ru.ru_utime + ru.ru_stime)
    RSS.append(ru.ru_maxrss / 1024)
    return dt, p.returncode, text


def add_side_files(case, folder):
    cfg, template = SIDE_FILES[case]
    cmd = [sys.executable, os.path.join(HERE, "standin_sidefiles.py"), os.path.join(CORPUS, cfg), folder]
    if template:
        cmd += ["--template", os.path.join(TEMPLATES, template)]
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--keep")
    args = ap.parse_args()
    ckpt = os.path.join(args.build_dir, "ckpt")
    make = os.path.join(args.build_dir, "bench", "make_standin")
    baseline = [sys.executable, os.path.join(HERE, "verify_baseline.py")]
    work = args.keep or tempfile.mkdtemp(prefix="ckpt-bench-")
    cases = []
    # Real layouts from their real index, with the shapes the registry plans for their real
    # config: clean checkpoints, as the real ones are (the issue: >= 5x on every case).
    for name in ("moe-22k", "llama-3.1-8b-bnb8", "qwen3-14b-mlx4", "llama-3.1-70b-162-shards"):
        folder = os.path.join(CORPUS, SIDE_FILES[name][0])
        index = os.path.join(folder, "model.safetensors.index.json")
        if os.path.exists(index):
            cases.append((name, ["from-index", index], ["--config", os.path.join(folder, "config.json")]))
        else:
            print("note: %s not found; the %s case is skipped" % (index, name))
    if os.path.isdir(os.path.join(CORPUS, "DeepSeek-V3-config")):
        cases.append(("deepseek-v3-92k", ["deepseek-v3"], []))
    try:
        import jinja2  # noqa: F401  the baseline renders the template with it
    except ImportError:
        sys.exit("verify_bench: the baseline needs jinja2 (Debian: python3-jinja2)")

    rows = []
    for name, gen, opts in cases:
        clean = os.path.join(work, name)
        if not os.path.isdir(clean):
            subprocess.run([make] + gen + [clean] + opts, check=True, stdout=subprocess.DEVNULL)
            add_side_files(name, clean)
        # The answer first: both must pass the clean stand-in and fail each planted defect.
        for defect in ("truncate", "duplicate"):
            bad = os.path.join(work, name + "-" + defect)
            if not os.path.isdir(bad):
                subprocess.run([make] + gen + [bad, "--defect", defect] + opts, check=True, stdout=subprocess.DEVNULL)
                add_side_files(name, bad)
            _, rc_c, _ = run([ckpt, "verify", bad, "--select", "ST,IX", "--format", "json"])
            _, rc_p, _ = run(baseline + [bad])
            assert rc_c == 1 and rc_p == 1, "%s/%s: ckpt exit %d, baseline exit %d" % (name, defect, rc_c, rc_p)
        _, rc_c, out = run([ckpt, "verify", clean, "--select", "ST,IX", "--format", "json"])
        _, rc_p, _ = run(baseline + [clean])
        assert rc_c == 0 and rc_p == 0, "%s clean: ckpt exit %d, baseline exit %d\n%s" % (name, rc_c, rc_p, out[:2000])
        # Timing: paired rounds, alternating which tool goes first.
        tc, tp, cc, cp, rc, rp = [], [], [], [], [], []
        run([ckpt, "verify", clean, "--format", "json"])  # warm the page cache
        for i in range(args.rounds):
            order = [("c", [ckpt, "verify", clean, "--format", "json"]), ("p", baseline + [clean])]
            if i % 2:
                order.reverse()
            for tag, cmd in order:
                dt, _, _ = run(cmd)
                (tc if tag == "c" else tp).append(dt)
                (cc if tag == "c" else cp).append(CPU[-1])
                (rc if tag == "c" else rp).append(RSS[-1])
        mc, mp = statistics.median(tc), statistics.median(tp)
        ucc, ucp = statistics.median(cc), statistics.median(cp)
        q = statistics.quantiles(sorted(tp[k] / tc[k] for k in range(len(tc))), n=4) if len(tc) > 1 else [0, 0, 0]
        rows.append((name, mc * 1000, mp * 1000, mp / mc, q[0], q[2], ucc * 1000, ucp * 1000, ucp / ucc,
                     max(rc), max(rp)))
    print("\n| case | ckpt verify wall (median) | Python wall (median) | wall ratio | paired ratio IQR "
          "| ckpt CPU (median) | Python CPU (median) | CPU ratio | peak RSS ckpt / Python |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c, p, r, q1, q3, uc, up, ur, mrc, mrp in rows:
        print("| %s | %.1f ms | %.1f ms | %.1fx | %.1f-%.1fx | %.1f ms | %.1f ms | %.1fx | %.0f / %.0f MB |" %
              (name, c, p, r, q1, q3, uc, up, ur, mrc, mrp))
    print("\nrounds: %d paired; host: %d cores; load average %s" % (args.rounds, os.cpu_count(),
                                                                   open("/proc/loadavg").read().split()[0]))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
