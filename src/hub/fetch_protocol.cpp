// The fetch pipeline, protocol stage: HTTP error classification and retries, the revision
// and tree APIs, and the per-file metadata request (HEAD, same-host redirects only).
#include <algorithm>
#include <cctype>
#include <ctime>
#include <fstream>
#include <set>

#include "ckpt/json.h"

#include "hub/fetch_internal.h"

namespace ckpt::hub::pipeline {

// ---------------------------------------------------------------------------------------
// Error classification (X-Error-Code first, then the status), retry decisions.

namespace {

std::string short_body(const std::string& body) {
  // The hub's JSON {"error": "..."}; else the first line of text, bounded.
  if (body.empty()) return {};
  auto pr = json::parse(std::string_view(body).substr(0, 64 * 1024));
  if (pr.ok() && pr.value.is_object()) {
    if (auto e = pr.value.get_string("error")) return e->substr(0, 300);
  }
  std::string s = body.substr(0, std::min<size_t>(body.find('\n'), 200));
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

// Seconds a 429/503 asks us to wait: RateLimit (r=0 -> t+1) first, as huggingface_hub, then
// Retry-After (seconds or an HTTP-date); -1 when neither says. Parsers in hub/headers.cpp.
double server_wait(const HttpResponse& r) {
  if (auto w = parse_ratelimit_wait(r.header_all("ratelimit"))) return *w;
  if (auto w = parse_retry_after(r.header("retry-after"), std::time(nullptr))) return *w;
  return -1;
}

}  // namespace

Outcome classify(const HttpResponse& r, const std::string& what, bool have_token) {
  Outcome o;
  if (r.cancelled) {
    o.kind = ErrorKind::cancelled;
    o.message = what + ": cancelled";
    return o;
  }
  if (r.body_too_large) {  // an endless or absurd API answer: retrying would fetch it again
    o.kind = ErrorKind::protocol;
    o.message = what + ": the response body is larger than this client accepts (" +
                std::to_string(r.body.size() >> 20) + " MiB received); refused";
    return o;
  }
  if (!r.transport_ok() && !r.aborted_by_sink) {
    o.kind = ErrorKind::network;
    o.retryable = true;
    o.message = what + ": " + r.curl_error;
    return o;
  }
  long st = r.status;
  if (st >= 200 && st < 400) return o;
  std::string code = r.header("x-error-code");
  std::string emsg = r.header("x-error-message");
  std::string detail = emsg.empty() ? short_body(r.body) : emsg;
  std::string rid = r.header("x-request-id");
  std::string suffix = (detail.empty() ? "" : ": " + detail) + (rid.empty() ? "" : " (request id " + rid + ")");
  auto status_s = "HTTP " + std::to_string(st);
  if (code == "RepoNotFound") {
    o.kind = ErrorKind::repo_not_found;
    o.message = what + ": repository not found (" + status_s + ", RepoNotFound)" +
                (have_token ? "; check the repo id and that your token can read it"
                            : "; check the repo id, or set HF_TOKEN if it is private") + suffix;
  } else if (code == "GatedRepo") {
    o.kind = ErrorKind::gated;
    o.message = what + ": gated repository (" + status_s + ")" +
                (st == 401 || !have_token ? "; authenticate with a token (HF_TOKEN / --token) of an approved account"
                                          : "; your account is not in the authorized list, request access on the repo page") +
                suffix;
  } else if (code == "RevisionNotFound") {
    o.kind = ErrorKind::revision_not_found;
    o.message = what + ": revision not found (" + status_s + ", RevisionNotFound)" + suffix;
  } else if (code == "EntryNotFound") {
    o.kind = ErrorKind::entry_not_found;
    o.message = what + ": file not found in the repo at this revision (" + status_s + ", EntryNotFound)" + suffix;
  } else if (emsg == "Access to this resource is disabled.") {
    o.kind = ErrorKind::disabled;
    o.message = what + ": access to this repository is disabled (" + status_s + ")" + suffix;
  } else if (st == 401) {
    if (emsg == "Invalid credentials in Authorization header") {
      o.kind = ErrorKind::unauthorized;
      o.message = what + ": the token was rejected (HTTP 401, invalid credentials); check HF_TOKEN / --token";
    } else {
      o.kind = ErrorKind::repo_not_found;
      o.message = what + ": HTTP 401: repository not found, private or gated" +
                  std::string(have_token ? "" : " (no token was sent; set HF_TOKEN)") + suffix;
    }
  } else if (st == 408 || st == 429 || (st >= 500 && st <= 599)) {
    o.kind = st == 429 ? ErrorKind::rate_limited : ErrorKind::http;
    o.retryable = true;
    o.retry_after = server_wait(r);
    o.message = what + ": " + status_s + suffix;
  } else {
    o.kind = ErrorKind::http;
    o.message = what + ": " + status_s + suffix;
  }
  return o;
}

// A small request (API / HEAD) with retries on network errors, 408, 429 and 5xx.
// `final_status`: statuses returned at once, unretried (a HEAD the server refuses).
HttpResponse request_with_retries(Ctx& ctx, const HttpRequest& req, const std::string& what, Outcome* out,
                                  int* retries_used, std::initializer_list<long> final_status) {
  HttpResponse r;
  for (int attempt = 0;; ++attempt) {
    r = perform(req);
    *out = classify(r, what, !ctx.opts.token.empty());
    if (std::find(final_status.begin(), final_status.end(), r.status) != final_status.end()) return r;
    if (out->kind == ErrorKind::none || !out->retryable || attempt >= ctx.opts.retries || ctx.cancelled()) return r;
    double d = ctx.jitter_delay(attempt, out->retry_after);
    ctx.log(out->message + "; retry " + std::to_string(attempt + 1) + "/" + std::to_string(ctx.opts.retries) +
            " in " + std::to_string(static_cast<int>(d * 1000)) + " ms");
    if (retries_used) ++*retries_used;
    ctx.sleep_for(d);
  }
}

namespace {

// huggingface_hub's _normalize_etag: etag.lstrip("W/").strip('"') -- the blob is named by it.
std::string normalize_etag(std::string e) {
  size_t a = 0;
  while (a < e.size() && (e[a] == 'W' || e[a] == '/')) ++a;
  while (a < e.size() && e[a] == '"') ++a;
  size_t b = e.size();
  while (b > a && e[b - 1] == '"') --b;
  return e.substr(a, b - a);
}

bool safe_etag(const std::string& e) {
  if (e.empty() || e.size() > 200 || e == "." || e == "..") return false;
  for (char c : e)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace

bool http_scheme(const std::string& url) {
  auto o = url_origin(url);
  return o.rfind("http://", 0) == 0 || o.rfind("https://", 0) == 0;
}

// ---------------------------------------------------------------------------------------
// File metadata.

namespace {

std::string resolve_url(const Ctx& ctx, const std::string& path) {
  return ctx.opts.endpoint + "/" + ctx.url_prefix() + ctx.spec.repo_id + "/resolve/" + percent_encode(ctx.commit, false) +
         "/" + percent_encode(path, true);
}

// The metadata request as a GET of the first byte (huggingface.js and hf_transfer ask that way):
// for servers that refuse HEAD. The body is never read (the transfer stops at the headers of a
// 2xx); error bodies are kept for the message.
void make_metadata_get(HttpRequest& req) {
  req.method = "GET";
  req.headers.push_back("Range: bytes=0-0");
  req.max_body = 64u << 10;
  req.on_headers = [](long status, const HeaderList&) { return status < 200 || status >= 300; };
}

// The complete size the server reports for a download URL, from a ranged GET of its first byte
// (206: Content-Range's complete length; 200: an unencoded Content-Length), following up to 10
// redirects; nullopt when it does not say.
std::optional<uint64_t> probe_size(Ctx& ctx, std::string url, const std::string& path, FileResult& fr) {
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest req = ctx.base_request("GET", url);
    make_metadata_get(req);
    Outcome o;
    HttpResponse r = request_with_retries(ctx, req, path, &o, &fr.retries);
    if (o.kind != ErrorKind::none) return std::nullopt;
    if (r.status >= 300 && r.status < 400) {
      auto loc = r.header("location");
      if (loc.empty()) return std::nullopt;
      url = resolve_location(url, loc);
      if (!http_scheme(url)) return std::nullopt;
      continue;
    }
    if (!r.header("content-encoding").empty() && r.header("content-encoding") != "identity") return std::nullopt;
    if (r.status == 206) {
      auto cr = parse_content_range(r.header("content-range"));
      return cr ? cr->total : std::nullopt;
    }
    if (r.status == 200) return parse_decimal_u64(r.header("content-length"));
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

// HEAD /resolve/<commit>/<path>, as huggingface_hub's get_hf_file_metadata: a relative
// Location (the 307 to /api/resolve-cache/...) is followed; an absolute one is where the GET
// goes and the metadata comes from the response that named it. A same-host absolute redirect
// whose response lacks the metadata (an alternative endpoint, HH#4739) is followed as well.
// Values missing from the last response come from earlier hops, then from the tree listing.
bool head_metadata(Ctx& ctx, const std::string& path, const TreeEntry* te, Meta& meta, FileResult& fr) {
  std::string url = resolve_url(ctx, path);
  std::string commit_seen, linked_etag_seen, etag_seen, linked_size_seen;
  bool use_get = false;  // the server refused HEAD (405 / 501): GET the first byte instead
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest req = ctx.base_request(use_get ? "GET" : "HEAD", url);
    if (use_get) make_metadata_get(req);
    Outcome o;
    HttpResponse r = request_with_retries(ctx, req, path, &o, &fr.retries, {405, 501});
    if (!use_get && (r.status == 405 || r.status == 501)) {
      ctx.log(path + ": the server refuses HEAD (HTTP " + std::to_string(r.status) +
              "); reading the file's metadata from a GET of its first byte");
      use_get = true;
      --hop;
      continue;
    }
    std::string commit = r.header("x-repo-commit");
    if (!commit.empty()) commit_seen = commit;
    if (o.kind != ErrorKind::none) {
      fr.kind = o.kind;
      fr.error = o.message;
      if (o.kind == ErrorKind::entry_not_found && !commit_seen.empty() && !ctx.local && is_commit(commit_seen) &&
          safe_repo_path(path)) {
        // huggingface_hub's negative cache: .no_exist/<commit>/<path>
        auto p = ctx.repo_dir / ".no_exist" / commit_seen / path;
        std::error_code ec;
        fs::create_directories(p.parent_path(), ec);
        std::ofstream(p, std::ios::app);
      }
      return false;
    }
    bool is_redirect = r.status >= 300 && r.status < 400;
    // X-Linked-* (the hub's word on the content) beat a plain ETag / Content-Length, which on a
    // storage server after a redirect may describe something else (an S3 multipart etag).
    std::string linked_etag = normalize_etag(r.header("x-linked-etag"));
    std::string plain_etag = normalize_etag(r.header("etag"));
    std::string linked_size = r.header("x-linked-size");
    std::string plain_size;
    bool encoded = !r.header("content-encoding").empty() && r.header("content-encoding") != "identity";
    if (!is_redirect && !encoded && r.status == 200) plain_size = r.header("content-length");
    if (r.status == 206 && !encoded)  // the GET fallback: the complete length of Content-Range
      if (auto cr = parse_content_range(r.header("content-range")); cr && cr->total)
        plain_size = std::to_string(*cr->total);
    auto loc = r.header("location");
    if (is_redirect && loc.empty()) {
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": HTTP " + std::to_string(r.status) + " redirect without Location on the metadata request";
      return false;
    }
    if (!is_redirect && r.status != 200 && !(use_get && r.status == 206)) {
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": unexpected HTTP " + std::to_string(r.status) + " on the metadata request";
      return false;
    }
    if (is_redirect) {
      std::string next = resolve_location(url, loc);
      if (!http_scheme(next)) {
        fr.kind = ErrorKind::protocol;
        fr.error = path + ": redirect to a non-HTTP location refused (" + next.substr(0, 100) + ")";
        return false;
      }
      bool relative = loc.find("://") == std::string::npos && loc.rfind("//", 0) != 0;
      bool same_host = url_origin(next) == url_origin(url);
      bool complete = !commit_seen.empty() && !(linked_etag.empty() && plain_etag.empty()) && parse_u64(linked_size);
      if (relative || (same_host && !complete)) {
        if (!linked_etag.empty()) linked_etag_seen = linked_etag;
        if (!plain_etag.empty()) etag_seen = plain_etag;
        if (!linked_size.empty()) linked_size_seen = linked_size;
        url = next;  // same host: follow, keep auth
        continue;
      }
      meta.location = next;
      meta.cross_host = !same_host;
    } else {
      meta.location = url;
    }
    meta.commit = commit_seen;
    for (const std::string* e : {&linked_etag, &linked_etag_seen, &plain_etag, &etag_seen})
      if (meta.etag.empty()) meta.etag = *e;
    auto size = parse_u64(linked_size);
    if (!size) size = parse_u64(linked_size_seen);
    if (!size) size = parse_u64(plain_size);
    // The tree listing fills what the metadata response left out (and is checked against
    // it where both exist, in fetch_checked_metadata).
    std::string tree_hash = te ? (!te->lfs_oid.empty() ? te->lfs_oid : te->oid) : std::string();
    if (meta.etag.empty() && !tree_hash.empty() && etag_kind(tree_hash) != EtagKind::opaque) {
      ctx.log(path + ": no ETag on the metadata response; using the tree listing's hash " + tree_hash);
      meta.etag = tree_hash;
    }
    if (!size && te && te->size) {
      ctx.log(path + ": no X-Linked-Size/Content-Length on the metadata response; using the tree listing's size");
      size = te->size;
    }
    if (!size && !meta.commit.empty() && !meta.etag.empty()) {
      // Neither the hub nor a listing gives the size. When the bytes can be hash-verified, the
      // download URL may tell it (a ranged GET of one byte): a wrong answer cannot pass the hash.
      std::string e = meta.etag;
      for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      bool hashable = etag_kind(e) != EtagKind::opaque ||
                      (te && etag_kind(!te->lfs_oid.empty() ? te->lfs_oid : te->oid) != EtagKind::opaque);
      if (hashable) {
        size = probe_size(ctx, meta.location, path, fr);
        if (size) ctx.log(path + ": no size in the metadata; the download URL reports " + std::to_string(*size) + " bytes");
      }
    }
    std::vector<std::string> missing;
    if (meta.commit.empty()) missing.push_back("X-Repo-Commit");
    if (meta.etag.empty()) missing.push_back("ETag/X-Linked-Etag");
    if (!size) missing.push_back("X-Linked-Size/Content-Length");
    if (!missing.empty()) {
      std::string m;
      for (auto& s : missing) m += (m.empty() ? "" : ", ") + s;
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": the hub's metadata response lacks " + m +
                 " (a proxy or mirror in the way? huggingface_hub fails the same way)";
      return false;
    }
    meta.size = *size;
    return true;
  }
  fr.kind = ErrorKind::protocol;
  fr.error = path + ": too many same-host redirects on the metadata request (a redirect loop?)";
  return false;
}

namespace {

std::string lower_hex(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// HEAD the file and check what the hub says against the commit being fetched and the tree
// listing; on failure `fr` holds the classified error. `outcome` ends the message
// ("nothing published" / "nothing written").
bool fetch_checked_metadata(Ctx& ctx, const TreeEntry& te, const std::string& path, Meta& meta, FileResult& fr,
                            const char* outcome) {
  if (!head_metadata(ctx, path, &te, meta, fr)) return false;
  fr.etag = meta.etag;
  fr.expected = meta.size;
  auto fail = [&](std::string msg) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": " + msg + "; " + outcome;
    return false;
  };
  if (meta.commit != ctx.commit)
    return fail("the hub answered for commit " + meta.commit + " while fetching commit " + ctx.commit +
                " (the revision moved or a proxy rewrote it)");
  if (!safe_etag(meta.etag)) return fail("unusable etag '" + meta.etag.substr(0, 80) + "'");
  if (te.size && *te.size != meta.size) {
    ctx.tree_contradicted = true;
    return fail("the tree listing says " + std::to_string(*te.size) + " bytes but the file metadata says " +
                std::to_string(meta.size));
  }
  // The hash the bytes must have: the etag (sha256 for LFS, git sha1 otherwise, any case),
  // else the listing's.
  std::string etag_l = lower_hex(meta.etag);
  EtagKind ek = etag_kind(etag_l);
  std::string tree_hash = lower_hex(!te.lfs_oid.empty() ? te.lfs_oid : te.oid);
  EtagKind tk = etag_kind(tree_hash);
  if (ek != EtagKind::opaque) {
    // A git-sha1 etag is compared with the listing's oid; a sha256 one with its lfs.oid.
    bool comparable = tk == ek && (ek == EtagKind::git_sha1 || !te.lfs_oid.empty());
    if (comparable && tree_hash != etag_l) {
      ctx.tree_contradicted = true;
      return fail("the tree listing's hash " + tree_hash + " differs from the file's etag " + meta.etag);
    }
    meta.hash = etag_l;
    meta.hash_kind = ek;
  } else if (tk != EtagKind::opaque) {
    meta.hash = tree_hash;
    meta.hash_kind = tk;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Revision and tree.
RemoteRevision remote_revision(Ctx& ctx, std::vector<std::string>* siblings) {
  RemoteRevision rr;
  std::string url = ctx.opts.endpoint + "/api/" + ctx.type_plural() + "/" + ctx.spec.repo_id + "/revision/" +
                    percent_encode(ctx.spec.revision, false);
  HttpRequest req = ctx.base_request("GET", url);
  Outcome o;
  HttpResponse r = request_with_retries(ctx, req, ctx.spec.repo_id + "@" + ctx.spec.revision, &o);
  if (o.kind != ErrorKind::none) {
    rr.kind = o.kind;
    rr.error = o.message;
    return rr;
  }
  if (r.status != 200) {
    rr.kind = ErrorKind::http;
    rr.error = ctx.spec.repo_id + "@" + ctx.spec.revision + ": unexpected HTTP " + std::to_string(r.status) +
               " from the revision API";
    return rr;
  }
  auto pr = json::parse(r.body);
  if (!pr.ok() || !pr.value.is_object()) {
    rr.kind = ErrorKind::protocol;
    rr.error = ctx.spec.repo_id + ": the revision API answered with invalid JSON" +
               (pr.error ? " (" + pr.error->message + ")" : std::string());
    return rr;
  }
  auto sha = pr.value.get_string("sha");
  if (!sha || !is_commit(*sha)) {
    rr.kind = ErrorKind::protocol;
    rr.error = ctx.spec.repo_id + "@" + ctx.spec.revision + ": the revision API gave no 40-hex commit sha";
    return rr;
  }
  if (siblings) {
    if (auto* s = pr.value.find("siblings"); s && s->is_array())
      for (const auto& e : s->as_array())
        if (e.is_object())
          if (auto f = e.get_string("rfilename")) siblings->push_back(*f);
  }
  rr.ok = true;
  rr.commit = *sha;
  return rr;
}

namespace {

std::string next_link(const std::string& link) {
  // Link: <url>; rel="next", <url2>; rel="prev"
  size_t p = 0;
  while (p < link.size()) {
    auto lt = link.find('<', p);
    if (lt == std::string::npos) break;
    auto gt = link.find('>', lt);
    if (gt == std::string::npos) break;
    auto comma = link.find(",", gt);
    auto params = link.substr(gt + 1, comma == std::string::npos ? std::string::npos : comma - gt - 1);
    if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos)
      return link.substr(lt + 1, gt - lt - 1);
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  return {};
}

}  // namespace

bool list_tree(Ctx& ctx, std::vector<TreeEntry>& out, Outcome& o) {
  std::string url = ctx.opts.endpoint + "/api/" + ctx.type_plural() + "/" + ctx.spec.repo_id + "/tree/" +
                    percent_encode(ctx.commit, false) + "?recursive=true&expand=false";
  std::set<std::string> seen_urls;
  for (int page = 0; page < 100000 && !url.empty(); ++page) {
    if (!seen_urls.insert(url).second) {
      o.kind = ErrorKind::protocol;
      o.message = ctx.spec.repo_id + ": tree pagination loops";
      return false;
    }
    HttpRequest req = ctx.base_request("GET", url);
    HttpResponse r = request_with_retries(ctx, req, ctx.spec.repo_id + " tree listing", &o);
    if (o.kind != ErrorKind::none) return false;
    auto pr = json::parse(r.body);
    if (r.status != 200 || !pr.ok() || !pr.value.is_array()) {
      o.kind = ErrorKind::protocol;
      o.message = ctx.spec.repo_id + ": the tree API answered HTTP " + std::to_string(r.status) + " without a JSON list";
      return false;
    }
    for (const auto& e : pr.value.as_array()) {
      auto type = e.is_object() ? e.get_string("type") : std::nullopt;
      if (!e.is_object() || type.value_or("file") != "file") continue;
      auto p = e.get_string("path");
      if (!p) continue;
      TreeEntry te;
      te.path = *p;
      const json::Value* sz = e.find("size");
      if (auto s = e.get_int("size"); s && *s >= 0) te.size = static_cast<uint64_t>(*s);
      te.oid = e.get_string("oid").value_or("");
      const json::Value* lfs = e.find("lfs");
      bool lfs_ok = true;
      if (lfs && lfs->is_object()) {
        te.lfs_oid = lfs->get_string("oid").value_or(lfs->get_string("sha256").value_or(""));
        auto ls = lfs->get_int("size");
        if (ls && *ls >= 0) {
          te.size = static_cast<uint64_t>(*ls);
          te.lfs_size = *ls;
        }
        te.has_lfs = true;
        lfs_ok = ls && *ls >= 0 && lfs->get_string("oid");
      } else if (lfs && !lfs->is_null()) {
        lfs_ok = false;
      }
      // Kept for trees/<commit>.json only when every field huggingface_hub stores is well formed.
      if (const json::Value* xh = e.find("xetHash"); xh && xh->is_string()) te.xet_hash = xh->as_string();
      te.cacheable = type.has_value() && sz && sz->is_int() && sz->as_int() >= 0 && e.get_string("oid") && lfs_ok;
      if (te.cacheable) te.raw_size = sz->as_int();
      out.push_back(std::move(te));
      if (out.size() > 10'000'000) {
        o.kind = ErrorKind::protocol;
        o.message = ctx.spec.repo_id + ": tree listing too large";
        return false;
      }
    }
    std::string next = next_link(r.header_all("link"));
    if (!next.empty()) {
      next = resolve_location(url, next);
      if (url_origin(next) != ctx.origin) {
        o.kind = ErrorKind::protocol;
        o.message = ctx.spec.repo_id + ": tree pagination points to another host (" + url_origin(next) + ")";
        return false;
      }
    }
    url = next;
  }
  return true;
}

}  // namespace ckpt::hub::pipeline
