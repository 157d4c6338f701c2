// libFuzzer target: remat-chain JSON.
#include "fuzz_common.h"
#include "remat/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  remat::fuzz::expect_value_or_input_error([&] {
    const remat::Chain chain =
        remat::parse_chain_json(remat::fuzz::as_text(data, size), "fuzz.json");
    (void)remat::parse_chain_json(remat::chain_to_json(chain), "round-trip");
  });
  return 0;
}
