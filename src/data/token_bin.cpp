// nanoGPT token files: uint16 little-endian ids, memory-mapped (mixlab/data/token_bin.h).
#include "mixlab/data/token_bin.h"

#include "mixlab/core/error.h"
#include "mixlab/data/mapped_file.h"

namespace mixlab {

std::shared_ptr<TokenBinFile> TokenBinFile::open(const std::string& path) {
  auto map = MappedFile::open(path, fmt::format("token file '{}'", path));
  const auto bytes = static_cast<int64_t>(map->size());
  MIXLAB_CHECK(bytes != 0, "token file '{}' is empty (expected uint16 token ids)", path);
  MIXLAB_CHECK(bytes % 2 == 0, "token file '{}' has {} bytes, an odd size: expected uint16 token ids (2 bytes each)",
               path, bytes);
  std::shared_ptr<TokenBinFile> f(new TokenBinFile());
  f->tokens_ = reinterpret_cast<const uint16_t*>(map->data());
  f->size_ = bytes / 2;
  f->path_ = path;
  f->map_ = std::move(map);
  return f;
}

}  // namespace mixlab
