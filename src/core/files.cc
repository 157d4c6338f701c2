// Text files in and out: the whole-file reader and the atomic writer every front end and
// solver cache writes through (remat/files.h).
#include "remat/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "remat/error.h"

namespace remat {

namespace {

[[noreturn]] void too_large(std::string_view path) {
  throw InputError(fmt::format("{}: larger than {} bytes (4 GiB), the most remat reads",
                               shorten(path, 200), kMaxInputBytes));
}

// Refuses what can only be read forever or not at all: a device (/dev/zero, /dev/urandom) that
// is not a terminal, and a directory; `fd` is the open file.
void check_readable_kind(int fd, std::string_view path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;  // the read reports the problem
  if (S_ISDIR(st.st_mode))
    throw InputError(fmt::format("{}: is a directory, not a file", shorten(path, 200)));
  if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && ::isatty(fd) != 1)
    throw InputError(fmt::format("{}: is a device, not a file", shorten(path, 200)));
  if (S_ISREG(st.st_mode) && st.st_size > kMaxInputBytes) too_large(path);
}

// Reads `fd` to its end in chunks, straight into one string (no stream-buffer copy).
std::string read_all(int fd, std::string_view path) {
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    text.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got == 0) return text;
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(
          fmt::format("{}: cannot read: {}", shorten(path, 200), std::strerror(errno)));
    }
    if (static_cast<int64_t>(text.size()) + got > kMaxInputBytes) too_large(path);
    text.append(chunk, static_cast<size_t>(got));
  }
}

}  // namespace

std::string read_text_file(const std::string& path) {
  if (path == "-") {
    check_readable_kind(STDIN_FILENO, "-: standard input");
    return read_all(STDIN_FILENO, "-: standard input");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(fmt::format("{}: cannot open: {}", shorten(path, 200), std::strerror(errno)));
  try {
    check_readable_kind(fd, path);
    std::string text = read_all(fd, path);
    ::close(fd);
    return text;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

namespace {

// The temporary file being written, for remove_pending_output(): a fixed buffer and an atomic flag
// because a signal handler reads them.
char pending_path[4096];
std::atomic<bool> pending{false};

void write_all(std::ostream& out, std::string_view text, const std::string& path) {
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.flush();
  if (!out) throw InputError(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
}

}  // namespace

void remove_pending_output() noexcept {
  if (pending.exchange(false)) ::unlink(pending_path);
}

void write_text_file_atomic(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  if (path == "-") {
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
    if (!std::cout) throw InputError("-: cannot write to standard output");
    return;
  }
  std::error_code ec;
  // /dev/stdout and /proc/self/fd/N name whatever the descriptor is (a pipe, a terminal, a file
  // opened by the caller): written in place, never resolved and renamed over.
  const bool device_path = path.starts_with("/dev/") || path.starts_with("/proc/");
  // Follow symlinks: the rename must replace the file the link points to, not the link.
  fs::path target = device_path ? fs::path(path) : fs::weakly_canonical(fs::path(path), ec);
  if (ec) target = path;
  const fs::file_status status = fs::status(target, ec);
  if (device_path || (!ec && fs::exists(status) && !fs::is_regular_file(status))) {
    if (fs::is_directory(status)) throw InputError(fmt::format("{}: is a directory", path));
    // A FIFO, a device, /dev/stdout: no rename possible, so write straight into it.
    std::ofstream out(target, std::ios::binary);
    if (!out) throw InputError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    write_all(out, text, path);
    return;
  }
  fs::path temp = target;
  temp += fmt::format(".tmp{}", static_cast<unsigned long>(::getpid()));
  const std::string temp_name = temp.string();
  if (temp_name.size() >= sizeof pending_path)
    throw InputError(fmt::format("{}: path too long", shorten(path)));
  std::memcpy(pending_path, temp_name.c_str(), temp_name.size() + 1);
  pending.store(true);
  try {
    {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      if (!out) throw InputError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
      write_all(out, text, path);
    }
    if (fs::is_regular_file(status)) fs::permissions(temp, status.permissions(), ec);
    fs::rename(temp, target, ec);
    if (ec) throw InputError(fmt::format("{}: cannot write: {}", path, ec.message()));
    pending.store(false);
  } catch (...) {
    remove_pending_output();
    throw;
  }
}

}  // namespace remat
