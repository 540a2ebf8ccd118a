// The pickle virtual machine: runs the opcodes of a protocol 2-5 pickle over a value stack
// and a memo, building a Document. Opcode semantics follow the pickletools documentation.
#include "sim/pickle_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/input_error.h"
#include "base/progress.h"

namespace oomcast::sim::pickle {
namespace {

// Opcode bytes, named as in Python's pickletools.
enum Op : uint8_t {
  kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kDup = '2', kNone = 'N',
  kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kBinFloat = 'G',
  kBinString = 'T', kShortBinString = 'U', kBinUnicode = 'X', kBinBytes = 'B',
  kShortBinBytes = 'C', kAppend = 'a', kAppends = 'e', kDict = 'd', kEmptyDict = '}',
  kList = 'l', kEmptyList = ']', kTuple = 't', kEmptyTuple = ')', kSetItem = 's',
  kSetItems = 'u', kBinGet = 'h', kLongBinGet = 'j', kBinPut = 'q', kLongBinPut = 'r',
  kProto = 0x80, kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88,
  kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b, kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kEmptySet = 0x8f, kAddItems = 0x90,
  kFrozenSet = 0x91, kMemoize = 0x94, kFrame = 0x95, kByteArray8 = 0x96,
};

// Says why an opcode this reader refuses is there, so the error tells what the file holds.
std::string describe_unsupported_opcode(uint8_t op) {
  struct Refused {
    uint8_t op;
    const char* name;
    bool builds_object;  // otherwise a protocol 0/1 text opcode
  };
  static const Refused kRefused[] = {
      {'c', "GLOBAL", true}, {0x93, "STACK_GLOBAL", true}, {'R', "REDUCE", true},
      {'b', "BUILD", true}, {0x81, "NEWOBJ", true}, {0x92, "NEWOBJ_EX", true},
      {'i', "INST", true}, {'o', "OBJ", true}, {'P', "PERSID", true}, {'Q', "BINPERSID", true},
      {0x82, "EXT1", true}, {0x83, "EXT2", true}, {0x84, "EXT4", true},
      {0x97, "NEXT_BUFFER", true}, {0x98, "READONLY_BUFFER", true}, {'I', "INT", false},
      {'L', "LONG", false}, {'F', "FLOAT", false}, {'S', "STRING", false},
      {'V', "UNICODE", false}, {'p', "PUT", false}, {'g', "GET", false},
  };
  static const char kDigits[] = "0123456789abcdef";
  const std::string text =
      std::string("unsupported pickle opcode 0x") + kDigits[op >> 4] + kDigits[op & 15];
  for (const Refused& refused : kRefused) {
    if (refused.op != op) continue;
    return text + " (" + refused.name + "): " +
           (refused.builds_object ? "the pickle holds Python objects, not plain data"
                                  : "protocol 0/1 text opcodes are not read");
  }
  return text + " (not a pickle opcode)";
}

uint64_t read_le(const uint8_t* p, size_t n) {
  // The widths opcodes use, as one load each (most opcodes read one of them).
  if constexpr (std::endian::native == std::endian::little) {
    switch (n) {
      case 1: return p[0];
      case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
      case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
      case 8: { uint64_t v; std::memcpy(&v, p, 8); return v; }
      default: break;
    }
  }
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) value |= uint64_t{p[i]} << (8 * i);
  return value;
}

// True when the little-endian two's-complement int in p[0, n) lies in int64_t.
bool fits_int64(const uint8_t* p, size_t n) {
  if (n <= 8) return true;
  const uint8_t sign = (p[n - 1] & 0x80) ? 0xff : 0x00;
  if ((p[7] & 0x80) != (sign & 0x80)) return false;
  for (size_t i = 8; i < n; ++i) {
    if (p[i] != sign) return false;
  }
  return true;
}

int64_t decode_small_long(const uint8_t* p, size_t n) {
  if (n == 0) return 0;
  const size_t used = n < 8 ? n : 8;
  uint64_t bits = read_le(p, used);
  if (used < 8 && (p[used - 1] & 0x80)) bits |= ~uint64_t{0} << (8 * used);
  return static_cast<int64_t>(bits);
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Unset: return "unset memo slot";
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Set: return "set";
    case Kind::Skipped: return "skipped value";
  }
  return "?";
}

