#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::tok {
// The piece strings of a SentencePiece ModelProto, in id order; nullopt when malformed.
std::optional<std::vector<std::string>> sentencepiece_pieces(std::string_view bytes);
}  // namespace ckpt::tok
