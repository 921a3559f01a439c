// The fetch pipeline: revision -> commit (API), tree listing at the commit, per-file
// HEAD (same-host redirects only), transfer with stall detection / retries / resume /
// parallel ranges, size + hash verification, atomic publish in huggingface_hub's layout.
// This file is the orchestration (plan, workers, refs, offline mode, resolve_*); the stages
// are fetch_protocol.cpp, fetch_transfer.cpp, fetch_publish.cpp and fetch_local.cpp
// (fetch_internal.h).
#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <thread>

#include "hub/fetch_internal.h"

namespace ckpt::hub {

using namespace pipeline;

namespace {

bool selected(const FetchOptions& o, const std::string& path) {
  if (!o.include.empty()) {
    bool any = false;
    for (const auto& g : o.include) any = any || glob_match(g, path);
    if (!any) return false;
  }
  for (const auto& g : o.exclude)
    if (glob_match(g, path)) return false;
  return true;
}

void walk_snapshot(const fs::path& root, const fs::path& dir, std::vector<std::string>& out, int depth) {
  if (depth > 32 || out.size() > 1'000'000) return;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    auto st = it->symlink_status(ec);
    if (fs::is_directory(st)) {
      walk_snapshot(root, it->path(), out, depth + 1);
    } else {
      out.push_back(fs::relative(it->path(), root, ec).generic_string());
    }
  }
}

FetchResult fetch_offline(Ctx& ctx, FetchResult res) {
  if (ctx.local) {
    res.kind = ErrorKind::offline_missing;
    res.error = "offline mode with --local-dir: nothing to resolve without the network";
    return res;
  }
  auto rl = resolve_local(ctx.spec, ctx.opts.cache_dir);
  if (!rl.ok) {
    res.kind = ErrorKind::offline_missing;
    res.error = rl.error + " (offline mode: the network was not used)";
    return res;
  }
  res.commit = rl.commit;
  res.snapshot_dir = rl.snapshot_dir;
  std::vector<std::string> files;
  // With a cached listing (trees/<commit>.json) the snapshot is checked against it, as
  // snapshot_download(local_files_only=True) does: a file it lists that is missing (or, here, of
  // another size) is reported instead of the partial snapshot passing for whole.
  auto listing = read_tree_cache(ctx.repo_dir / "trees" / (rl.commit + ".json"));
  if (!ctx.opts.paths.empty()) {
    files = ctx.opts.paths;
  } else if (listing) {
    for (const auto& [p, size] : *listing)
      if (selected(ctx.opts, p)) files.push_back(p);
  } else {
    walk_snapshot(rl.snapshot_dir, rl.snapshot_dir, files, 0);
    std::sort(files.begin(), files.end());
    std::erase_if(files, [&](const std::string& p) { return !selected(ctx.opts, p); });
  }
  res.ok = true;
  for (const auto& p : files) {
    FileResult fr;
    fr.path = p;
    uint64_t sz = 0;
    std::optional<uint64_t> listed;
    if (listing)
      if (auto it = listing->find(p); it != listing->end()) listed = it->second;
    if (!safe_repo_path(p)) {
      fr.kind = ErrorKind::protocol;
      fr.error = "unsafe file name in the cached listing: '" + p.substr(0, 200) + "'";
      res.ok = false;
    } else if (!regular_file_exists(rl.snapshot_dir / p, &sz)) {
      fr.kind = ErrorKind::offline_missing;
      fr.error = p + ": not in the cached snapshot " + rl.commit + (listed ? " (listed in its trees/ entry)" : "") +
                 " (offline mode)";
      fr.expected = listed.value_or(0);
      res.ok = false;
    } else if (listed && *listed != sz) {
      fr.kind = ErrorKind::integrity;
      fr.error = p + ": the cached file has " + std::to_string(sz) + " bytes, the commit's listing says " +
                 std::to_string(*listed) + " (offline mode)";
      fr.expected = *listed;
      res.ok = false;
    } else {
      fr.ok = fr.cached = true;
      fr.expected = fr.received = sz;
    }
    res.files.push_back(std::move(fr));
  }
  if (!res.ok) {
    size_t failed = 0;
    for (const auto& f : res.files) {
      failed += !f.ok;
      if (!f.ok && res.kind == ErrorKind::none) res.kind = f.kind;
    }
    res.error = std::to_string(failed) + " of " + std::to_string(res.files.size()) +
                " files missing or different in the cached snapshot (offline mode: the network was not used)";
  }
  return res;
}

}  // namespace

