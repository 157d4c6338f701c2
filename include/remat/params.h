// params.h — a solver's parameters (--param KEY=VALUE) as one declarative table. Each row names
// the key, the field it sets (through a setter made from a pointer-to-member), the default as
// shown to users, the unit and one line of documentation. Parsing, the unknown-key error,
// `remat solve --help` and the tables in docs/solvers/<name>.md all come from the table, and
// tests/solvers/params_docs_test.cc checks that each docs page holds its table verbatim.
//   struct MyParams { int64_t bins = 500; bool weak = false; };
//   const ParamTable<MyParams> kTable("my", {
//       {{"bins", "500", "bins", "memory bins of the DP"}, integer(&MyParams::bins, 1)},
//       {{"weak", "false", "", "weak persistence"}, flag(&MyParams::weak)},
//   });
//   MyParams p = kTable.parse(options.params);   // InputError for unknown keys and bad values
// The defaults are the struct's member initialisers; default_text only displays them.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

using ParamMap = std::map<std::string, std::string>;

struct ParamInfo {
  std::string_view key;
  std::string_view default_text;  // "500", "strong", "0 (auto)"; shown as given
  std::string_view unit;          // "bins", "iterations", "%"; empty: none
  std::string_view doc;           // one line
};

// Thrown by a setter for text it does not take; `expected` says what it takes.
struct BadParamValue {
  std::string expected;
};

template <class P>
struct Param {
  ParamInfo info;
  std::function<void(P&, const std::string&)> set;  // throws BadParamValue
};

// The shared parts of every table (params.cc).
[[noreturn]] void throw_bad_param(std::string_view solver, std::string_view key,
                                  std::string_view text, std::string_view expected);
[[noreturn]] void throw_unknown_param(std::string_view solver, std::string_view key,
                                      std::span<const ParamInfo> known);
int64_t parse_int_text(const std::string& text);  // throws BadParamValue
double parse_real_text(const std::string& text);  // throws BadParamValue (finite numbers only)
bool parse_flag_text(const std::string& text);    // true/false/1/0/on/off/yes/no
// `| key | default | unit | meaning |` rows (Markdown), and the same as indented text for --help.
std::string params_markdown(std::span<const ParamInfo> params);
std::string params_help(std::span<const ParamInfo> params, std::string_view indent);

template <class P>
class ParamTable {
 public:
  ParamTable(std::string_view solver, std::vector<Param<P>> rows)
      : solver_(solver), rows_(std::move(rows)) {
    for (const Param<P>& row : rows_) info_.push_back(row.info);
  }

  // P{} with each given key set by its row, in key order; InputError for an unknown key (listing
  // the known ones) and for a value its row does not take.
  P parse(const ParamMap& given) const {
    P params{};
    for (const auto& [key, text] : given) {
      const Param<P>* row = find(key);
      if (row == nullptr) throw_unknown_param(solver_, key, info_);
      try {
        row->set(params, text);
      } catch (const BadParamValue& bad) {
        throw_bad_param(solver_, key, text, bad.expected);
      }
    }
    return params;
  }

  std::span<const ParamInfo> info() const { return info_; }
  std::string_view solver() const { return solver_; }

 private:
  const Param<P>* find(std::string_view key) const {
    for (const Param<P>& row : rows_)
      if (row.info.key == key) return &row;
    return nullptr;
  }

  std::string_view solver_;
  std::vector<Param<P>> rows_;
  std::vector<ParamInfo> info_;
};

// Setters. Each checks the text and the range and throws BadParamValue naming what it takes.
template <class P, class T>
std::function<void(P&, const std::string&)> integer(T P::*field, int64_t min,
                                                    int64_t max = std::numeric_limits<T>::max()) {
  return [field, min, max](P& p, const std::string& text) {
    const std::string expected =
        max == std::numeric_limits<T>::max()
            ? "an integer >= " + std::to_string(min)
            : "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    int64_t x = 0;
    try {
      x = parse_int_text(text);
    } catch (const BadParamValue&) {
      throw BadParamValue{expected};
    }
    if (x < min || x > max) throw BadParamValue{expected};
    p.*field = static_cast<T>(x);
  };
}

// A number in [min, max]; with `above_min`, in (min, max].
template <class P>
std::function<void(P&, const std::string&)> real(
    double P::*field, double min, double max = std::numeric_limits<double>::infinity(),
    bool above_min = false) {
  return [=](P& p, const std::string& text) {
    auto shown = [](double x) {
      std::string s = std::to_string(x);
      s.erase(s.find_last_not_of('0') + 1);
      if (s.back() == '.') s.pop_back();
      return s;
    };
    const std::string expected =
        max == std::numeric_limits<double>::infinity()
            ? std::string(above_min ? "a number > " : "a number >= ") + shown(min)
            : std::string(above_min ? "a number in (" : "a number in [") + shown(min) + ", " +
                  shown(max) + "]";
    double x = 0;
    try {
      x = parse_real_text(text);
    } catch (const BadParamValue&) {
      throw BadParamValue{expected};
    }
    if (x < min || (above_min && x == min) || x > max) throw BadParamValue{expected};
    p.*field = x;
  };
}

template <class P>
std::function<void(P&, const std::string&)> flag(bool P::*field) {
  return [field](P& p, const std::string& text) { p.*field = parse_flag_text(text); };
}

// One of the named values, e.g. choice(&P::mode, {{"recompute", kRecompute}, {"order", kOrder}}).
template <class P, class T>
std::function<void(P&, const std::string&)> choice(
    T P::*field, std::vector<std::pair<std::string_view, T>> names) {
  return [field, names = std::move(names)](P& p, const std::string& text) {
    std::string expected;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i].first == text) {
        p.*field = names[i].second;
        return;
      }
      expected += std::string(i == 0                  ? ""
                              : i + 1 == names.size() ? " or "
                                                      : ", ") +
                  std::string(names[i].first);
    }
    throw BadParamValue{expected};
  };
}

// Any non-empty text (e.g. a file name).
template <class P>
std::function<void(P&, const std::string&)> text(std::string P::*field, std::string_view expected) {
  return [field, expected = std::string(expected)](P& p, const std::string& value) {
    if (value.empty()) throw BadParamValue{expected};
    p.*field = value;
  };
}

}  // namespace remat
