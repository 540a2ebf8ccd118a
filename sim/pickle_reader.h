// A native reader for the subset of Python pickle (protocols 2-5) that plain-data dumps use:
// dicts, lists, tuples, sets, ints, floats, str, bytes, bools and None. No Python objects
// (GLOBAL, REDUCE, ...). Built for torch memory snapshots, which can be hundreds of MB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/gzip_file.h"

namespace oomcast::sim::pickle {

enum class Kind : uint8_t {
  Unset,   // an empty memo slot; never part of a finished document
  None,
  Bool,
  Int,     // fits in int64_t
  BigInt,  // an int outside int64_t; its little-endian bytes stay in the input
  Float,
  String,  // UTF-8, not validated
  Bytes,   // bytes, bytearray and Python 2 str
  List,
  Tuple,
  Dict,
  Set,     // set and frozenset
  Skipped, // a container the reader was asked not to keep (ParseOptions::skip_value_of_key)
};

// The Python type name of a kind ("int", "dict", ...), for error messages.
const char* kind_name(Kind kind);

// One decoded value: 16 bytes, no heap memory of its own. Strings and big ints point into
// the input; containers index into their Document. Every value knows the byte offset of the
// opcode that produced it, so errors about it can say where it is.
class Value {
 public:
  // Trivial, so arrays of values are allocated without writing them first; Value{} is an
  // Unset value (all zero).
  Value() = default;
  Kind kind() const { return static_cast<Kind>(tag_ & 0xff); }
  uint64_t offset() const { return tag_ >> 16; }

  bool is_int() const { return kind() == Kind::Int; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_dict() const { return kind() == Kind::Dict; }
  // List, Tuple or Set.
  bool is_sequence() const {
    return kind() == Kind::List || kind() == Kind::Tuple || kind() == Kind::Set;
  }

  // Requires: is_int().
  int64_t int_value() const { return static_cast<int64_t>(payload_); }
  // Requires: kind() == Kind::Bool.
  bool bool_value() const { return payload_ != 0; }
  // Requires: kind() == Kind::Float.
  double float_value() const;

 private:
  friend class Document;
  friend class Parser;
  Value(Kind kind, uint64_t offset, uint64_t payload, uint8_t header = 0)
      : tag_(static_cast<uint64_t>(kind) | (uint64_t{header} << 8) | (offset << 16)),
        payload_(payload) {}
  // Where the data of a String, Bytes or BigInt starts, relative to offset().
  uint8_t header_size() const { return static_cast<uint8_t>(tag_ >> 8); }

  uint64_t tag_;      // kind (8 bits) | header size (8 bits) | opcode offset (48 bits)
  uint64_t payload_;  // int value, double bits, bool, string length or container index
};

// A decoded pickle. Owns its containers; strings are views into the input bytes, which
// must outlive the Document.
class Document {
 public:
  const Value& root() const { return root_; }
  const std::string& name() const { return name_; }

  // The text of a String or Bytes value; empty for other kinds.
  std::string_view text(const Value& value) const;
  // The items of a List, Tuple or Set; a Dict's keys and values, alternating
  // (key 0, value 0, key 1, ...). Empty for other kinds, Skipped included.
  std::span<const Value> items(const Value& value) const;
  // The value stored under the string key `key`, or nullptr. Linear: dicts here are small.
  const Value* find(const Value& dict, std::string_view key) const;

  // How many containers the document holds, and which one a List, Tuple, Dict or Set value
  // is (0 .. container_count() - 1): the same container fetched twice from the pickle's
  // memo (an object the pickler saw before) has the same index. Requires: a container kind.
  size_t container_count() const { return containers_.size(); }
  uint64_t container_index(const Value& value) const { return value.payload_; }

  // Stores the value of a non-negative Int, or of a BigInt below 2^64, in `out`. Returns
  // false (and leaves `out` alone) for negative ints, ints of 2^64 or more and other kinds.
  bool as_uint64(const Value& value, uint64_t* out) const;

  // Throws InputError{name(), key, "<message> at byte <offset>"}. `event` goes to
  // SourceLocation::event.
  [[noreturn]] void fail(uint64_t offset, const std::string& key, const std::string& message,
                         int64_t event = -1) const;

 private:
  friend class Parser;
  // Where a container's items lie in items_. All items share one array, so a big snapshot
  // costs a few large allocations instead of one per dict.
  struct Span {
    uint64_t begin = 0;
    uint64_t size = 0;
    uint64_t capacity = 0;
  };
  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<Span, HugePageAllocator<Span>> containers_;
  std::vector<Value, HugePageAllocator<Value>> items_;
  Value root_{};
};

struct ParseOptions {
  // When a container is pushed right after a string equal to this key (that is, as that
  // key's value in a dict), it and everything built inside it become Kind::Skipped and
  // cost no memory. Torch snapshots use this for "frames": stack traces are most of the file.
  // Memo fetches inside a skipped value are only checked to be in range.
  std::string_view skip_value_of_key;
};

// Decodes `size` bytes of pickle data. `name` is used in errors. Throws InputError (with
// the byte offset in the message) for truncated or corrupt data, unsupported opcodes and
// malformed structure; never reads outside [data, data + size). Memory use is bounded by a
// small multiple of `size`.
Document parse_pickle(const std::string& name, const uint8_t* data, size_t size,
                      const ParseOptions& options = {});

}  // namespace oomcast::sim::pickle
