// libFuzzer target: budget strings ("50%", "1.5GiB", "123"). A parsed budget is within
// [0, 2^62] whatever the text.
#include <string>

#include "fuzz_common.h"
#include "remat/graph.h"
#include "remat/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  remat::fuzz::expect_value_or_input_error([&] {
    const remat::Budget b = remat::parse_budget(remat::fuzz::as_text(data, size), int64_t{1} << 40);
    remat::fuzz::require(b.bytes >= 0 && b.bytes <= remat::kMaxTotalBytes, "budget in range");
  });
  return 0;
}
