// libFuzzer: the chat-template engine. Each input is a template: parse it, run the static
// checks, and render it with a fixed multi-turn chat context (system, user, assistant with a
// tool call, tool response, a tools list) under small step/output/depth budgets, so a
// template that would run away is stopped by the engine, not by the fuzzer's timeout.
// Invariants: no crash/UB/leak, every error is typed and located in a known phase, output
// within the output budget.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ckpt/jinja.h"
#include "ckpt/json.h"

namespace {

constexpr std::string_view kContext = R"({
  "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 6*7? <b>&</b>"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "id": "call_1",
                     "function": {"name": "calc", "arguments": {"expr": "6*7"}}}]},
    {"role": "tool", "content": "42", "tool_call_id": "call_1"},
    {"role": "assistant", "content": "<think>easy</think>It is 42."},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}, {"type": "image"}]}
  ],
  "tools": [{"type": "function", "function": {"name": "calc", "description": "evaluate",
             "parameters": {"type": "object", "properties": {"expr": {"type": "string"}},
                            "required": ["expr"]}}}],
  "add_generation_prompt": true,
  "enable_thinking": false,
  "bos_token": "<s>", "eos_token": "</s>", "pad_token": null, "unk_token": "<unk>",
  "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]
})";

const ckpt::json::Value& context() {
  static const ckpt::json::Value v = [] {
    auto r = ckpt::json::parse(kContext);
    if (!r.ok()) std::abort();
    return r.value;
  }();
  return v;
}

ckpt::jinja::Options options() {
  ckpt::jinja::Options o;
  o.max_steps = 200'000;
  o.max_output = 1u << 20;
  o.max_depth = 64;
  o.now = 1721995200;  // fixed: strftime_now must not make runs differ
  return o;
}

void check_error(const ckpt::jinja::Error& e, ckpt::jinja::Error::Phase phase) {
  if (e.phase != phase || e.type.empty()) std::abort();
  if (e.format().empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const jinja::Options opts = options();
  jinja::Error err;
  auto t = jinja::Template::parse(text, "fuzz.jinja", opts, &err);
  if (!t) {
    check_error(err, jinja::Error::Phase::parse);
    return 0;
  }
  (void)t->unsafe_accesses();
  (void)t->reads_variable("enable_thinking");
  jinja::RenderResult r = t->render(context(), opts);
  if (r.error) {
    check_error(*r.error, jinja::Error::Phase::render);
  } else if (r.output.size() > opts.max_output) {
    std::abort();
  }
  for (const auto& w : r.delimiter_warnings)
    if (w.fragment.empty()) std::abort();
  return 0;
}
