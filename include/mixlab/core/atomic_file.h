// mixlab/core/atomic_file.h — checked, durable file writes and bounded reads.
//
// atomic_write_file: the bytes go to a unique temporary name in the destination's directory
// ("<name>.tmp.<pid>.<n>", so two processes never share one), every write() is checked, the file
// is fsync'ed and closed, renamed over the destination (atomic on POSIX: a reader sees the old
// file or the new one), and the directory is fsync'ed so the rename survives a power loss. On
// any failure the temporary file is removed, the destination is left as it was, and
// mixlab::IoError names the path and the system's reason (e.g. "No space left on device").
//
// AppendFile: a line-oriented append-only file (metrics.jsonl); each line is written whole and
// fdatasync'ed before append_line returns, so a line the caller saw succeed is on disk.
//
// file_read: reads a whole file but at most `max_bytes`; only a regular file (its size checked
// against the limit before reading) or a pipe (read up to the limit) — a checkpoint "from"
// /dev/zero is refused at once instead of growing memory without end.
// Not supported: Windows; network filesystems that ignore fsync.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mixlab {

/// Replaces `path` with `bytes` atomically and durably. Throws mixlab::IoError naming `path`.
void atomic_write_file(const std::string& path, std::string_view bytes);

/// Renames `from` to `to` (replacing `to`; both in one filesystem) and fsyncs the directory of
/// `to`, so the new name survives a power loss. Throws mixlab::IoError naming both paths.
void durable_rename(const std::string& from, const std::string& to);

/// Removes the temporary files that atomic_write_file left in `dir` when its process was killed
/// mid-write (regular files named "<name>.tmp.<digits>.<digits>"); returns how many. Call it only
/// while holding `dir`'s DirLock: then no live writer of this directory can own one.
int64_t remove_stale_temp_files(const std::string& dir);

/// Reads `path` whole. Throws mixlab::IoError if it cannot be opened or read, mixlab::Error if it
/// is not a regular file or a pipe, or is larger than `max_bytes`. `what` names the file's role in messages (e.g.
/// "config").
std::string file_read(const std::string& path, int64_t max_bytes, const std::string& what);

/// Line-oriented, append-only, fdatasync'ed file.
class AppendFile {
 public:
  AppendFile() = default;
  /// Opens (creating it if needed) for appending; `truncate` empties it first.
  AppendFile(const std::string& path, bool truncate);
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  /// Writes `line` + '\n' and syncs it. Throws mixlab::IoError naming the path.
  void append_line(std::string_view line);

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace mixlab
