// PyTorch pickle checkpoints (.bin / .pt / .pth / .ckpt, and any file whose bytes are a pickle,
// a torch zip, a legacy torch stream, .npy or .npz): what a static scan of the file found.
// Nothing is executed: pickles are read opcode by opcode into a symbolic tree
// (src/format/pickle.h), and only the names and literal values in it are reported.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ckpt::pt {

enum class Container : uint8_t {
  NotPickle,    // none of the formats below: no finding from the safety scan
  RawPickle,    // one or more concatenated pickles (no torch framing)
  Legacy,       // torch < 1.6 stream: magic, protocol, sys_info, object, keys, storages
  TorchZip,     // torch >= 1.6 zip: <root>/data.pkl + <root>/data/<key>
  TorchScript,  // a torch zip with constants.pkl (torch.jit.save): recognised, not interpreted
  Zip,          // any other zip (scanned member by member, e.g. .npz)
  Npy,          // numpy .npy (a pickle follows an object-dtype header)
  SevenZip,     // 7z archive (members are not inspected)
  Preview,      // PYTORCH1 preview container (unsupported by torch itself)
};
std::string_view container_name(Container c);

// One import the pickle performs (GLOBAL, STACK_GLOBAL, INST, EXT*).
struct Import {
  std::string member;   // archive member ("" for a plain file); nested members joined by '!'
  uint64_t offset = 0;  // opcode offset inside the member (or the file)
  std::string module, name;
  bool resolved = true;
  std::string how;      // the opcode
  std::string why_unresolved;
  std::string dotted() const { return module + "." + name; }
};

// Something the scan noticed besides imports; the PK families turn these into findings.
enum class NoteKind : uint8_t {
  BuildOnImport,   // BUILD (setattr) applied to an imported module or function
  PickleError,     // the pickle stops before STOP (malformed / truncated); offset = where
  PickleLimit,     // a bound was hit (expansion, huge memo or strings)
  TrailingBytes,   // bytes after the last pickle that are not a pickle
  FrameMismatch,   // FRAME lengths disagree with the opcodes they frame
  Encrypted,       // an encrypted member whose content could not be read
  Unsupported,     // a container or member that is not inspected (7z, preview, method, depth)
  ZipLayout,       // name mismatch, odd flag bits, CRC mismatch, multi-disk, overlap
  ZipTruncated,    // no end record / directory outside / member data past the end
  TorchScript,     // a TorchScript archive: code is not interpreted
  Protocol,        // protocol above 2 (legitimate, but torch's weights_only rejects it)
  DecompressCap,   // a member's decompressed size exceeds the cap (not decompressed further)
  Structure,       // torch framing is wrong: legacy magic/protocol/keys/counts, zip version, root folder
};

struct Note {
  NoteKind kind;
  std::string member;
  uint64_t offset = 0;
  std::string detail;
};

// One storage as the pickle names it (persistent id ('storage', type, key, location, numel)).
struct Storage {
  std::string key;
  std::string type;         // "FloatStorage", "UntypedStorage", ...
  std::string dtype;        // torch dtype name ("float32"); "" when unknown
  uint32_t itemsize = 0;    // bytes per element of the storage type (0 = unknown type)
  uint64_t numel = 0;       // declared element count (bytes for UntypedStorage)
  std::string location;     // "cpu", "cuda:0"
  // Where its bytes are: the zip record <root>/data/<key>, or the legacy block.
  std::string record;       // member name ("" for legacy)
  bool present = false;     // the record / block exists
  uint64_t data_offset = 0; // absolute file offset of the first byte
  uint64_t bytes = 0;       // bytes the record holds (zip: its uncompressed size; legacy: count x itemsize)
  uint64_t available = 0;   // of those, bytes actually inside the file (less when it is truncated)
  bool compressed = false;  // the zip record is deflated (torch reads it, but cannot mmap it)
  int64_t legacy_count = -1;  // legacy: the int64 element count written before the block
  uint64_t pickle_offset = 0; // BINPERSID offset that declared it
};

// A tensor rebuilt (symbolically) from _rebuild_tensor_v2 and friends.
struct Tensor {
  std::string name;          // state_dict key path, '.'-joined
  std::string rebuild;       // "_rebuild_tensor_v2", "_rebuild_parameter/_rebuild_tensor_v2", ...
  int32_t storage = -1;      // index into FileScan::storages (-1: no storage, e.g. meta)
  std::string dtype;         // torch dtype name of the tensor
  uint32_t itemsize = 0;
  std::vector<int64_t> shape, stride;
  int64_t storage_offset = 0;  // in elements of `dtype`
  int32_t alias_of = -1;     // the first tensor that is the very same object (tied weight)
  uint64_t pickle_offset = 0;
  std::string problem;       // why shape/stride/offset could not be read ("" when fine)
};

struct FileScan {
  std::string file;                 // relative to the model root
  Container container = Container::NotPickle;
  std::string zip_root;             // torch zip root folder
  std::string byteorder;            // of the storage bytes: zip "byteorder" record ("little" / "big" / "" absent); legacy: always "little"
  std::string version;              // zip 'version' record / legacy protocol
  uint64_t file_size = 0;
  std::vector<Import> imports;
  std::vector<Note> notes;
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;
  bool weights_read = false;        // the object pickle was read to STOP and walked for tensors
  int max_protocol = -1;
  uint64_t pickle_bytes = 0;        // bytes of pickle read (header-only cost)
};

struct ScanOptions {
  uint64_t max_pickle_bytes = 256ull << 20;   // per pickle member / stream
  uint64_t max_member_bytes = 256ull << 20;   // bytes decompressed from one member
  uint32_t max_depth = 3;                     // nested archives
};

// Scans one file (read-only). `rel` names it in the result. Never throws on bad bytes.
FileScan scan_file(const std::filesystem::path& path, std::string rel, const ScanOptions& opts = {});
// The same, for bytes in memory.
FileScan scan_bytes(const std::string& bytes, std::string rel, const ScanOptions& opts = {});

// Whether transformers / Meta's loaders would torch.load a file of this name as weights
// (pytorch_model*.bin, consolidated.*.pth, adapter_model.bin, *.pt/*.pth/*.ckpt at the top...).
bool is_weights_name(std::string_view rel);

// Torch storage class name ("FloatStorage") -> dtype name and element size; false if unknown.
bool storage_dtype(std::string_view type, std::string& dtype, uint32_t& itemsize);
// Torch dtype name ("float8_e4m3fn") -> element size in bytes (0 when unknown).
uint32_t dtype_itemsize(std::string_view dtype);

}  // namespace ckpt::pt
