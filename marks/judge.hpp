#pragma once
// Whether a mark counts for the image and the host about to run it (`gpuenv verify`; docs/mark.md "What counts").
// Pure: the caller reads the records, the keys and the host; this says for each record whether it counts and,
// when it does not, every reason why.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "marks/dsse.hpp"
#include "marks/keys.hpp"
#include "marks/statement.hpp"

namespace gpuenv::marks {

/// What the mark must cover. Empty strings ask nothing of that field.
struct MarkWanted {
  Digest image;               ///< the manifest digest the record must name
  std::string gpu_product;    ///< "NVIDIA-H200" (the node label's spelling) or NVML's name ("NVIDIA H200")
  std::vector<std::string> gpu_spellings;  ///< other names of that product older drivers reported (resolver::gpu_products)
  std::string driver;         ///< the host's driver "580.82.07"
  std::string cc_mode;        ///< off | on | devtools
  std::string level;          ///< the least level: quick < standard < long
  std::optional<std::int64_t> max_age_s;  ///< timeVerified no older than this
  std::int64_t now = 0;       ///< seconds since the epoch
  bool allow_replay = false;  ///< count marks made from recorded GPU answers
};

/// One record, judged.
struct MarkVerdict {
  bool counts = false;
  std::vector<std::string> reasons;  ///< why it does not count, each on its own; empty when it counts
  std::optional<MarkStatement> statement;  ///< when the envelope held a readable statement
  int key = -1;                      ///< index of the key that verified it
};

/// "NVIDIA H200" → "NVIDIA-H200", as GPU Feature Discovery sanitises product names for its node label: characters
/// outside [A-Za-z0-9-_. ] dropped, spaces turned into '-'.
std::string gpu_product_label(std::string_view name);

/// Whether a record's driver covers the host's: the same version, or the same branch (the first number) and
/// not older than the one validated. 580.65.06 covers 580.65.06 and 580.82.07; not 575.57.08 nor 590.44.01.
bool driver_covers(std::string_view validated, std::string_view host);

/// The rank of a level (quick 1, standard 2, long 3); 0 for an unknown one.
int level_rank(std::string_view level);

/// Judges one record: its envelope JSON (a layer's bytes) against the keys and what is wanted. Every reason is
/// collected, not only the first: a signature that no key verifies, a payload that is not a gpuenv mark, another
/// image, FAILED, another GPU model, a driver the record does not cover, a lower level, another CC mode, past
/// notAfter, older than max_age, made by the replay backend.
MarkVerdict judge_mark(std::string_view envelope_json, const std::vector<const Key*>& keys, const MarkWanted& wanted, const std::string& where);

}  // namespace gpuenv::marks
