// mixlab/core/dir_lock.h — an exclusive lock on a directory, held for a process's lifetime.
//
// DirLock takes flock(LOCK_EX | LOCK_NB) on "<dir>/.lock" and writes the holder's pid into it.
// A second process (or a second DirLock in this one) gets mixlab::IoError "... is in use by pid
// N". The kernel releases the lock when the holder exits, however it exits (SIGKILL included),
// so a stale .lock file never blocks a later run.
// Not supported: NFS without lock support.
#pragma once

#include <string>

namespace mixlab {

class DirLock {
 public:
  /// Locks `dir` (which must exist). `what` names the directory's role (e.g. "run directory").
  DirLock(const std::string& dir, const std::string& what);
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  int fd_ = -1;
};

}  // namespace mixlab
