// Every solver's parameter table (remat/params.h) appears verbatim in its docs page, so the docs
// and the code cannot drift: docs/solvers/<name>.md, or docs/solvers/rotor.md (the chain
// family's page) for a solver without a page of its own. On a
// mismatch the test prints the table the page should hold. A new registry row is covered here
// without writing a test. Also: parsing through a table (defaults, unknown keys, bad values).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "remat/error.h"
#include "remat/params.h"
#include "remat/registry.h"

namespace remat {
namespace {

std::string read_doc(std::string_view name) {
  const std::filesystem::path dir = std::filesystem::path(REMAT_SOURCE_DIR) / "docs" / "solvers";
  std::filesystem::path page = dir / (std::string(name) + ".md");
  if (!std::filesystem::exists(page)) page = dir / "rotor.md";
  std::ifstream in(page);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void expect_documented(std::string_view name, std::span<const ParamInfo> params) {
  if (params.empty()) return;  // nothing to drift: every key is unknown
  const std::string table = params_markdown(params);
  EXPECT_NE(read_doc(name).find(table), std::string::npos)
      << "docs page of '" << name << "' lacks its parameter table; it should hold:\n"
      << table;
}

TEST(ParamsDocs, EverySolverTableIsInItsDocsPage) {
  for (const SolverEntry& entry : solver_registry())
    if (entry.params != nullptr) expect_documented(entry.name, entry.params());
}

enum class Shape { kRound, kSquare };
struct Example {
  int64_t count = 3;
  double ratio = 1.5;
  bool on = true;
  Shape shape = Shape::kRound;
  std::string file;
};

const ParamTable<Example> kExample(
    "example",
    {
        {{"count", "3", "items", "how many"}, integer(&Example::count, 1, 10)},
        {{"ratio", "1.5", "", "a ratio"}, real(&Example::ratio, 1.0, 2.0)},
        {{"on", "`true`", "", "a switch"}, flag(&Example::on)},
        {{"shape", "`round`", "", "the shape"},
         choice(&Example::shape, {{"round", Shape::kRound}, {"square", Shape::kSquare}})},
        {{"file", "none", "", "a file"}, text(&Example::file, "a file name")},
    });

std::string error_of(const ParamMap& given) {
  try {
    kExample.parse(given);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParamTable, ParsesDefaultsAndValues) {
  const Example defaults = kExample.parse({});
  EXPECT_EQ(defaults.count, 3);
  EXPECT_EQ(defaults.shape, Shape::kRound);
  const Example p = kExample.parse(
      {{"count", "7"}, {"ratio", "2"}, {"on", "off"}, {"shape", "square"}, {"file", "a.json"}});
  EXPECT_EQ(p.count, 7);
  EXPECT_EQ(p.ratio, 2.0);
  EXPECT_FALSE(p.on);
  EXPECT_EQ(p.shape, Shape::kSquare);
  EXPECT_EQ(p.file, "a.json");
}

TEST(ParamTable, NamesTheKeyAndWhatItTakes) {
  EXPECT_EQ(error_of({{"colour", "red"}}),
            "example: unknown parameter 'colour' (known: count, ratio, on, shape, file)");
  EXPECT_EQ(error_of({{"count", "11"}}),
            "example: invalid value '11' for parameter 'count' (expected an integer in [1, 10])");
  EXPECT_EQ(error_of({{"count", "3x"}}),
            "example: invalid value '3x' for parameter 'count' (expected an integer in [1, 10])");
  EXPECT_EQ(error_of({{"ratio", "2.5"}}),
            "example: invalid value '2.5' for parameter 'ratio' (expected a number in [1, 2])");
  EXPECT_EQ(error_of({{"on", "maybe"}}),
            "example: invalid value 'maybe' for parameter 'on' (expected true or false)");
  EXPECT_EQ(error_of({{"shape", "oval"}}),
            "example: invalid value 'oval' for parameter 'shape' (expected round or square)");
  EXPECT_EQ(error_of({{"file", ""}}),
            "example: invalid value '' for parameter 'file' (expected a file name)");
}

TEST(ParamTable, RendersMarkdownAndHelp) {
  EXPECT_EQ(
      params_markdown(kExample.info()).substr(0, 96),
      "| key | default | unit | meaning |\n| --- | --- | --- | --- |\n| `count` | 3 | items | "
      "how many |\n");
  EXPECT_NE(params_help(kExample.info(), "  ").find("count=3"), std::string::npos);
}

}  // namespace
}  // namespace remat
