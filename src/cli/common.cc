#include "common.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {

namespace {

// Our own checks, so a bad value gets a short message naming the range (CLI11's PositiveNumber
// echoes 1e308 as a 309-digit number, and a uint64_t option takes -1 as 2^64-1).
// A positive number of `unit` in (0, most].
CLI::Validator limit_validator(std::string_view unit, double most, std::string name) {
  return CLI::Validator(
      [unit, most](std::string& text) -> std::string {
        double x = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
        if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(x) || x <= 0 ||
            x > most)
          return fmt::format("'{}' is not a number of {} in (0, {:g}]", shorten(text, 40), unit,
                             most);
        return {};
      },
      std::move(name));
}

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t seed = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
        if (ec != std::errc() || end != text.data() + text.size())
          return fmt::format("'{}' is not a seed in [0, 2^64-1]", shorten(text, 40));
        return {};
      },
      "UINT64");
}

}  // namespace

void add_solver_options(CLI::App& command, SolverArgs& args) {
  command
      .add_option("--work-limit", args.work_limit,
                  "work limit per solve, in work units (about a second each on the reference "
                  "machine; the same plan on any machine; docs/limits.md)")
      ->default_val(kDefaultWorkLimit)
      ->check(limit_validator("work units", kMaxWorkLimit, "UNITS"));
  command
      .add_option("--time-limit", args.time_limit_s,
                  "wall-clock backstop per solve, in seconds (default: 10 x the work limit + 10)")
      ->check(limit_validator("seconds", kMaxTimeLimit, "SECONDS"));
  command.add_option("--seed", args.seed, "random seed (same graph, options and seed: same plan)")
      ->default_val(1)
      ->check(seed_validator());
  command
      .add_option("--threads", args.threads,
                  fmt::format("threads (solvers that use them), at most {}", kMaxThreads))
      ->default_val(1)
      ->check(CLI::Range(1, kMaxThreads));
  command.add_option("--param", args.params,
                     "solver parameter KEY=VALUE, or SOLVER.KEY=VALUE for one solver only "
                     "(repeatable; see docs/solvers/)");
}

ParamMap parse_params(const std::vector<std::string>& entries, std::string_view solver) {
  ParamMap params;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(
          fmt::format("invalid --param '{}' (expected KEY=VALUE or SOLVER.KEY=VALUE)", entry));
    std::string key = entry.substr(0, eq);
    if (key == "init" || key.ends_with(".init"))
      throw InputError(fmt::format(
          "--param {}: a plan to start from is given with --start PLAN.json (remat solve)", key));
    const size_t dot = key.find('.');
    if (dot != std::string::npos) {
      const std::string_view prefix = std::string_view(key).substr(0, dot);
      // `auto` forwards MEMBER.KEY to its member, so it keeps keys meant for other solvers.
      if (prefix == solver)
        key.erase(0, dot + 1);
      else if (!solver_entry(solver).forwards_member_params)
        continue;
    }
    params[key] = entry.substr(eq + 1);
  }
  return params;
}

void check_param_scopes(const std::vector<std::string>& entries,
                        std::span<const std::string> solvers) {
  bool forwarding = false;
  for (const std::string& solver : solvers)
    forwarding = forwarding || solver_entry(solver).forwards_member_params;
  for (const std::string& entry : entries) {
    const std::string_view key = std::string_view(entry).substr(0, entry.find('='));
    const size_t dot = key.find('.');
    if (dot == std::string_view::npos) continue;
    const std::string_view prefix = key.substr(0, dot);
    if (std::find(solvers.begin(), solvers.end(), prefix) != solvers.end()) continue;
    const SolverEntry* row = registry_directory().find(prefix);
    if (forwarding && row != nullptr && row->portfolio.role != PortfolioRole::kNone) continue;
    throw InputError(fmt::format(
        "--param {}: '{}' is not a solver of this command (solvers: {}); SOLVER.KEY=VALUE "
        "goes to that solver only{}",
        shorten(entry, 80), shorten(prefix, 40), fmt::join(solvers, ", "),
        forwarding ? ", or to a member of the portfolio" : ""));
  }
}