double Value::float_value() const {
  double value;
  std::memcpy(&value, &payload_, sizeof value);
  return value;
}

std::string_view Document::text(const Value& value) const {
  if (value.kind() != Kind::String && value.kind() != Kind::Bytes) return {};
  return {reinterpret_cast<const char*>(data_) + value.offset() + value.header_size(),
          static_cast<size_t>(value.payload_)};
}

std::span<const Value> Document::items(const Value& value) const {
  switch (value.kind()) {
    case Kind::List: case Kind::Tuple: case Kind::Dict: case Kind::Set: {
      const Span& span = containers_[value.payload_];
      return {items_.data() + span.begin, span.size};
    }
    default:
      return {};
  }
}

const Value* Document::find(const Value& dict, std::string_view key) const {
  if (!dict.is_dict()) return nullptr;
  std::span<const Value> entries = items(dict);
  // From the end, so a repeated key resolves to its last value, as in Python.
  for (size_t i = entries.size(); i >= 2; i -= 2) {
    if (entries[i - 2].is_string() && text(entries[i - 2]) == key) return &entries[i - 1];
  }
  return nullptr;
}

bool Document::as_uint64(const Value& value, uint64_t* out) const {
  if (value.kind() == Kind::Int) {
    if (value.int_value() < 0) return false;
    *out = static_cast<uint64_t>(value.int_value());
    return true;
  }
  if (value.kind() != Kind::BigInt) return false;
  const uint8_t* p = data_ + value.offset() + value.header_size();
  const size_t n = static_cast<size_t>(value.payload_);
  if (p[n - 1] & 0x80) return false;
  for (size_t i = 8; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  *out = read_le(p, 8);
  return true;
}

void Document::fail(uint64_t offset, const std::string& key, const std::string& message,
                    int64_t event) const {
  throw InputError({name_, 0, 0, event}, key, message + " at byte " + std::to_string(offset));
}

// The memo: Python's unpickler remembers every string and container, millions of them in a
// big snapshot. One array (large ones get huge pages), doubled as it fills: a fetch, one per
// shared frame of a stack trace, is a bounds check and a load.
class Memo {
 public:
  // How many slots are filled: the index MEMOIZE uses, as in CPython's unpickler.
  uint64_t count() const { return count_; }
  // One past the highest index stored.
  uint64_t size() const { return size_; }
  const Value* find(uint64_t index) const {
    if (index >= size_) return nullptr;
    const Value& slot = slots_[index];
    return slot.kind() == Kind::Unset ? nullptr : &slot;
  }
  void reserve(uint64_t slots) { slots_.reserve(slots); }
  // Requires: `index` has been checked against the input size, as every slot up to it is
  // allocated. Slots are filled in order, so growing a page's worth at a time writes few
  // Unset slots ahead; the vector still doubles its capacity past a reservation.
  void put(uint64_t index, const Value& value) {
    if (index >= slots_.size()) slots_.resize(std::max<uint64_t>(index + 1, slots_.size() + 256), Value{});
    if (index >= size_) size_ = index + 1;
    Value& slot = slots_[index];
    if (slot.kind() == Kind::Unset) ++count_;
    slot = value;
  }

 private:
  std::vector<Value, HugePageAllocator<Value>> slots_;  // Unset where nothing was stored
  uint64_t size_ = 0;
  uint64_t count_ = 0;
};

// Runs the opcodes. Python's unpickler keeps the items pushed since the last MARK on a
// separate stack; here one stack holds everything and each mark records where it began, so
// an opcode may only consume the items above the newest mark.
class Parser {
 public:
  Parser(const std::string& name, const uint8_t* data, size_t size, const ParseOptions& options)
      : skip_key_(options.skip_value_of_key) {
    doc_.name_ = name;
    doc_.data_ = data;
    doc_.size_ = size;
    // Real snapshots (stack traces skipped) keep about one item per 10 input bytes. Reserving
    // address space for 2 per 16 means no regrowth, which would touch and copy it all again;
    // pages never written cost nothing.
    // Stack traces kept: a frame shared through the memo costs one 2-byte BINGET and one
    // item, so reserve one per 2 bytes.
    doc_.items_.reserve(options.skip_value_of_key.empty() ? size / 2 : size / 8);
    // Likewise the containers (one per 32 input bytes in the 2.7B step snapshot with its stack
    // traces) and the memo (one slot per 20 bytes there): regrowing them copied each and
    // touched fresh pages, a third of the page faults of a replay.
    doc_.containers_.reserve(size / 16);
    memo_.reserve(size / 8);
    stack_.reserve(1024);
  }

  Document run();

 private:
  struct Mark {
    size_t stack_size;
    bool skipping;  // items pushed above this mark end up inside a Skipped container
  };

  [[noreturn]] void fail(uint64_t offset, const std::string& message) const {
    doc_.fail(offset, "", message);
  }
  // Returns the next `n` argument bytes of the opcode at `op_pos` and advances past them.
  const uint8_t* take(size_t n, size_t op_pos, const char* what) {
    if (doc_.size_ - pos_ < n) {
      fail(op_pos, "truncated pickle: the data (" + std::to_string(doc_.size_) +
                       " bytes) ends inside the " + what + " opcode");
    }
    const uint8_t* p = doc_.data_ + pos_;
    pos_ += n;
    return p;
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back().stack_size; }
  void need(size_t n, size_t op_pos, const char* what) const {
    if (stack_.size() - base() < n) fail(op_pos, std::string("stack underflow in ") + what);
  }
  bool skipping_context() const { return !marks_.empty() && marks_.back().skipping; }
  // `end` is the stack size to look at: a container built from the top items must be judged
  // by what lies below those items.
  bool top_is_skipped(size_t end) const {
    return end > base() && stack_[end - 1].kind() == Kind::Skipped;
  }
  bool top_is_skip_key(size_t end) const {
    if (skip_key_.empty() || end <= base()) return false;
    const Value& top = stack_[end - 1];
    return top.is_string() && top.payload_ == skip_key_.size() && doc_.text(top) == skip_key_;
  }
  // A fresh container, or a Skipped placeholder when it is the value of the skipped key or
  // is built inside a skipped value (as an item after its MARK, or pushed right onto it for
  // a single APPEND).
  Value new_container(Kind kind, size_t op_pos, size_t end) {
    if (skipping_context() || top_is_skipped(end) || top_is_skip_key(end)) {
      return Value(Kind::Skipped, op_pos, 0);
    }
    doc_.containers_.push_back({doc_.items_.size(), 0, 0});
    return Value(kind, op_pos, doc_.containers_.size() - 1);
  }
  void append(uint64_t container, const Value* first, size_t count);
  // Pops the newest mark and builds a container from the items above it.
  Value container_from_mark(Kind kind, size_t op_pos, const char* what);
  // Moves the items above the newest mark into the container just below it.
  void extend_from_mark(Kind target_kind, size_t op_pos, const char* what);
  void add_to(const Value& target, Kind target_kind, const Value* first, size_t count,
              size_t op_pos, const char* what);
  void memo_put(uint64_t index, size_t op_pos);
  inline void memo_get(uint64_t index, size_t op_pos);
  void memo_get_slow(uint64_t index, size_t op_pos);
  // Pushes a str or bytes value whose length comes first in `length_bytes` bytes.
  void push_text(Kind kind, size_t length_bytes, size_t op_pos, const char* what);
  void push_long(size_t n, uint8_t header, size_t op_pos);

  Document doc_;
  std::string_view skip_key_;
  size_t pos_ = 0;
  std::vector<Value> stack_;
  std::vector<Mark> marks_;
  Memo memo_;
};

Value Parser::container_from_mark(Kind kind, size_t op_pos, const char* what) {
  if (marks_.empty()) fail(op_pos, std::string("no MARK before ") + what);
  const size_t begin = marks_.back().stack_size;
  const size_t count = stack_.size() - begin;
  if (kind == Kind::Dict && count % 2 != 0) fail(op_pos, "odd number of items for DICT");
  marks_.pop_back();
  Value made = new_container(kind, op_pos, begin);
  if (made.kind() != Kind::Skipped) append(made.payload_, stack_.data() + begin, count);
  stack_.resize(begin);
  return made;
}

void Parser::add_to(const Value& target, Kind target_kind, const Value* first, size_t count,
                    size_t op_pos, const char* what) {
  if (target.kind() == Kind::Skipped) return;
  if (target.kind() != target_kind) {
    fail(op_pos, std::string(what) + " needs a " + kind_name(target_kind) + " on the stack, found " +
                     kind_name(target.kind()));
  }
  append(target.payload_, first, count);
}

void Parser::append(uint64_t container, const Value* first, size_t count) {
  auto& items = doc_.items_;
  Document::Span& span = doc_.containers_[container];
  if (span.size + count > span.capacity) {
    if (span.begin + span.capacity == items.size()) {
      // Nothing was stored after this container: it can grow where it is.
      span.capacity = span.size + count;
      items.resize(span.begin + span.capacity);
    } else {
      // Move it to the end, leaving a gap. Only containers filled in several batches with
      // other containers built in between (lists over 1000 items) move, and doubling keeps
      // the gaps under the size of the final list.
      const uint64_t capacity = std::max(span.size + count, 2 * span.capacity);
      const uint64_t begin = items.size();
      items.resize(begin + capacity);
      std::copy_n(items.begin() + static_cast<ptrdiff_t>(span.begin), span.size,
                  items.begin() + static_cast<ptrdiff_t>(begin));
      span.begin = begin;
      span.capacity = capacity;
    }
  }
  std::copy_n(first, count, items.begin() + static_cast<ptrdiff_t>(span.begin + span.size));
  span.size += count;
}

void Parser::extend_from_mark(Kind target_kind, size_t op_pos, const char* what) {
  if (marks_.empty()) fail(op_pos, std::string("no MARK before ") + what);
  const size_t begin = marks_.back().stack_size;
  const size_t count = stack_.size() - begin;
  if (target_kind == Kind::Dict && count % 2 != 0) {
    fail(op_pos, std::string("odd number of items for ") + what);
  }
  marks_.pop_back();
  if (begin <= base()) fail(op_pos, std::string("stack underflow in ") + what);
  add_to(stack_[begin - 1], target_kind, stack_.data() + begin, count, op_pos, what);
  stack_.resize(begin);
}

void Parser::memo_put(uint64_t index, size_t op_pos) {
  need(1, op_pos, "memo put");
  // Picklers number memo entries from 0 upwards, each costing at least one byte; a bigger
  // index is corrupt data and must not make us allocate without bound.
  if (index > pos_) fail(op_pos, "memo index " + std::to_string(index) + " out of range");
  memo_.put(index, stack_.back());
}

void Parser::memo_get(uint64_t index, size_t op_pos) {
  // The common case first, without a call out of line: a stored value, room on the stack.
  if (!skipping_context() && stack_.size() < stack_.capacity()) {
    if (const Value* value = memo_.find(index)) {
      stack_.push_back(*value);
      return;
    }
  }
  memo_get_slow(index, op_pos);
}

void Parser::memo_get_slow(uint64_t index, size_t op_pos) {
  if (skipping_context() && index < memo_.size()) {
    // Inside a skipped value (a stack trace, mostly shared frames fetched from the memo)
    // the value is dropped anyway; not reading it saves a cache miss per frame.
    stack_.push_back(Value(Kind::Skipped, op_pos, 0));
    return;
  }
  const Value* value = memo_.find(index);
  if (!value) fail(op_pos, "memo index " + std::to_string(index) + " was never stored");
  stack_.push_back(*value);
}

void Parser::push_text(Kind kind, size_t length_bytes, size_t op_pos, const char* what) {
  const uint64_t length = read_le(take(length_bytes, op_pos, what), length_bytes);
  take(length, op_pos, what);
  stack_.push_back(Value(kind, op_pos, length, static_cast<uint8_t>(1 + length_bytes)));
}

void Parser::push_long(size_t n, uint8_t header, size_t op_pos) {
  const uint8_t* p = take(n, op_pos, header == 2 ? "LONG1" : "LONG4");
  if (fits_int64(p, n)) {
    stack_.push_back(Value(Kind::Int, op_pos, static_cast<uint64_t>(decode_small_long(p, n))));
  } else {
    stack_.push_back(Value(Kind::BigInt, op_pos, n, header));
  }
}

Document Parser::run() {
  const size_t size = doc_.size_;
  constexpr size_t kProgressBytes = size_t{8} << 20;  // bytes between progress reports
  size_t next_report = 0;
  while (pos_ < size) {
    if (pos_ >= next_report) {
      report_progress("reading the snapshot (bytes)", pos_, size);
      next_report = pos_ + kProgressBytes;
    }
    const size_t op_pos = pos_;
    const uint8_t op = doc_.data_[pos_++];
    switch (op) {
      case kProto: {
        const uint8_t protocol = *take(1, op_pos, "PROTO");
        if (protocol > 5) fail(op_pos, "unsupported pickle protocol " + std::to_string(protocol));
        break;
      }
      case kFrame:  // a framing hint for buffered readers; the data is already in memory
        take(8, op_pos, "FRAME");
        break;
      case kStop: {
        need(1, op_pos, "STOP");
        end_progress("reading the snapshot (bytes)");
        doc_.root_ = stack_.back();
        return std::move(doc_);
      }
      case kMark:
        marks_.push_back({stack_.size(), skipping_context() || top_is_skipped(stack_.size())});
        break;
      case kPop:
        if (stack_.size() > base()) {
          stack_.pop_back();
        } else if (!marks_.empty()) {
          marks_.pop_back();  // Python's POP also discards an empty mark
        } else {
          fail(op_pos, "stack underflow in POP");
        }
        break;
      case kPopMark:
        if (marks_.empty()) fail(op_pos, "no MARK before POP_MARK");
        stack_.resize(marks_.back().stack_size);
        marks_.pop_back();
        break;
      case kDup:
        need(1, op_pos, "DUP");
        stack_.push_back(stack_.back());
        break;
      case kNone: stack_.push_back(Value(Kind::None, op_pos, 0)); break;
      case kNewTrue: stack_.push_back(Value(Kind::Bool, op_pos, 1)); break;
      case kNewFalse: stack_.push_back(Value(Kind::Bool, op_pos, 0)); break;
      case kBinInt1:
        stack_.push_back(Value(Kind::Int, op_pos, *take(1, op_pos, "BININT1")));
        break;
      case kBinInt2:
        stack_.push_back(Value(Kind::Int, op_pos, read_le(take(2, op_pos, "BININT2"), 2)));
        break;
      case kBinInt: {
        const auto v = static_cast<int32_t>(read_le(take(4, op_pos, "BININT"), 4));
        stack_.push_back(Value(Kind::Int, op_pos, static_cast<uint64_t>(int64_t{v})));
        break;
      }
      case kLong1: push_long(*take(1, op_pos, "LONG1"), 2, op_pos); break;
      case kLong4: {
        const auto n = static_cast<int32_t>(read_le(take(4, op_pos, "LONG4"), 4));
        if (n < 0) fail(op_pos, "negative length in LONG4");
        push_long(static_cast<size_t>(n), 5, op_pos);
        break;
      }
      case kBinFloat: {
        const uint8_t* p = take(8, op_pos, "BINFLOAT");
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];  // big-endian
        stack_.push_back(Value(Kind::Float, op_pos, bits));
        break;
      }
      // Python 2 str (BINSTRING, SHORT_BINSTRING) reads as bytes, as with encoding='bytes'.
      case kShortBinUnicode: push_text(Kind::String, 1, op_pos, "SHORT_BINUNICODE"); break;
      case kBinUnicode: push_text(Kind::String, 4, op_pos, "BINUNICODE"); break;
      case kBinUnicode8: push_text(Kind::String, 8, op_pos, "BINUNICODE8"); break;
      case kShortBinBytes: push_text(Kind::Bytes, 1, op_pos, "SHORT_BINBYTES"); break;
      case kBinBytes: push_text(Kind::Bytes, 4, op_pos, "BINBYTES"); break;
      case kBinBytes8: push_text(Kind::Bytes, 8, op_pos, "BINBYTES8"); break;
      case kByteArray8: push_text(Kind::Bytes, 8, op_pos, "BYTEARRAY8"); break;
      case kShortBinString: push_text(Kind::Bytes, 1, op_pos, "SHORT_BINSTRING"); break;
      case kBinString: push_text(Kind::Bytes, 4, op_pos, "BINSTRING"); break;
      case kEmptyDict: stack_.push_back(new_container(Kind::Dict, op_pos, stack_.size())); break;
      case kEmptyList: stack_.push_back(new_container(Kind::List, op_pos, stack_.size())); break;
      case kEmptySet: stack_.push_back(new_container(Kind::Set, op_pos, stack_.size())); break;
      case kEmptyTuple: stack_.push_back(new_container(Kind::Tuple, op_pos, stack_.size())); break;
      case kTuple1: case kTuple2: case kTuple3: {
        const size_t n = static_cast<size_t>(op - kTuple1 + 1);
        static const char* const kNames[] = {"TUPLE1", "TUPLE2", "TUPLE3"};
        need(n, op_pos, kNames[n - 1]);
        const size_t begin = stack_.size() - n;
        Value made = new_container(Kind::Tuple, op_pos, begin);
        if (made.kind() != Kind::Skipped) append(made.payload_, stack_.data() + begin, n);
        stack_.resize(begin);
        stack_.push_back(made);
        break;
      }
      case kTuple: stack_.push_back(container_from_mark(Kind::Tuple, op_pos, "TUPLE")); break;
      case kList: stack_.push_back(container_from_mark(Kind::List, op_pos, "LIST")); break;
      case kDict: stack_.push_back(container_from_mark(Kind::Dict, op_pos, "DICT")); break;
      case kFrozenSet:
        stack_.push_back(container_from_mark(Kind::Set, op_pos, "FROZENSET"));
        break;
      case kAppend:
        need(2, op_pos, "APPEND");
        add_to(stack_[stack_.size() - 2], Kind::List, &stack_.back(), 1, op_pos, "APPEND");
        stack_.pop_back();
        break;
      case kSetItem:
        need(3, op_pos, "SETITEM");
        add_to(stack_[stack_.size() - 3], Kind::Dict, &stack_[stack_.size() - 2], 2, op_pos,
               "SETITEM");
        stack_.resize(stack_.size() - 2);
        break;
      case kAppends: extend_from_mark(Kind::List, op_pos, "APPENDS"); break;
      case kSetItems: extend_from_mark(Kind::Dict, op_pos, "SETITEMS"); break;
      case kAddItems: extend_from_mark(Kind::Set, op_pos, "ADDITEMS"); break;
      case kMemoize: memo_put(memo_.count(), op_pos); break;
      case kBinPut: memo_put(*take(1, op_pos, "BINPUT"), op_pos); break;
      case kLongBinPut: memo_put(read_le(take(4, op_pos, "LONG_BINPUT"), 4), op_pos); break;
      case kBinGet: memo_get(*take(1, op_pos, "BINGET"), op_pos); break;
      case kLongBinGet: memo_get(read_le(take(4, op_pos, "LONG_BINGET"), 4), op_pos); break;
      default:
        fail(op_pos, describe_unsupported_opcode(op));
    }
  }
  fail(size, "truncated pickle: the data ends before the STOP opcode");
}

Document parse_pickle(const std::string& name, const uint8_t* data, size_t size,
                      const ParseOptions& options) {
  return Parser(name, data, size, options).run();
}

}  // namespace oomcast::sim::pickle
