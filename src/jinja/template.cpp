// Public API of the engine: Template::parse / render, located errors and delimiter warnings.
#include <algorithm>
#include <new>

#include "jinja/engine.h"
#include "jinja/interp.h"

namespace ckpt::jinja {

namespace {
std::pair<uint32_t, uint32_t> locate(const std::string& src, uint32_t pos) {
  if (pos == UINT32_MAX) return {0, 0};
  size_t end = std::min<size_t>(pos, src.size());
  uint32_t line = 1, col = 1;
  for (size_t i = 0; i < end; ++i) {
    unsigned char c = src[i];
    if (c == '\n') { ++line; col = 1; }
    else if ((c & 0xC0) != 0x80) ++col;
  }
  return {line, col};
}
}  // namespace

std::string Error::format() const {
  std::string out = source.empty() ? "<template>" : source;
  if (line) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  out += phase == Phase::parse ? "parse error: " : "render error: ";
  out += type.empty() ? "TemplateError" : type;
  out += ": " + message;
  return out;
}

std::string DelimiterWarning::format(std::string_view source) const {
  const bool whole_tag = fragment.size() > 3 && fragment[0] == '{';
  return std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
         (whole_tag ? "broken tag '" + fragment + "' is not a tag: it" : "delimiter-like text '" + fragment + "'") +
         " reaches the rendered prompt as plain text; expected a complete '{{ }}', '{% %}' or '{# #}' tag";
}

struct Template::Impl {
  std::unique_ptr<Parsed> parsed;
  std::string source_name;
  Options options;
};

Template::Template(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Template::~Template() = default;

std::shared_ptr<const Template> Template::parse(std::string_view text, std::string source_name, const Options& options,
                                                Error* error) {
  auto impl = std::make_unique<Impl>();
  impl->source_name = std::move(source_name);
  impl->options = options;
  try {
    impl->parsed = parse_template(text, options);
  } catch (const JError& e) {
    if (error) {
      // Locate in the normalized text (newlines normalized exactly as jinja2 does).
      std::string norm = normalize_source(text);
      auto [l, c] = locate(norm, e.pos);
      *error = Error{Error::Phase::parse, e.type, e.message, impl->source_name, l, c};
    }
    return nullptr;
  } catch (const std::bad_alloc&) {
    if (error) *error = Error{Error::Phase::parse, "MemoryError", "out of memory while parsing", impl->source_name, 0, 0};
    return nullptr;
  }
  return std::make_shared<const Template>(std::move(impl));
}

const std::string& Template::source_name() const { return impl_->source_name; }

bool Template::reads_variable(std::string_view name) const {
  for (auto& n : impl_->parsed->names_read)
    if (n == name) return true;
  return false;
}

namespace {
struct UnsafeScan {
  const std::string& src;
  std::vector<std::string> out;
  void note(uint32_t pos, const std::string& what) {
    auto [l, c] = locate(src, pos);
    out.push_back(std::to_string(l) + ":" + std::to_string(c) + ": " + what);
  }
  void expr(const Expr* e) {
    if (!e) return;
    if (e->kind == EK::Attr && e->name.rfind("__", 0) == 0) note(e->pos, "access to attribute '" + e->name + "' (sandbox escape pattern)");
    if (e->kind == EK::Item && e->b && e->b->kind == EK::Const && e->b->cval.k == K::Str && e->b->cval.s().rfind("__", 0) == 0)
      note(e->pos, "access to key '" + e->b->cval.s() + "' (sandbox escape pattern)");
    if (e->kind == EK::Name && (e->name == "lipsum" || e->name == "cycler" || e->name == "joiner"))
      note(e->pos, "use of the '" + e->name + "' global (a known route to Python internals)");
    if (e->kind == EK::Filter && e->name == "attr") {
      const Expr* a = e->kids.empty() ? nullptr : e->kids[0].get();
      if (!a || a->kind != EK::Const || a->cval.k != K::Str) note(e->pos, "attr() with a computed attribute name");
      else if (a->cval.s().rfind("_", 0) == 0) note(e->pos, "attr('" + a->cval.s() + "') on a private attribute");
    }
    any_child(*e, [this](Expr* k) {
      expr(k);
      return false;
    });
  }
  void body(const Body& b) {
    for (auto& st : b) {
      expr(st->expr.get());
      expr(st->target.get());
      expr(st->test.get());
      expr(st->filter.get());
      for (auto& br : st->branches) {
        expr(br.first.get());
        body(br.second);
      }
      for (auto& wv : st->with_vars) expr(wv.second.get());
      if (st->macro) {
        for (auto& d : st->macro->defaults) expr(d.get());
        body(st->macro->body);
      }
      body(st->body);
      body(st->else_body);
    }
  }
};
}  // namespace

namespace {
struct EmittableScan {
  const std::string& src;
  std::vector<Template::EmittableText> out;
  void add(std::string_view text, uint32_t pos, bool constant) {
    if (text.empty()) return;
    auto [l, c] = locate(src, pos);
    out.push_back({std::string(text), l, c, constant});
  }
  // String constants of an expression whose value may be printed; the operands of
  // comparisons and tests and the condition of `a if cond else b` only decide.
  void expr(const Expr* e) {
    if (!e) return;
    switch (e->kind) {
      case EK::Const:
        if (e->cval.k == K::Str) add(e->cval.s(), e->pos, true);
        return;
      case EK::Compare:
      case EK::Test:
      case EK::Not:
        return;
      case EK::Cond:
        expr(e->b.get());
        expr(e->c.get());
        return;
      case EK::Call:  // raise_exception's message becomes an error, never part of a prompt
        if (e->a && e->a->kind == EK::Name && e->a->name == "raise_exception") return;
        any_child(*e, [this](Expr* k) {
          expr(k);
          return false;
        });
        return;
      default:
        any_child(*e, [this](Expr* k) {
          expr(k);
          return false;
        });
    }
  }
  void body(const Body& b) {
    for (auto& st : b) {
      if (st->kind == SK::Data) add(st->text, st->pos, false);
      if (st->kind == SK::Output || st->kind == SK::Set) expr(st->expr.get());
      for (auto& br : st->branches) body(br.second);
      if (st->macro) body(st->macro->body);
      body(st->body);
      body(st->else_body);
    }
  }
};
}  // namespace

std::vector<Template::EmittableText> Template::emittable_text() const {
  EmittableScan scan{impl_->parsed->source, {}};
  scan.body(impl_->parsed->body);
  return std::move(scan.out);
}

std::vector<std::string> Template::unsafe_accesses() const {
  UnsafeScan scan{impl_->parsed->source, {}};
  scan.body(impl_->parsed->body);
  return scan.out;
}

RenderResult Template::render(const json::Value& context) const { return render(context, impl_->options); }

RenderResult Template::render(const json::Value& context, const Options& options) const {
  RenderResult res;
  const Parsed& p = *impl_->parsed;
  // The converted context lives in a per-thread pool that keeps its storage between renders;
  // it outlives every Value of the render (the interpreter is destroyed first).
  thread_local ContextPool pool;
  pool.reset(p.names.size());
  Interp in(p, options, context, pool);
  try {
    res.output = in.run();
  } catch (const JError& e) {
    auto [l, c] = locate(p.source, e.pos);
    res.error = Error{Error::Phase::render, e.type, e.message, impl_->source_name, l, c};
  } catch (const std::bad_alloc&) {
    auto [l, c] = locate(p.source, in.cur_pos_);
    res.error = Error{Error::Phase::render, "MemoryError", "out of memory while rendering", impl_->source_name, l, c};
  }
  if (res.ok()) {
    auto& hits = in.fragments_hit_;
    std::sort(hits.begin(), hits.end());
    hits.erase(std::unique(hits.begin(), hits.end()), hits.end());
    for (auto& [pos, frag] : hits) {
      auto [l, c] = locate(p.source, pos);
      res.delimiter_warnings.push_back({frag, l, c});
      if (res.delimiter_warnings.size() >= 20) break;
    }
  }
  return res;
}

RenderResult render_string(std::string_view text, const json::Value& context, const Options& options,
                           std::string source_name) {
  Error err;
  auto t = Template::parse(text, std::move(source_name), options, &err);
  if (!t) {
    RenderResult r;
    r.error = err;
    return r;
  }
  return t->render(context, options);
}

}  // namespace ckpt::jinja