SolveOptions make_solve_options(const SolverArgs& args, Budget budget, std::string_view solver) {
  SolveOptions options;
  options.budget = budget;
  options.work_limit = args.work_limit;
  options.time_limit_s = args.time_limit_s.value_or(backstop_time_limit(args.work_limit));
  options.seed = args.seed;
  options.threads = args.threads;
  options.params = parse_params(args.params, solver);
  // What a solver keeps between solves (rockmate's block options) serves every solve of the
  // command: compare and sweep solve the same graph many times.
  static SolveCache command_cache;
  options.cache = &command_cache;
  return options;
}

void emit(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0 || std::ferror(stdout))
      throw InputError(fmt::format("standard output: write failed: {}",
                                   errno != 0 ? std::strerror(errno) : "error"));
    return;
  }
  write_text_file_atomic(path, text);
}

CLI::Validator output_path_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "the file name is empty (use '-' for standard output)" : "";
      },
      "FILE");
}

namespace {

std::optional<std::pair<dev_t, ino_t>> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

}  // namespace

bool is_standard_output(const std::string& path) {
  if (path == "-") return true;
  struct stat out {};
  if (::fstat(STDOUT_FILENO, &out) != 0) return false;
  return file_identity(path) == std::pair{out.st_dev, out.st_ino};
}

void refuse_overwriting_input(const std::string& output, const std::string& input,
                              std::string_view what) {
  if (output == "-" || input == "-") return;
  const auto in = file_identity(input);
  if (in && in == file_identity(output))
    throw InputError(fmt::format("{}: is the input file {}; writing {} there would replace it",
                                 shorten(output, 200), shorten(input, 200), what));
}

double percent(double part, double whole) { return whole != 0 ? part / whole * 100.0 : 0.0; }

double gap_percent(double cost, double lower_bound) { return percent(cost - lower_bound, cost); }

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void ProgressBar::update(const Progress& p) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (p.best_peak_bytes >= 0) {
    best_peak_bytes_ = p.best_peak_bytes;
    best_cost_ = p.best_cost;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1) || now - last_draw_ < std::chrono::milliseconds(100))
    return;
  last_draw_ = now;
  std::string line = fmt::format("{} {}", label_, p.stage);
  if (p.fraction >= 0) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(std::min(1.0, p.fraction) * kWidth);
    line += fmt::format(" [{}{}] {:3.0f}%", std::string(static_cast<size_t>(filled), '#'),
                        std::string(static_cast<size_t>(kWidth - filled), '.'), 100 * p.fraction);
  }
  if (p.iterations > 0) line += fmt::format(" it {}", p.iterations);
  if (p.best_objective >= 0) line += fmt::format(" best {:.6g}", p.best_objective);
  if (best_peak_bytes_ >= 0)
    line += fmt::format(" | best plan: peak {}, cost {:.6g}", format_bytes(best_peak_bytes_),
                        best_cost_);
  line += fmt::format(" {:.1f}s", std::chrono::duration<double>(now - start_).count());
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

std::function<void(const Progress&)> ProgressBar::callback() {
  return [this](const Progress& p) { update(p); };
}

}  // namespace remat::cli

namespace remat::cli {

std::string Table::str() const {
  std::vector<size_t> width;
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (size_t r = 0; r < rows_.size(); ++r) {
    for (size_t c = 0; c < rows_[r].size(); ++c) {
      if (c > 0) out += "  ";
      out += c == 0 ? fmt::format("{:<{}}", rows_[r][c], width[c])
                    : fmt::format("{:>{}}", rows_[r][c], width[c]);
    }
    out += '\n';
    if (r == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      out += std::string(total - 2, '-') + '\n';
    }
  }
  return out;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          out += '?';
        else
          out += c;
    }
  }
  return out;
}

}  // namespace remat::cli
