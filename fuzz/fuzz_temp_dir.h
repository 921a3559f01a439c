// The model directory a file-based fuzz target writes each input into: made once per process
// under the temp directory, removed at exit.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace fuzz {

inline std::filesystem::path& dir_slot() {
  static std::filesystem::path dir;
  return dir;
}

inline void remove_model_dir() {
  std::error_code ec;
  if (!dir_slot().empty()) std::filesystem::remove_all(dir_slot(), ec);
}

// `tag` names the directory (ckpt-fuzz-<tag>-XXXXXX).
inline const std::filesystem::path& model_dir(const char* tag) {
  auto& dir = dir_slot();
  if (!dir.empty()) return dir;
  std::string tmpl = (std::filesystem::temp_directory_path() / ("ckpt-fuzz-" + std::string(tag) + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) std::abort();
  dir = tmpl;
  std::atexit(remove_model_dir);
  return dir;
}

inline void write_bytes(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) std::abort();
}

}  // namespace fuzz
