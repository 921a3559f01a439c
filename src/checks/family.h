// How a check family plugs in: one file per family defines its code rows and one
// run function, and src/checks/registry.cpp lists the family. Nothing else.
#pragma once
#include <span>

#include "ckpt/checks.h"

namespace ckpt::checks {

struct FamilyDef {
  std::string_view name;               // "FS", "ST", "IX", ...
  std::span<const CheckInfo> codes;    // every code the family may emit
  void (*run)(const Checkpoint&, const VerifyOptions&, FindingSink&);
};

// Families defined in src/checks/*.cpp (declared here, listed in registry.cpp).
extern const FamilyDef kFilesFamily;        // FS  files_cache.cpp
extern const FamilyDef kSafetensorsFamily;  // ST  safetensors_structure.cpp
extern const FamilyDef kGgufFamily;         // GG  gguf_structure.cpp
extern const FamilyDef kOllamaFamily;       // GG050-GG055  ollama_store.cpp
extern const FamilyDef kGgufConformanceFamily; // AR020-AR025 for GGUF  gguf_conformance.cpp
extern const FamilyDef kGgufTokenizerFamily; // TK021-TK029, and CT for GGUF templates  gguf_tokenizer.cpp
extern const FamilyDef kIndexFamily;        // IX  shard_index.cpp
extern const FamilyDef kConfigFamily;       // CF  config.cpp
extern const FamilyDef kArchitectureFamily; // AR  architecture.cpp
extern const FamilyDef kQuantizationFamily; // QZ  quantization.cpp
extern const FamilyDef kTokenizerFamily;    // TK  tokenizer.cpp
extern const FamilyDef kChatTemplateFamily; // CT  chat_template.cpp
extern const FamilyDef kGgufDeepFamily;     // HS006 (and HS002-HS005 for GGUF)  gguf_deep.cpp
extern const FamilyDef kPickleSafetyFamily;  // PK  pytorch_safety.cpp (imports a pickle performs)
extern const FamilyDef kPyTorchStructureFamily;  // PT  pytorch_structure.cpp (storages, tensors, framing)
extern const FamilyDef kMetaLayoutFamily;   // PT015-PT021  pytorch_meta.cpp (consolidated.NN.pth + params.json)
extern const FamilyDef kHashesFamily;       // HS  hashes.cpp (--deep only; reads tensor data)
extern const FamilyDef kEnginesFamily;      // CT011 CT012 CF012 QZ012 TK020 IX014  engines.cpp

}  // namespace ckpt::checks