ResolveResult resolve_local(const RepoSpec& spec, const fs::path& cache_dir_in) {
  ResolveResult rr;
  fs::path cache_dir = cache_dir_in.empty() ? default_cache_dir() : cache_dir_in;
  fs::path repo_dir = cache_dir / repo_folder(spec);
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec)) {
    rr.error = spec.repo_id + " is not in the cache (" + repo_dir.string() + " does not exist)";
    return rr;
  }
  if (is_commit(spec.revision)) {
    rr.commit = spec.revision;
  } else {
    if (!safe_repo_path(spec.revision)) {
      rr.error = "invalid revision '" + spec.revision + "'";
      return rr;
    }
    fs::path ref = repo_dir / "refs" / spec.revision;
    std::ifstream f(ref, std::ios::binary);
    if (!f) {
      rr.error = spec.repo_id + "@" + spec.revision + ": no refs/" + spec.revision + " in " + repo_dir.string();
      return rr;
    }
    std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!is_commit(content)) {
      std::string shown = content.substr(0, 60);
      for (auto& c : shown)
        if (c == '\n') c = '~';
      rr.error = spec.repo_id + ": refs/" + spec.revision + " is not exactly a 40-hex commit (found '" + shown +
                 "'); huggingface_hub would fail on it too";
      return rr;
    }
    rr.commit = content;
  }
  rr.snapshot_dir = repo_dir / "snapshots" / rr.commit;
  if (!fs::is_directory(rr.snapshot_dir, ec)) {
    rr.error = spec.repo_id + "@" + spec.revision + ": snapshot " + rr.commit + " is not in the cache";
    return rr;
  }
  rr.ok = true;
  return rr;
}

RemoteRevision resolve_remote(const RepoSpec& spec, const FetchOptions& opts_in) {
  Ctx ctx{spec, opts_in};
  apply_environment(ctx.opts);
  ctx.origin = url_origin(ctx.opts.endpoint);
  if (ctx.opts.offline) {
    RemoteRevision rr;
    rr.kind = ErrorKind::offline_missing;
    rr.error = "offline mode";
    return rr;
  }
  return remote_revision(ctx, nullptr);
}

