#pragma once
// The temporary files a replaced output is written to before the rename: named after the
// output, the host and the process (".report.json.cgemm-tmp.HOST.PID.XXXXXX"), so that one
// a killed run left behind is known for what it is and removed by the next run writing the
// same output. Where that name would be too long for the folder, a hash of the output's name
// stands for it.

#include <string>

namespace cgemm::launcher {

/// A new, empty file beside `file` (mode 0600); its name goes to `tmp`. -1 (errno set) when
/// none can be made.
int make_temp_beside(const std::string& file, std::string& tmp);

/// Removes the temporary files of `file` that no live process writes: those made on this
/// host by a process that is gone (or by this one). Those of other hosts are left: whether
/// their process lives cannot be told from here.
void remove_stale_temps(const std::string& file);

}  // namespace cgemm::launcher
