// Internal: one constructor per engine family (src/engines/<family>.cpp). Every fact a profile
// states carries its source: a section of the specs (specs/*.md in the shared folder), or a
// file@commit read for ckpt and marked "not in the specs".
#pragma once
#include "ckpt/engines.h"

namespace ckpt::engines::detail {

Profile transformers_profile();
Profile vllm_profile();
Profile sglang_profile();
Profile tgi_profile();
Profile mlx_lm_profile();
// version: the swift-jinja version SwiftLM is built with (default: the one SwiftLM pins).
Profile swiftlm_profile(const Version* version, std::string* error);
Profile llama_cpp_profile();
// version: the @huggingface/jinja version transformers.js is built with.
Profile transformers_js_profile(const Version* version, std::string* error);

// The config rules transformers applies (shared by the engines that read config.json with
// transformers' AutoConfig).
std::vector<ConfigRule> transformers_config_rules();
std::vector<TokenizerRule> transformers_tokenizer_rules();

}  // namespace ckpt::engines::detail
