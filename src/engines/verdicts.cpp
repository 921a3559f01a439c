// The one place where a finding's severity depends on engines. Existing codes whose outcome
// the profiles decide (AR001, AR002, AR003/AR012 in their strict-loader form, IX002) are mapped
// to a loader behaviour; the engine-specific codes (CT011, CT012, CF006 rope defaults, CF012,
// QZ012, TK020, IX014) arrive already naming their engines. Everything else is untouched.
#include <algorithm>

#include "ckpt/engines.h"
#include "engines/glob.h"

namespace ckpt::engines {

namespace {

// Which loader behaviour decides a finding (nullptr: the finding is not engine-dependent).
const Behaviour* aspect(const Profile& p, const Finding& f) {
  if (f.code == "AR002") return &p.loader.unexpected_tensors;
  if (f.code == "AR001") return &p.loader.missing_tensors;
  if (f.code == "IX002") return &p.loader.stray_shards;
  // AR003 and AR012 are warnings exactly when mlx-lm's strict load fails (info otherwise).
  if (f.code == "AR012" && f.severity == Severity::warning) return &p.loader.tied_head;
  if (f.code == "AR003" && f.severity == Severity::warning) return &p.loader.rotary_buffers;
  return nullptr;
}

bool mapped(const Finding& f) {
  return f.code == "AR002" || f.code == "AR001" || f.code == "IX002" ||
         ((f.code == "AR012" || f.code == "AR003") && f.severity == Severity::warning);
}

Verdict verdict_for(const Profile& p, const Finding& f) {
  const Behaviour* b = aspect(p, f);
  if (!b) return Verdict::unknown;
  if (f.code == "IX002" && !p.loader.shard_glob.empty()) {
    // A glob-based loader opens the stray exactly when its name matches the glob.
    std::string_view file = f.file;
    if (!p.loader.glob_recursive && file.find('/') != std::string_view::npos) return Verdict::tolerates;
    std::string_view base = file.substr(file.rfind('/') == std::string_view::npos ? 0 : file.rfind('/') + 1);
    return glob_match(p.loader.shard_glob, base) ? Verdict::breaks : Verdict::tolerates;
  }
  return b->verdict;
}

std::vector<std::string> names(const std::vector<const Profile*>& ps) {
  std::vector<std::string> out;
  for (const Profile* p : ps) out.emplace_back(p->name);
  return out;
}

bool any_reference(const std::vector<const Profile*>& ps) {
  return std::any_of(ps.begin(), ps.end(), [](const Profile* p) { return p->reference; });
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

void add_hint(Finding& f, const std::string& h) {
  if (f.hint.find(h) != std::string::npos) return;
  f.hint = f.hint.empty() ? h : f.hint + "; " + h;
}

// Returns false when the finding is dropped.
bool judge_mapped(Finding& f, const Selection& sel) {
  const auto& all = all_profiles();
  std::vector<const Profile*> breaks, tolerates, unknown;
  for (const Profile& p : all) {
    Verdict v = verdict_for(p, f);
    (v == Verdict::breaks ? breaks : v == Verdict::tolerates ? tolerates : v == Verdict::unknown ? unknown : unknown)
        .push_back(&p);
  }
  if (f.code == "AR001")
    add_hint(f, "transformers initialises missing weights randomly (a log warning, then garbage output); mlx-lm "
                "and SwiftLM refuse the load");
  // The portable verdict.
  Severity portable = f.severity;
  std::vector<std::string> portable_engines;
  if (!breaks.empty()) {
    portable = any_reference(breaks) ? Severity::error : Severity::warning;
    if (!tolerates.empty()) portable_engines = names(breaks);
  } else if (!tolerates.empty() && f.severity == Severity::error) {
    portable = Severity::warning;  // every engine with a known behaviour tolerates it
  }
  if (sel.portable()) {
    f.severity = portable;
    f.engines = portable_engines;
    return true;
  }
  std::vector<const Profile*> b, t, u;
  for (const Profile& p : sel.engines) {
    Verdict v = verdict_for(p, f);
    (v == Verdict::breaks ? b : v == Verdict::tolerates ? t : u).push_back(&p);
  }
  if (!b.empty()) {
    f.severity = Severity::error;
    f.engines = names(b);
    for (const Profile* p : b) {
      const Behaviour* beh = aspect(*p, f);
      if (beh && !beh->note.empty()) add_hint(f, std::string(p->name) + ": " + std::string(beh->note));
    }
    return true;
  }
  if (!t.empty()) {
    f.severity = std::min(f.severity, Severity::warning);
    f.engines = names(t);
    for (const Profile* p : t) {
      const Behaviour* beh = aspect(*p, f);
      if (beh && !beh->note.empty()) add_hint(f, std::string(p->name) + ": " + std::string(beh->note));
    }
    return true;
  }
  // Only engines ckpt knows nothing about for this: the portable verdict, said so.
  f.severity = portable;
  f.engines = portable_engines;
  add_hint(f, "the specs record nothing about " + join(names(u)) + " for " + f.code + "; this is the portable verdict");
  return true;
}

bool engine_code(const Finding& f) {
  return f.code == "CT011" || f.code == "CT012" || f.code == "CF012" || f.code == "QZ012" || f.code == "TK020" ||
         f.code == "IX014" || (f.code == "CF006" && !f.engines.empty());
}

// Engine-specific findings carry the engines they were judged for, with the severity for those
// engines. Portable: a break of an engine outside the reference family is a warning naming it.
bool judge_engine_finding(Finding& f, const Selection& sel) {
  if (!sel.portable()) {
    std::vector<std::string> kept;
    for (const auto& e : f.engines)
      if (sel.selects(e)) kept.push_back(e);
    if (kept.empty()) return false;
    f.engines = std::move(kept);
    return true;
  }
  // A quantization scheme is what the checkpoint is built for, not a defect: portable, an
  // engine that does not load it is named in a warning (--engine makes it an error).
  if (f.code == "QZ012") {
    f.severity = std::min(f.severity, Severity::warning);
    return true;
  }
  if (f.severity == Severity::error) {
    bool reference = false;
    for (const auto& e : f.engines)
      for (const Profile& p : all_profiles())
        if (p.name == e && p.reference) reference = true;
    if (!reference) f.severity = Severity::warning;
  }
  return true;
}

}  // namespace

void apply_verdicts(std::vector<Finding>& findings, const Selection& sel) {
  std::vector<Finding> out;
  out.reserve(findings.size());
  for (auto& f : findings) {
    bool keep = true;
    if (engine_code(f)) keep = judge_engine_finding(f, sel);
    else if (mapped(f)) keep = judge_mapped(f, sel);
    if (keep) out.push_back(std::move(f));
  }
  findings = std::move(out);
}

}  // namespace ckpt::engines
