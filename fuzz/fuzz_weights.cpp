// fuzz/fuzz_weights.cpp: libFuzzer harness of the weights-file loader (tclm/weights.h) and of the
// inference engine's checks of what it loads (tclm/infer.h).
//
// Each input is parsed three ways:
//   a. the bytes as they are (magic, version, checksum and truncation paths);
//   b. the bytes with their last 4 bytes replaced by the correct CRC-32 of the rest, so that mutations
//      of the structure get past the checksum into the structure parser;
//   c. as b, with the header's magic and format version forced to the valid ones as well.
// When a variant parses:
//   * serialize_weights must not throw and must give back exactly the parsed bytes, and parsing
//     that must succeed (the round trip of the format);
//   * CostModelEngine is built from it (tclm::Error is the documented refusal of a model whose kind,
//     feature version, config or tensor shapes do not fit) and, when it accepts, scores one small real
//     Ansor program and one small real MetaSchedule trace (one of the two is refused by the feature
//     family check), through predict_programs and predict_record_lines.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tclm/error.h"
#include "tclm/infer.h"
#include "tclm/record.h"
#include "tclm/weights.h"

namespace {

using tclm_fuzz::fuzz_fail;

// A matmul schedule from TVM's tutorial logs (tests/data/tvm_ci_logs/matmul.json.gz, Apache-2.0).
constexpr std::string_view kAnsorLine =
    R"({"i": [["[\"matmul_add\", 1024, 1024, 1024, \"float32\"]", "llvm -keys=cpu -link-params=0", )"
    R"([18, 64, 64, 0, 0, 0, 0, 0]], [[], [["SP", 2, 0, 1024, [2, 1, 4], 1], ["SP", 2, 4, 1024, [1, 1, 8], 1], )"
    R"(["SP", 2, 8, 1024, [4], 1], ["RE", 2, [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]], ["FSP", 4, 0, 0, 2], )"
    R"(["FSP", 4, 3, 1, 2], ["RE", 4, [0, 3, 1, 4, 2, 5]], ["CA", 2, 4, 3], ["FU", 4, [0, 1]], ["AN", 4, 0, 3], )"
    R"(["PR", 2, 0, "auto_unroll_max_step$8"], ["AN", 2, 9, 2], ["AN", 4, 4, 2]]]], )"
    R"("r": [[0.0044742], 0, 0.335558, 1607112214], "v": "v0.3"})";

// The start of a reduction's MetaSchedule trace (../shared/data/bennu, MIT), as Trace::AsJSON writes it.
constexpr std::string_view kTrace =
    R"([[["GetBlock",[],["data_red","main"],["b0"]],["GetBlock",[],["root","main"],["b1"]],)"
    R"(["GetLoops",["b0"],[],["l2","l3","l4"]],["SamplePerfectTile",["l4"],[2,64],["v5","v6"]],)"
    R"(["Split",["l4","v5","v6"],[1,0],["l7","l8"]],["RFactor",["l8"],[2],["b9"]],)"
    R"(["Annotate",["b1",128],["meta_schedule.parallel"],[]],)"
    R"(["SampleCategorical",[],[[0,16,64,512],[0.25,0.25,0.25,0.25]],["v10"]],)"
    R"(["Annotate",["b1","v10"],["meta_schedule.unroll_explicit"],[]],["EnterPostproc",[],[],[]]],)"
    R"([[3,[8,16]],[7,2]]])";

struct Programs {
  std::vector<std::vector<tclm::TransformStep>> ansor, trace;
  Programs() : ansor(1), trace(1) {
    tclm::RecordParser parser;
    tclm::MeasureRecord r;
    if (std::string why = parser.parse(kAnsorLine, &r); !why.empty()) fuzz_fail("harness set-up", why);
    ansor[0] = r.steps;
    if (std::string why = tclm::parse_trace_json(kTrace, &trace[0]); !why.empty()) fuzz_fail("harness set-up", why);
  }
};

void put_u32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t crc_of(const std::string& s, size_t n) {
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(n)));
}

std::string weights_summary(const tclm::WeightsFile& w) {
  return "kind '" + w.model_kind.substr(0, 32) + "', " + std::to_string(w.tensors.size()) + " tensors, " +
         std::to_string(w.num_parameters()) + " values";
}

void score(const tclm::WeightsFile& w) {
  static const Programs programs;
  try {
    tclm::CostModelEngine engine(w, "fuzz.tclm");
    engine.set_threads(1);
    for (const auto* set : {&programs.ansor, &programs.trace}) {
      try {
        const std::vector<float> s = engine.predict_programs(*set);
        if (s.size() != set->size()) fuzz_fail("predict_programs returned the wrong number of scores", weights_summary(w));
      } catch (const tclm::Error&) {
        // documented: a program of the other feature family
      }
    }
    std::vector<std::string> errors;
    const std::vector<std::string_view> lines = {kAnsorLine, kTrace, "{"};
    const std::vector<float> s = engine.predict_record_lines(lines, &errors);
    if (s.size() != lines.size() || errors.size() != lines.size() || errors[2].empty()) {
      fuzz_fail("predict_record_lines broke its contract", weights_summary(w));
    }
  } catch (const tclm::Error&) {
    // documented: the engine refuses this model (kind, feature version, config, tensors)
  }
}

void exercise(const std::string& bytes) {
  tclm::WeightsFile w;
  try {
    w = tclm::parse_weights(bytes, "fuzz.tclm");
  } catch (const tclm::Error&) {
    return;  // documented refusal
  }
  std::string again;
  try {
    again = tclm::serialize_weights(w);
  } catch (const tclm::Error& e) {
    fuzz_fail("serialize_weights refuses what parse_weights accepted", e.what());
  }
  if (again != bytes) fuzz_fail("serialize_weights(parse_weights(b)) != b", weights_summary(w));
  try {
    const tclm::WeightsFile back = tclm::parse_weights(again, "fuzz-roundtrip.tclm");
    if (back.tensors.size() != w.tensors.size()) fuzz_fail("round trip lost tensors", weights_summary(w));
  } catch (const tclm::Error& e) {
    fuzz_fail("parse_weights refuses what serialize_weights wrote", e.what());
  }
  score(w);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string raw(reinterpret_cast<const char*>(data), size);
  exercise(raw);  // a
  if (size < 4) return 0;
  std::string fixed = raw;  // b
  put_u32(fixed, size - 4, crc_of(fixed, size - 4));
  if (fixed != raw) exercise(fixed);
  if (size >= 16) {  // c
    std::string forced = fixed;
    std::memcpy(forced.data(), "TCLMWTS1", 8);
    put_u32(forced, 8, tclm::kWeightsFormatVersion);
    put_u32(forced, size - 4, crc_of(forced, size - 4));
    if (forced != fixed) exercise(forced);
  }
  return 0;
}
