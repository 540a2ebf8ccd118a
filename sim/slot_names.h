// SlotNames: a trace's slot -> id table, each id stored as two pieces (a prefix and a name)
// from a shared piece list, so that the planner's ids ("i1.m0/" + a tensor name) cost two
// integers per slot instead of a heap string each (a 70B schedule has ~500 K slots), and the
// snapshot or text reader's ids one piece each. Reading an id builds the string.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace oomcast::sim {

class SlotNames {
 public:
  SlotNames() : pieces_(1) {}  // piece 0 is ""

  size_t size() const { return parts_.size(); }
  bool empty() const { return parts_.empty(); }
  void reserve(size_t slots) { parts_.reserve(slots); }
  // Slots added by resize have the empty id.
  void resize(size_t slots) { parts_.resize(slots, Parts{0, 0}); }

  // A slot whose id is `id`, one piece of its own.
  void push_back(std::string id) { parts_.push_back(Parts{add_piece(std::move(id)), 0}); }
  // A slot whose id is a string built from `args` (as std::string's constructor takes them).
  template <typename... Args>
  void emplace_back(Args&&... args) {
    push_back(std::string(std::forward<Args>(args)...));
  }
  // A slot whose id is piece `prefix` followed by piece `name` (from add_piece).
  void push_back(uint32_t prefix, uint32_t name) { parts_.push_back(Parts{prefix, name}); }
  // Appends a piece (not deduplicated: a writer that reuses pieces keeps their indices).
  uint32_t add_piece(std::string text) {
    pieces_.push_back(std::move(text));
    return static_cast<uint32_t>(pieces_.size() - 1);
  }

  // The id of `slot`.
  std::string operator[](size_t slot) const {
    const Parts& p = parts_[slot];
    if (p[1] == 0) return pieces_[p[0]];
    return pieces_[p[0]] + pieces_[p[1]];
  }
  // The pieces of `slot`'s id (prefix, name); 0 is the empty piece.
  const std::array<uint32_t, 2>& parts(size_t slot) const { return parts_[slot]; }
  const std::string& piece(uint32_t index) const { return pieces_[index]; }
  size_t piece_count() const { return pieces_.size(); }

  // The ids in slot order, each built as it is read (`for (const std::string& id : names)`).
  class const_iterator {
   public:
    using value_type = std::string;
    using difference_type = std::ptrdiff_t;
    const_iterator(const SlotNames* names, size_t slot) : names_(names), slot_(slot) {}
    std::string operator*() const { return (*names_)[slot_]; }
    const_iterator& operator++() {
      ++slot_;
      return *this;
    }
    bool operator==(const const_iterator& other) const { return slot_ == other.slot_; }
    bool operator!=(const const_iterator& other) const { return slot_ != other.slot_; }

   private:
    const SlotNames* names_;
    size_t slot_;
  };
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, parts_.size()); }

 private:
  using Parts = std::array<uint32_t, 2>;
  std::vector<std::string> pieces_;
  std::vector<Parts> parts_;
};

}  // namespace oomcast::sim
