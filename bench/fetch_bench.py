#!/usr/bin/env python3
"""ckpt fetch vs the curl command-line tool, from the same loopback hub, in the same run.

Two workloads: one large file (default 1 GiB, sparse-backed on the server side) and a
16-file repo (default 16 x 64 MiB). Two hubs serve them (--hub):
  ckpt   bench/fetch_bench_server, the project's own mock hub (tests/hub/mock_hub.cpp)
  nginx  Debian's nginx, configured by this script in a temp dir: the revision and tree API
         answers are static JSON files written here, and resolve/<rev>/<file> is a static file
         with the headers ckpt needs (X-Repo-Commit, ETag = X-Linked-Etag = sha256,
         X-Linked-Size; nginx adds Content-Length and Accept-Ranges), served with sendfile.
         Code that is not the project's, so the client is not measured against itself.
Before the timed loop, `ckpt fetch` (hash verification and the post-fetch verify on) fetches
both repos from each hub and every byte is compared with the source files.

Baselines, in the same loop: curl (one file), curl then sha256sum of what it wrote (one file;
for the repo: one sequential curl then sha256sum of every file, and xargs -P4 of
`curl && sha256sum` per file), sequential curl, `curl -Z` (8 parallel) and `xargs -P4 curl`.
The sha256sum digests are checked after each run. Runs are paired: every case of every hub
once per run, the order reversed on odd runs, each into a fresh output directory. The table
reports medians with min-max and the median CPU time (user + system of the command and
its children; the hub's own CPU is not in it); ratios are curl's median over the case's
(> 1: faster than curl). ckpt's time includes the sha256 of every byte, the per-blob lock and the atomic
publish (rows with --fsync add the fdatasync of every blob before it is published; rows with
--direct write every byte to the disk with O_DIRECT, around the page cache); curl only
writes the bytes into the page cache. The load average is printed before and after: on a
shared machine it decides more than the client does.

usage: bench/fetch_bench.py [--build build] [--runs 5] [--big-mib 1024] [--files 16] [--file-mib 64]
                            [--hub ckpt|nginx|both]
"""
import argparse
import filecmp
import hashlib
import json
import os
import pwd
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NGINX_INSTALL = "apt-get install -y nginx-light   (scripts/setup.sh does not: Debian starts the service on port 80)"


def start_ckpt_server(server, repo, data_dir):
    p = subprocess.Popen([server, repo, data_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    if len(line) != 2 or line[0] != "endpoint":
        p.kill()
        sys.exit("server did not start")
    return p, line[1]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NginxHub:
    """One nginx serving every repo given, from a config generated in `tmp`."""

    COMMIT = "a1" * 20

    def __init__(self, nginx, tmp, repos):
        # repos: {repo_id: (data_dir, [(name, size, sha256)])}
        self.tmp = tmp
        os.makedirs(tmp)
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        locs = []
        for repo, (data_dir, files) in repos.items():
            api = os.path.join(tmp, "api", repo.replace("/", "--"))
            os.makedirs(api)
            revision = {"id": repo, "sha": self.COMMIT, "siblings": [{"rfilename": n} for n, _, _ in files]}
            tree = []
            for n, size, sha in files:
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {size}\n".encode()
                tree.append({"type": "file", "path": n, "oid": git_blob_sha1(pointer), "size": size,
                             "lfs": {"oid": sha, "size": size, "pointerSize": len(pointer)}})
            with open(os.path.join(api, "revision.json"), "w") as f:
                json.dump(revision, f)
            with open(os.path.join(api, "tree.json"), "w") as f:
                json.dump(tree, f)
            for rev in ("main", self.COMMIT):
                locs.append(f"location = /api/models/{repo}/revision/{rev} "
                            f"{{ default_type application/json; alias {api}/revision.json; }}")
            locs.append(f"location = /api/models/{repo}/tree/{self.COMMIT} "
                        f"{{ default_type application/json; alias {api}/tree.json; }}")
            for n, size, sha in files:
                for rev in ("main", self.COMMIT):
                    locs.append(
                        f"location = /{repo}/resolve/{rev}/{n} {{\n"
                        f"      alias {os.path.join(data_dir, n)};\n"
                        f"      etag off;\n"
                        f"      add_header X-Repo-Commit {self.COMMIT} always;\n"
                        f"      add_header ETag '\"{sha}\"' always;\n"
                        f"      add_header X-Linked-Etag '\"{sha}\"' always;\n"
                        f"      add_header X-Linked-Size {size} always;\n"
                        f"    }}")
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        temps = "\n".join(f"  {k}_temp_path {tmp}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = f"""{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {tmp}/access.log;
{temps}
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port};
    server_name localhost;
    {chr(10).join('    ' + l for l in locs).lstrip()}
  }}
}}
"""
        self.conf = os.path.join(tmp, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([nginx, "-p", tmp, "-c", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"nginx did not start:\n{self.proc.stderr.read().decode(errors='replace')}\n"
                         f"{self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.time() > deadline:
                    self.stop()
                    sys.exit("nginx did not listen within 10 s\n" + self.error_log())
                time.sleep(0.05)

    def error_log(self):
        try:
            with open(os.path.join(self.tmp, "error.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_cmd(cmd, env=None, capture=False):
    """Wall seconds, CPU seconds (user + system of the command and its children), stdout."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr.decode(errors='replace')}")
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return dt, cpu, (r.stdout.decode() if capture else "")


