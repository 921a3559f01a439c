// The chat templates a checkpoint's GGUF models carry (tokenizer.chat_template and
// tokenizer.chat_template.NAME of each model's first shard), for the CT probes and the engine
// dialect checks (CT011/CT012). Defined in gguf_tokenizer.cpp.
#pragma once
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/jinja.h"

namespace ckpt::checks {

// Of one GGUF file; array-typed template keys are skipped (llama.cpp cannot see them).
std::vector<jinja::TemplateSource> gguf_chat_templates(const Shard& first);
// Of every GGUF model in the checkpoint (projectors and adapters excluded).
std::vector<jinja::TemplateSource> gguf_chat_templates(const Checkpoint& ck);

}  // namespace ckpt::checks
