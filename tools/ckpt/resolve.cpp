// ckpt resolve org/name[@revision]: print the cached snapshot directory for a revision, so a
// launcher verifies and serves the same directory. It answers from the cache's refs without the
// network (as huggingface_hub's try_to_load_from_cache does); --refresh asks the hub first.
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "ckpt/hub.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

int run_resolve(int argc, char** argv) {
  CLI::App app{"Print the local snapshot directory of org/name[@revision], read from the cache's refs/ without "
               "the network. --refresh first asks the hub what the revision is now (one API call), so a moved "
               "branch is noticed. stderr says which was done. Exit 0: printed; 1: not cached; 2: usage."};
  app.name(argv[0]);
  std::string target, cache_dir;
  hub::FetchOptions o;
  app.add_option("REPO", target, "org/name[@revision]")->required();
  app.add_option("--cache-dir", cache_dir, "hub cache directory");
  app.add_option("--endpoint", o.endpoint, "hub URL (default: HF_ENDPOINT or https://huggingface.co)");
  app.add_option("--token", o.token, "access token");
  bool refresh = false;
  app.add_flag("--refresh", refresh, "ask the hub what the revision points at now before answering");
  app.add_flag("--offline", o.offline, "never touch the network, even with --refresh (also HF_HUB_OFFLINE=1)");
  if (auto code = parse_args(app, argc, argv)) return *code;
  std::string err;
  auto spec = hub::parse_repo_spec(target, &err);
  if (!spec) {
    std::fprintf(stderr, "ckpt resolve: %s\n", err.c_str());
    return 2;
  }
  o.cache_dir = cache_dir;
  hub::apply_environment(o);
  hub::RepoSpec local = *spec;
  bool asked_hub = false;
  if (refresh && o.offline) std::fprintf(stderr, "ckpt resolve: --refresh ignored: offline\n");
  if (refresh && !o.offline && !hub::is_commit(spec->revision)) {
    o.retries = 2;
    o.stall_timeout = 10;
    o.stall_bytes = 1;
    auto rr = hub::resolve_remote(*spec, o);
    if (rr.ok) {
      asked_hub = true;
      local.revision = rr.commit;
      auto cached = hub::resolve_local(*spec, o.cache_dir);
      if (cached.ok && cached.commit != rr.commit)
        std::fprintf(stderr, "ckpt resolve: %s@%s moved upstream: the hub says %s, the cache's refs say %s\n",
                     spec->repo_id.c_str(), spec->revision.c_str(), rr.commit.c_str(), cached.commit.c_str());
    } else if (rr.kind == hub::ErrorKind::network || rr.kind == hub::ErrorKind::http ||
               rr.kind == hub::ErrorKind::rate_limited) {
      std::fprintf(stderr, "ckpt resolve: hub unreachable (%s); using the cache's refs\n", rr.error.c_str());
    } else {
      std::fprintf(stderr, "ckpt resolve: %s\n", rr.error.c_str());
      return 1;
    }
  }
  auto res = hub::resolve_local(local, o.cache_dir);
  if (!res.ok) {
    std::fprintf(stderr, "ckpt resolve: %s\n", res.error.c_str());
    return 1;
  }
  if (hub::is_commit(spec->revision))
    std::fprintf(stderr, "ckpt resolve: commit %s, from the cache (no network)\n", res.commit.c_str());
  else if (asked_hub)
    std::fprintf(stderr, "ckpt resolve: %s is %s, as the hub says now\n", spec->revision.c_str(), res.commit.c_str());
  else
    std::fprintf(stderr, "ckpt resolve: %s is %s, from the cache's refs (no network; --refresh asks the hub)\n",
                 spec->revision.c_str(), res.commit.c_str());
  std::printf("%s\n", res.snapshot_dir.string().c_str());
  return 0;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("resolve", "print the cached snapshot directory of org/name[@revision]", run_resolve);

}  // namespace ckpt::cli