def check_digests(out, expected, what):
    # sha256sum lines: "<hex>  <path>"
    got = {}
    for line in out.splitlines():
        h, _, p = line.partition("  ")
        got[os.path.basename(p)] = h
    if got != expected:
        sys.exit(f"{what}: sha256sum printed {got}, expected {expected}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--file-mib", type=int, default=64)
    ap.add_argument("--hub", choices=["ckpt", "nginx", "both"], default=None,
                    help="which loopback hub(s) serve the files (default: both when nginx is installed)")
    args = ap.parse_args()
    ckpt = os.path.join(args.build, "ckpt")
    server = os.path.join(args.build, "bench", "fetch_bench_server")
    curl = shutil.which("curl")
    if not curl:
        sys.exit("curl not found (scripts/setup.sh installs it)")
    for tool in ("sha256sum", "xargs"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (coreutils / findutils)")
    nginx = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx")
    hubs = args.hub or ("both" if nginx else "ckpt")
    hubs = ["ckpt", "nginx"] if hubs == "both" else [hubs]
    if "nginx" in hubs and not nginx:
        print(f"nginx hub: skipped: nginx absent; install it with: {NGINX_INSTALL}")
        hubs.remove("nginx")
        if not hubs:
            return
    if args.hub is None and not nginx:
        print(f"nginx hub: skipped: nginx absent; install it with: {NGINX_INSTALL}")
    work = tempfile.mkdtemp(prefix="ckpt-fetch-bench-")
    servers = []
    nginx_hub = None
    try:
        single, multi = os.path.join(work, "single"), os.path.join(work, "multi")
        os.makedirs(single)
        os.makedirs(multi)
        # Sparse-backed files, each with a distinct first 4 KiB: distinct sha256 etags, so
        # no file is deduplicated against another's blob.
        with open(os.path.join(single, "big.bin"), "wb") as f:
            f.write(os.urandom(4096))
            f.truncate(args.big_mib << 20)
        names = []
        for i in range(args.files):
            n = f"model-{i + 1:05d}-of-{args.files:05d}.bin"
            names.append(n)
            with open(os.path.join(multi, n), "wb") as f:
                f.write(os.urandom(4096))
                f.truncate(args.file_mib << 20)
        sha = {n: sha256_file(os.path.join(multi, n)) for n in names}
        sha["big.bin"] = sha256_file(os.path.join(single, "big.bin"))
        endpoints = {}  # hub -> (single endpoint, multi endpoint)
        if "ckpt" in hubs:
            s1, ep1 = start_ckpt_server(server, "bench/single", single)
            s2, ep2 = start_ckpt_server(server, "bench/multi", multi)
            servers += [s1, s2]
            endpoints["ckpt"] = (ep1, ep2)
        if "nginx" in hubs:
            nginx_hub = NginxHub(nginx, os.path.join(work, "nginx"), {
                "bench/single": (single, [("big.bin", args.big_mib << 20, sha["big.bin"])]),
                "bench/multi": (multi, [(n, args.file_mib << 20, sha[n]) for n in names]),
            })
            endpoints["nginx"] = (nginx_hub.endpoint, nginx_hub.endpoint)
        env = dict(os.environ, HF_HUB_OFFLINE="0", CI="1")
        env.pop("HF_TOKEN", None)
        out = os.path.join(work, "out")

        def fresh():
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            return out

        # Outside the timed loop: a verified fetch from every hub, compared byte for byte.
        for hub in hubs:
            for repo, src, files, ep in (("bench/single", single, ["big.bin"], endpoints[hub][0]),
                                         ("bench/multi", multi, names, endpoints[hub][1])):
                d = fresh()
                run_cmd([ckpt, "fetch", repo, "--endpoint", ep, "--cache-dir", d, "--quiet"], env)
                snap = os.path.join(d, "models--" + repo.replace("/", "--"), "snapshots")
                commits = os.listdir(snap)
                if len(commits) != 1:
                    sys.exit(f"{hub} hub: {repo}: expected one snapshot, found {commits}")
                for n in files:
                    if not filecmp.cmp(os.path.join(src, n), os.path.join(snap, commits[0], n), shallow=False):
                        sys.exit(f"{hub} hub: {repo}/{n}: the fetched bytes differ from the source")
            print(f"{hub} hub: ckpt fetch (hash verification and post-fetch verify on) fetched both repos; "
                  f"every byte matches the source")

        def ckpt_cmd(ep, repo, *extra):
            return [ckpt, "fetch", repo, "--endpoint", ep, "--cache-dir", fresh(), "--quiet", "--no-verify", *extra]

        nf = args.files

        def cases_for(hub):
            ep1, ep2 = endpoints[hub]
            big_url = f"{ep1}/bench/single/resolve/main/big.bin"
            multi_urls = [f"{ep2}/bench/multi/resolve/main/{n}" for n in names]

            def curl_single(with_sha):
                f = os.path.join(fresh(), "big.bin")
                if not with_sha:
                    return [curl, "-sS", "-f", "-o", f, big_url]
                return ["sh", "-c", 'curl -sS -f -o "$0" "$1" && sha256sum "$0"', f, big_url]

            def curl_multi(parallel, with_sha=False):
                d = fresh()
                cmd = [curl, "-sS", "-f"] + (["-Z", "--parallel-max", "8"] if parallel else [])
                for n, u in zip(names, multi_urls):
                    cmd += ["-o", os.path.join(d, n), u]
                if with_sha:
                    return ["sh", "-c", '"$@" && cd "$0" && sha256sum *', d] + cmd
                return cmd

            def xargs_multi(with_sha):
                d = fresh()
                pairs = " ".join(f"{os.path.join(d, n)} {u}" for n, u in zip(names, multi_urls))
                per_file = 'curl -sS -f -o "$0" "$1"' + (' && sha256sum "$0"' if with_sha else "")
                return ["sh", "-c", 'printf "%s\\n" $1 | xargs -P4 -n2 sh -c "$0"', per_file, pairs]

            return {
                "single: curl": (lambda: curl_single(False), None),
                "single: curl + sha256sum": (lambda: curl_single(True), {"big.bin": sha["big.bin"]}),
                "single: ckpt 1 stream": (lambda: ckpt_cmd(ep1, "bench/single", "--range-parts", "1"), None),
                "single: ckpt 1 stream --fsync": (lambda: ckpt_cmd(ep1, "bench/single", "--range-parts", "1",
                                                                   "--fsync"), None),
                "single: ckpt 4 ranges (default)": (lambda: ckpt_cmd(ep1, "bench/single", "--range-parts", "4"), None),
                "single: ckpt --direct": (lambda: ckpt_cmd(ep1, "bench/single", "--direct"), None),
                f"{nf} files: curl sequential": (lambda: curl_multi(False), None),
                f"{nf} files: curl -Z (8 parallel)": (lambda: curl_multi(True), None),
                f"{nf} files: xargs -P4 curl": (lambda: xargs_multi(False), None),
                f"{nf} files: curl sequential + sha256sum": (lambda: curl_multi(False, True),
                                                             {n: sha[n] for n in names}),
                f"{nf} files: xargs -P4 (curl && sha256sum)": (lambda: xargs_multi(True), {n: sha[n] for n in names}),
                f"{nf} files: ckpt --jobs 8": (lambda: ckpt_cmd(ep2, "bench/multi", "--jobs", "8", "--range-parts",
                                                                "1"), None),
                f"{nf} files: ckpt --jobs 8 --fsync": (lambda: ckpt_cmd(ep2, "bench/multi", "--jobs", "8",
                                                                        "--range-parts", "1", "--fsync"), None),
                f"{nf} files: ckpt --jobs 8 --direct": (lambda: ckpt_cmd(ep2, "bench/multi", "--jobs", "8",
                                                                         "--direct"), None),
            }

        cases = {}
        for hub in hubs:
            for k, v in cases_for(hub).items():
                cases[(hub, k)] = v
        load_before = os.getloadavg()
        times = {k: [] for k in cases}
        cpus = {k: [] for k in cases}
        order = list(cases)
        for run in range(args.runs):
            for key in (order if run % 2 == 0 else order[::-1]):
                make, digests = cases[key]
                dt, cpu, stdout = run_cmd(make(), env, capture=digests is not None)
                if digests is not None:
                    check_digests(stdout, digests, f"{key[0]} hub: {key[1]}")
                times[key].append(dt)
                cpus[key].append(cpu)
        load_after = os.getloadavg()
        big = args.big_mib << 20
        total = args.files * (args.file_mib << 20)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"runs: {args.runs} paired; single file {args.big_mib} MiB; repo {args.files} x {args.file_mib} MiB; "
              f"{os.cpu_count()} cores; load average (1/5/15 min) before {load_before[0]:.1f}/{load_before[1]:.1f}/"
              f"{load_before[2]:.1f}, after {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f}")
        print("| hub | case | median s | min-max s | MiB/s | ratio vs curl | CPU s (median) |")
        print("|---|---|---|---|---|---|---|")
        for hub, k in cases:
            size = big if k.startswith("single") else total
            base = med[(hub, "single: curl")] if k.startswith("single") else med[(hub, f"{nf} files: curl sequential")]
            v = times[(hub, k)]
            print(f"| {hub} | {k} | {med[(hub, k)]:.3f} | {min(v):.3f}-{max(v):.3f} | "
                  f"{size / med[(hub, k)] / 2**20:.0f} | {base / med[(hub, k)]:.2f}x | "
                  f"{statistics.median(cpus[(hub, k)]):.2f} |")
        print("targets (issue #15 item 6; medians):")
        for hub in hubs:
            m = {k: med[(hub, k)] for h, k in cases if h == hub}

            def verdict(name, ok, detail):
                print(f"  {hub}: {name}: {'holds' if ok else 'MISSED'} ({detail})")

            for row in ("single: ckpt 4 ranges (default)", "single: ckpt 1 stream", "single: ckpt --direct"):
                r = m["single: curl"] / m[row]
                verdict(f"{row} >= 0.9x curl", r >= 0.9, f"{r:.2f}x")
            r = m[f"{nf} files: curl sequential"] / m[f"{nf} files: ckpt --jobs 8"]
            verdict(f"{nf} files: ckpt --jobs 8 >= sequential curl", r >= 1.0, f"{r:.2f}x")
            for row, base in (("single: ckpt 4 ranges (default)", "single: curl + sha256sum"),
                              ("single: ckpt 1 stream", "single: curl + sha256sum"),
                              ("single: ckpt --direct", "single: curl + sha256sum"),
                              (f"{nf} files: ckpt --jobs 8", f"{nf} files: curl sequential + sha256sum"),
                              (f"{nf} files: ckpt --jobs 8", f"{nf} files: xargs -P4 (curl && sha256sum)")):
                r = m[base] / m[row]
                verdict(f"{row} ahead of {base.split(': ', 1)[1]}", r > 1.0, f"{r:.2f}x")
        print("all times (s):")
        for (hub, k), v in times.items():
            print(f"  {hub}: {k}: {' '.join(f'{x:.3f}' for x in v)}")
    finally:
        for s in servers:
            s.stdin.close()
            s.wait()
        if nginx_hub:
            nginx_hub.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
