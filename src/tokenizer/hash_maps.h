// Flat open-addressing maps for the tokenizer's hot lookups: token string -> id (keys in one arena,
// looked up by string_view without allocating) and (left id, right id) -> merge. Built once, read-only.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace day0::tok {

inline std::uint64_t hash_bytes(std::string_view s) {
  // 8 bytes at a time with a multiply-xorshift mix: short tokens hash in a few cycles.
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * kMul);
  const char* p = s.data();
  std::size_t n = s.size();
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h *= kMul;
  return h ^ (h >> 32);
}

inline std::size_t table_size_for(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  return cap;
}

// Token string -> id. insert() of a repeated key overwrites its id (and returns false), as a
// deserialized hash map keeps the last value.
class StringIdMap {
 public:
  void reserve(std::size_t n, std::size_t key_bytes) {
    slots_.assign(table_size_for(n), Slot{});
    arena_.reserve(key_bytes);
  }
  bool insert(std::string_view key, std::int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const std::uint64_t h = hash_bytes(key);
    Slot* slot = find_slot(key, h);
    if (slot->id >= 0) {
      slot->id = id;
      return false;
    }
    *slot = Slot{static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(key.size()), id,
                 static_cast<std::uint32_t>(h)};
    arena_.append(key);
    ++size_;
    return true;
  }
  // -1 when absent.
  std::int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    return const_cast<StringIdMap*>(this)->find_slot(key, hash_bytes(key))->id;
  }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint32_t offset = 0, length = 0;
    std::int32_t id = -1;
    std::uint32_t hash = 0;
  };
  Slot* find_slot(std::string_view key, std::uint64_t h) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.id < 0) return &s;
      if (s.hash == static_cast<std::uint32_t>(h) && s.length == key.size() &&
          std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        return &s;
      }
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(table_size_for(size_ + 1 > old.size() ? size_ + 1 : old.size()), Slot{});
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      std::size_t i = hash_bytes(std::string_view(arena_.data() + s.offset, s.length)) & mask;
      while (slots_[i].id >= 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t size_ = 0;
};

// (left id, right id) -> (rank, merged id). insert() overwrites: the reference collects merges into
// a hash map, so a repeated pair keeps its last rank.
class PairMap {
 public:
  struct Value {
    std::uint32_t rank;
    std::int32_t id;
  };
  void reserve(std::size_t n) { slots_.assign(table_size_for(n), Slot{}); }
  void insert(std::int32_t a, std::int32_t b, Value v) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot* s = find_slot(key_of(a, b));
    if (s->key == kEmpty) ++size_;
    s->key = key_of(a, b);
    s->value = v;
  }
  const Value* find(std::int32_t a, std::int32_t b) const {
    if (slots_.empty()) return nullptr;
    const Slot* s = const_cast<PairMap*>(this)->find_slot(key_of(a, b));
    return s->key == kEmpty ? nullptr : &s->value;
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = ~0ull;
  struct Slot {
    std::uint64_t key = kEmpty;
    Value value{};
  };
  static std::uint64_t key_of(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  Slot* find_slot(std::uint64_t key) {
    const std::size_t mask = slots_.size() - 1;
    std::uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == key || slots_[i].key == kEmpty) return &slots_[i];
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(table_size_for(size_ + 1 > old.size() ? size_ + 1 : old.size()), Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      *find_slot(s.key) = s;
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace day0::tok
