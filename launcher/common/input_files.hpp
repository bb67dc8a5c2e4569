#pragma once
// Files the launcher programs read (--config, --peers, --torch_chunks, cgemm-compare's dumps):
// each must be a regular file. Opening a FIFO waits for a writer that never comes, a device
// reads forever or nothing, a folder reads as nothing: all are refused before they are opened.

#include <string>

namespace cgemm::launcher {

/// Throws OptionError "WHAT PATH: is a FIFO (named pipe), not a regular file" (a folder, a
/// character or block device, a socket) when `path`, its symlinks followed, exists and is not
/// a regular file. A missing or unreadable path passes: the caller's open says why it failed.
void require_regular_input(const std::string& what, const std::string& path);

}  // namespace cgemm::launcher
