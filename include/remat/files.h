// files.h — text files in and out, for the front ends (io's readers and writers, the CLI, the
// bindings) and for solvers that keep files of their own (rockmate's option cache): the whole-file
// reader with its size limit, and the writer that never leaves a partial file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace remat {

// Input files are read up to this many bytes (4 GiB): a larger file, or a pipe that goes on past
// it, is refused; so are devices that never end (/dev/zero), terminals excepted.
inline constexpr int64_t kMaxInputBytes = int64_t{1} << 32;
// Reads the whole file ("-": standard input); throws InputError when it cannot be read.
std::string read_text_file(const std::string& path);
// Writes `text` to `path` via a temporary file next to it and a rename, so readers never see a
// partial file. A symlink is followed (the file it points to is replaced; the link stays) and an
// existing file keeps its permissions. Special files (a FIFO, /dev/stdout, a terminal) are written
// directly; "-" is standard output.
void write_text_file_atomic(const std::string& path, std::string_view text);
// Removes the temporary file of a write in progress, if any. Async-signal-safe: the `remat`
// command calls it from its signal handlers so no partial OUT.tmp<pid> is left behind.
void remove_pending_output() noexcept;

}  // namespace remat
