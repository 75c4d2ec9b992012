// A tokenizer.json for a synthetic checkpoint (`day0 synth`): a byte-level BPE with exactly the config's vocabulary
// size, so that `day0 serve` can run random weights at real scale. Random weights emit ids from the whole head
// (201,088 for gpt-oss), and a tokenizer that cannot decode one fails the request.
//
// Ids: the given special ids (the config's bos / eos / pad) are special added tokens "<|synthetic_special_ID|>";
// the other ids, in ascending order, are first the 256 bytes (GPT-2's byte-level characters, byte order), then
// merges. Each merge joins a word (lowercase letters, maybe after one space) with a letter, its word drawn from the
// words so far by a generator seeded with `seed`, so text encodes to plausible word pieces and every id decodes to
// ASCII letters and spaces. The same arguments give the same bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace day0 {

// An error where vocab_size cannot hold the 256 byte tokens and the special ids, or a special id lies outside it.
Result<std::string> synthetic_tokenizer_json(std::int64_t vocab_size, std::span<const std::int32_t> special_ids,
                                             std::uint64_t seed);

}  // namespace day0
