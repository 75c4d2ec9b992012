// Test harness for the paged KV cache: plays the executor (writes K/V rows of newly computed tokens through the
// block table) next to one ContiguousKvCache per sequence, the reference that the gathered rows must equal.
// K/V rows are a deterministic function of the token prefix, as real ones are, so prefix reuse is valid.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "cache/contiguous_kv.h"
#include "cache/kv_block_storage.h"
#include "cache/sequence_cache.h"

namespace day0::test {

class PagedKvHarness {
 public:
  PagedKvHarness(KvLayout layout, std::int32_t n_blocks, std::int64_t max_tokens, bool prefix_caching = true)
      : layout_(layout),
        max_tokens_(max_tokens),
        cache_({.n_blocks = n_blocks, .block_size = layout.block_size, .prefix_caching = prefix_caching}),
        storage_(*KvBlockStorage::create(layout, n_blocks)) {}

  SequenceCache& cache() { return cache_; }
  const std::map<SeqId, std::unique_ptr<ContiguousKvCache>>& live() const { return refs_; }

  Status admit(SeqId seq, std::span<const TokenId> prompt) {
    D0_ASSIGN_OR_RETURN(const std::int64_t hit, cache_.allocate(seq, prompt));
    auto ref = std::make_unique<ContiguousKvCache>(layout_.row_widths, max_tokens_);
    // Rows of the prefix hit are already in the pool; the reference computes them itself.
    for (int l = 0; l < static_cast<int>(layout_.row_widths.size()); ++l)
      if (layout_.row_widths[static_cast<std::size_t>(l)] > 0)
        D0_RETURN_IF_ERROR(ref->write(l, rows(seq, l, 0, hit, 0), rows(seq, l, 0, hit, 1)));
    ref->commit(hit);
    refs_[seq] = std::move(ref);
    return Status::success();
  }
  // Computes (writes K/V of) the pending tokens of a sequence, at most `chunk` of them.
  Status compute(SeqId seq, std::int64_t chunk = 1 << 30) {
    D0_RETURN_IF_ERROR(storage_.apply(cache_.take_ops().block_copies));
    const std::int64_t n0 = cache_.n_computed(seq);
    const std::int64_t n1 = std::min(cache_.n_tokens(seq), n0 + chunk);
    std::vector<std::int64_t> slots;
    cache_.slots(seq, n0, n1, slots);
    ContiguousKvCache& ref = *refs_.at(seq);
    const std::int64_t r0 = ref.length();
    for (int l = 0; l < static_cast<int>(layout_.row_widths.size()); ++l) {
      if (layout_.row_widths[static_cast<std::size_t>(l)] == 0) continue;
      D0_RETURN_IF_ERROR(storage_.write(l, slots, rows(seq, l, n0, n1, 0), rows(seq, l, n0, n1, 1)));
      D0_RETURN_IF_ERROR(ref.write(l, rows(seq, l, n0, n1, 0), rows(seq, l, n0, n1, 1)));
    }
    EXPECT_EQ(r0, n0);
    ref.commit(n1 - n0);
    return cache_.mark_computed(seq, n1);
  }
  Status fork(SeqId parent, SeqId child) {
    D0_RETURN_IF_ERROR(cache_.fork(parent, child));
    auto ref = std::make_unique<ContiguousKvCache>(layout_.row_widths, max_tokens_);
    const ContiguousKvCache& p = *refs_.at(parent);
    for (int l = 0; l < static_cast<int>(layout_.row_widths.size()); ++l)
      if (layout_.row_widths[static_cast<std::size_t>(l)] > 0)
        D0_RETURN_IF_ERROR(ref->write(l, p.keys(l, p.length()).clone(), p.values(l, p.length()).clone()));
    ref->commit(p.length());
    refs_[child] = std::move(ref);
    return Status::success();
  }
  Status release(SeqId seq) {
    D0_RETURN_IF_ERROR(cache_.free(seq));
    refs_.erase(seq);
    return Status::success();
  }
  // Gathered computed rows of every live sequence equal its reference, in every layer.
  // Pending copy-on-write orders are applied first, as the executor does before every forward pass.
  void expect_matches_reference() {
    ASSERT_TRUE(storage_.apply(cache_.take_ops().block_copies).ok());
    for (const auto& [seq, ref] : refs_) {
      const std::int64_t n = cache_.n_computed(seq);
      ASSERT_EQ(ref->length(), n) << "sequence " << seq;
      for (int l = 0; l < static_cast<int>(layout_.row_widths.size()); ++l) {
        Tensor k, v;
        ASSERT_TRUE(storage_.gather(l, cache_.block_table(seq), n, k, v).ok());
        if (layout_.row_widths[static_cast<std::size_t>(l)] == 0) {  // a layer without KV: empty rows
          EXPECT_EQ(k.shape(), (Shape{n, 0}));
          continue;
        }
        const Tensor rk = ref->keys(l, n), rv = ref->values(l, n);
        ASSERT_EQ(k.shape(), rk.shape());
        for (std::int64_t i = 0; i < k.numel(); ++i) {
          ASSERT_EQ(k.data<float>()[i], rk.data<float>()[i]) << "sequence " << seq << " layer " << l << " K " << i;
          ASSERT_EQ(v.data<float>()[i], rv.data<float>()[i]) << "sequence " << seq << " layer " << l << " V " << i;
        }
      }
    }
  }

 private:
  static std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  // Rows [r0, r1) of K (kind 0) or V (kind 1): each a function of the tokens up to and including its position.
  Tensor rows(SeqId seq, int layer, std::int64_t r0, std::int64_t r1, int kind) const {
    const std::int64_t w = layout_.row_widths[static_cast<std::size_t>(layer)];
    const auto tokens = cache_.tokens(seq);
    Tensor t = Tensor::zeros({r1 - r0, w}, DType::f32);
    std::uint64_t h = mix(static_cast<std::uint64_t>(layer) * 2 + static_cast<std::uint64_t>(kind));
    for (std::int64_t p = 0; p < r1; ++p) {
      h = mix(h ^ static_cast<std::uint32_t>(tokens[static_cast<std::size_t>(p)]));
      if (p < r0) continue;
      for (std::int64_t j = 0; j < w; ++j)
        t.data<float>()[(p - r0) * w + j] = static_cast<float>(mix(h + static_cast<std::uint64_t>(j)) >> 40) / 65536.f;
    }
    return t;
  }

  KvLayout layout_;
  std::int64_t max_tokens_;
  SequenceCache cache_;
  KvBlockStorage storage_;
  std::map<SeqId, std::unique_ptr<ContiguousKvCache>> refs_;
};

}  // namespace day0::test
