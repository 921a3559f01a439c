// ckpt resolve org/name[@revision]: print the cached snapshot directory for a revision, so a
// launcher verifies and serves the same directory. --offline never touches the network.
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "ckpt/hub.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

int run_resolve(int argc, char** argv) {
  CLI::App app{"Print the local snapshot directory of org/name[@revision]. Without --offline the revision is "
               "first asked of the hub (one API call) so a moved branch is noticed; with --offline (or "
               "HF_HUB_OFFLINE=1) only refs/ in the cache is read. Exit 0: printed; 1: not cached; 2: usage."};
  app.name(argv[0]);
  std::string target, cache_dir;
  hub::FetchOptions o;
  app.add_option("REPO", target, "org/name[@revision]")->required();
  app.add_option("--cache-dir", cache_dir, "hub cache directory");
  app.add_option("--endpoint", o.endpoint, "hub URL (default: HF_ENDPOINT or https://huggingface.co)");
  app.add_option("--token", o.token, "access token");
  app.add_flag("--offline", o.offline, "read only the local cache");
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
  if (!o.offline && !hub::is_commit(spec->revision)) {
    o.retries = 2;
    o.stall_timeout = 10;
    o.stall_bytes = 1;
    auto rr = hub::resolve_remote(*spec, o);
    if (rr.ok) {
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
  std::printf("%s\n", res.snapshot_dir.string().c_str());
  return 0;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("resolve", "print the cached snapshot directory of org/name[@revision]", run_resolve);

}  // namespace ckpt::cli