FetchResult fetch(const RepoSpec& spec, const FetchOptions& opts_in) {
  auto t0 = Clock::now();
  FetchResult res;
  res.spec = spec;
  Ctx ctx{spec, opts_in};
  apply_environment(ctx.opts);
  ctx.origin = url_origin(ctx.opts.endpoint);
  if (ctx.opts.jobs == 0) ctx.opts.jobs = 1;
  if (ctx.opts.jobs > 64) ctx.opts.jobs = 64;
  if (ctx.opts.range_parts > 32) ctx.opts.range_parts = 32;
  if (!ctx.opts.local_dir.empty()) {
    ctx.local = true;
    ctx.repo_dir = ctx.opts.local_dir;
  } else {
    ctx.repo_dir = ctx.opts.cache_dir / repo_folder(spec);
    ctx.locks_dir = ctx.opts.cache_dir / ".locks" / repo_folder(spec);
  }
  auto finish = [&](FetchResult& r) {
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (const auto& f : r.files) r.bytes_downloaded += f.downloaded;
    return r;
  };
  for (const auto& p : ctx.opts.paths) {
    if (!safe_repo_path(p)) {
      res.kind = ErrorKind::protocol;
      res.error = "unsafe file name '" + p + "' (absolute, '..' or backslash): refused";
      return finish(res);
    }
  }
  if (ctx.opts.offline) {
    res = fetch_offline(ctx, std::move(res));
    return finish(res);
  }
  // A commit revision whose requested files are all cached needs no network.
  if (!ctx.local && is_commit(spec.revision) && !ctx.opts.paths.empty()) {
    auto snap = ctx.repo_dir / "snapshots" / spec.revision;
    bool all = true;
    for (const auto& p : ctx.opts.paths) all = all && regular_file_exists(snap / p, nullptr);
    if (all) {
      res = fetch_offline(ctx, std::move(res));
      return finish(res);
    }
  }
  std::vector<std::string> siblings;
  auto rr = remote_revision(ctx, &siblings);
  if (!rr.ok) {
    res.kind = rr.kind;
    res.error = rr.error;
    return finish(res);
  }
  ctx.commit = res.commit = rr.commit;
  std::vector<TreeEntry> tree;
  Outcome to;
  bool listed = list_tree(ctx, tree, to);
  if (!listed) {
    if (to.kind == ErrorKind::http || to.kind == ErrorKind::protocol) {
      ctx.log("warning: " + to.message + "; using the file list from the revision API (no sizes)");
      tree.clear();
      for (auto& s : siblings) {
        TreeEntry te;
        te.path = s;
        tree.push_back(std::move(te));
      }
    } else {
      res.kind = to.kind;
      res.error = to.message;
      return finish(res);
    }
  }
  std::vector<TreeEntry> plan;
  std::vector<FileResult> rejected;
  if (!ctx.opts.paths.empty()) {
    std::map<std::string, const TreeEntry*> by_path;
    for (const auto& t : tree) by_path[t.path] = &t;
    for (const auto& p : ctx.opts.paths) {
      auto it = by_path.find(p);
      TreeEntry bare;
      bare.path = p;
      plan.push_back(it != by_path.end() ? *it->second : bare);
    }
  } else {
    for (const auto& t : tree)
      if (selected(ctx.opts, t.path)) plan.push_back(t);
  }
  {  // one worker per path, even if the listing repeats one (the last entry wins, as a dict)
    std::map<std::string, size_t> last;
    for (size_t i = 0; i < plan.size(); ++i) last[plan[i].path] = i;
    std::vector<TreeEntry> unique;
    for (size_t i = 0; i < plan.size(); ++i)
      if (last[plan[i].path] == i) unique.push_back(std::move(plan[i]));
    plan = std::move(unique);
  }
  std::erase_if(plan, [&](const TreeEntry& t) {
    bool bad = !safe_repo_path(t.path) || (ctx.local && (t.path == ".cache" || t.path.rfind(".cache/", 0) == 0));
    if (bad) {
      FileResult fr;
      fr.path = t.path;
      fr.kind = ErrorKind::protocol;
      fr.error = "unsafe file name in the repo listing: '" + t.path.substr(0, 200) +
                 "' would escape the target directory; refused";
      rejected.push_back(std::move(fr));
    }
    return bad;
  });
  if (ctx.opts.on_plan) {
    uint64_t known = 0;
    for (const auto& t : plan) known = t.size.value_or(0) > UINT64_MAX - known ? UINT64_MAX : known + t.size.value_or(0);
    ctx.opts.on_plan(plan.size(), known);
  }
  if (ctx.local) {
    ensure_local_cache_dir(ctx.repo_dir);
    res.snapshot_dir = ctx.repo_dir;
  } else {
    res.snapshot_dir = ctx.repo_dir / "snapshots" / ctx.commit;
  }
  // trees/<commit>.json: written, as huggingface_hub >= 1.22 does, from a complete listing and
  // before any file, so a snapshot this run leaves incomplete (failure, Ctrl-C, --include) is
  // reported by snapshot_download(local_files_only=True) instead of loading silently.
  bool wrote_tree = listed && write_tree_cache(ctx, ctx.local ? ctx.repo_dir / ".cache" / "huggingface" : ctx.repo_dir, tree);
  // Workers: one file each, `jobs` at a time.
  std::vector<FileResult> results(plan.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    while (true) {
      size_t i = next++;
      if (i >= plan.size()) return;
      results[i].path = plan[i].path;
      if (ctx.cancelled()) {
        results[i].kind = ErrorKind::cancelled;
        results[i].error = "cancelled";
        continue;
      }
      try {
        if (ctx.local) fetch_one_local(ctx, plan[i], results[i]);
        else fetch_one_cache(ctx, plan[i], results[i]);
      } catch (const std::exception& e) {
        results[i].ok = false;
        results[i].kind = ErrorKind::io;
        results[i].error = plan[i].path + ": " + e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  unsigned n = std::min<unsigned>(ctx.opts.jobs, static_cast<unsigned>(std::max<size_t>(plan.size(), 1)));
  for (unsigned i = 0; i + 1 < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  res.files = std::move(results);
  for (auto& r : rejected) res.files.push_back(std::move(r));
  res.ok = true;
  for (const auto& f : res.files)
    if (!f.ok) {
      res.ok = false;
      if (res.kind == ErrorKind::none) res.kind = f.kind;
    }
  if (wrote_tree && ctx.tree_contradicted) {
    // The hub's own metadata disagreed with its listing: the cache keeps no listing it cannot trust.
    std::error_code ec;
    fs::remove((ctx.local ? ctx.repo_dir / ".cache" / "huggingface" : ctx.repo_dir) / "trees" / (ctx.commit + ".json"), ec);
  }
  if (!ctx.local && res.ok) {
    std::error_code ec;
    fs::create_directories(res.snapshot_dir, ec);
    // refs/<revision> last, only when every requested file is published.
    fs::path ref = ctx.repo_dir / "refs" / spec.revision;
    std::ifstream cur_ref(ref, std::ios::binary);
    std::string cur((std::istreambuf_iterator<char>(cur_ref)), std::istreambuf_iterator<char>());
    if (spec.revision != ctx.commit && cur != ctx.commit) {  // as huggingface_hub: only when it changes
      std::string err;
      if (!write_file_atomic(ctx.repo_dir / "refs" / spec.revision, ctx.commit, &err)) {
        res.ok = false;
        res.kind = ErrorKind::io;
        res.error = err;
      }
    }
  }
  if (!res.ok && res.error.empty()) {
    size_t failed = 0;
    for (const auto& f : res.files) failed += !f.ok;
    res.error = std::to_string(failed) + " of " + std::to_string(res.files.size()) + " files failed";
  }
  return finish(res);
}

}  // namespace ckpt::hub
