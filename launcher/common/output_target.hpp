#pragma once
// Where an output path leads, and how it is written there. A regular file (or a new one) is
// replaced through a temporary file and a rename, which must happen in the folder of the file
// itself: through a symlink the rename would replace the link, and beside a device node it
// would replace the device (as root, `--report /dev/null` would put a plain file there).

#include <string>

namespace cgemm::launcher {

struct OutputTarget {
  enum Kind {
    kNew,     // nothing there yet (or a dangling symlink's target): created
    kFile,    // a regular file: replaced (or appended to)
    kDevice,  // a character device (/dev/null, a terminal): written in place
  };
  std::string path;  // the file itself: symlinks followed, the path as given for a device
  Kind kind = kNew;
};

/// Follows `path`'s symlinks to what it names. Throws cgemm::Error "WHAT PATH: is a FIFO
/// (named pipe): ..." for what cannot be written safely: a folder, a FIFO or socket (an open
/// waits for a reader, and a pipe's reader already gets the program's other output), a
/// block device (a disk), a symlink loop.
OutputTarget output_target(const std::string& what, const std::string& path);

}  // namespace cgemm::launcher
