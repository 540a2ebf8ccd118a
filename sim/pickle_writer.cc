// Opcodes as Python's pickle module defines them for protocol 2. Dicts and lists are written
// as EMPTY_DICT / EMPTY_LIST followed by batches of MARK ... SETITEMS / APPENDS of at most
// 1000 items, as CPython's pickler batches them; tuples as MARK ... TUPLE.
#include "sim/pickle_writer.h"

#include <cstring>
#include <stdexcept>

namespace oomcast::sim::pickle {
namespace {

constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kEmptyList = ']';
constexpr char kSetItems = 'u';
constexpr char kAppends = 'e';
constexpr char kTuple = 't';
constexpr char kEmptyTuple = ')';
constexpr char kBinInt = 'J';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kLong1 = '\x8a';
constexpr char kBinUnicode = 'X';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kNone = 'N';
constexpr char kBinFloat = 'G';
constexpr uint32_t kBatch = 1000;  // items per SETITEMS / APPENDS, as CPython writes them

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

PickleWriter::PickleWriter() {
  out_ += kProto;
  out_ += '\x02';
}

void PickleWriter::begin_dict() {
  out_ += kEmptyDict;
  out_ += kMark;
  open_.push_back(Open::Dict);
  counts_.push_back(0);
}

void PickleWriter::begin_list() {
  out_ += kEmptyList;
  out_ += kMark;
  open_.push_back(Open::List);
  counts_.push_back(0);
}

void PickleWriter::begin_tuple() {
  out_ += kMark;
  open_.push_back(Open::Tuple);
  counts_.push_back(0);
}

void PickleWriter::end() {
  if (open_.empty()) throw std::logic_error("PickleWriter::end() with no open container");
  Open kind = open_.back();
  uint32_t count = counts_.back();
  open_.pop_back();
  counts_.pop_back();
  switch (kind) {
    case Open::Dict:
      if (count % 2 != 0) throw std::logic_error("PickleWriter: a dict key without a value");
      out_ += kSetItems;
      break;
    case Open::List:
      out_ += kAppends;
      break;
    case Open::Tuple:
      if (count == 0) {
        out_.pop_back();  // the MARK
        out_ += kEmptyTuple;
      } else {
        out_ += kTuple;
      }
      break;
  }
  item_written();
}

// Counts one item in the open container and closes a full batch (tuples are not batched).
void PickleWriter::item_written() {
  if (open_.empty()) return;
  uint32_t& count = counts_.back();
  count += 1;
  Open kind = open_.back();
  uint32_t batch = kind == Open::Dict ? 2 * kBatch : kBatch;
  if (kind != Open::Tuple && count == batch) {
    out_ += kind == Open::Dict ? kSetItems : kAppends;
    out_ += kMark;
    count = 0;
  }
}

void PickleWriter::string(std::string_view text) {
  out_ += kBinUnicode;
  put_le(out_, text.size(), 4);
  out_.append(text.data(), text.size());
  item_written();
}

void PickleWriter::integer(int64_t value) {
  if (value >= 0 && value < 256) {
    out_ += kBinInt1;
    put_le(out_, static_cast<uint64_t>(value), 1);
  } else if (value >= 0 && value < 65536) {
    out_ += kBinInt2;
    put_le(out_, static_cast<uint64_t>(value), 2);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    out_ += kBinInt;
    put_le(out_, static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(value))), 4);
  } else {
    // LONG1: little-endian two's complement, as few bytes as keep the sign.
    std::string bytes;
    int64_t rest = value;
    do {
      bytes += static_cast<char>(rest & 0xff);
      rest >>= 8;
    } while (!((rest == 0 && (bytes.back() & 0x80) == 0) || (rest == -1 && (bytes.back() & 0x80) != 0)));
    out_ += kLong1;
    out_ += static_cast<char>(bytes.size());
    out_ += bytes;
  }
  item_written();
}

void PickleWriter::unsigned_integer(uint64_t value) {
  if (value <= static_cast<uint64_t>(INT64_MAX)) {
    integer(static_cast<int64_t>(value));
    return;
  }
  out_ += kLong1;
  out_ += '\x09';  // 8 bytes of value and a zero byte to keep it positive
  put_le(out_, value, 8);
  out_ += '\0';
  item_written();
}

void PickleWriter::boolean(bool value) {
  out_ += value ? kNewTrue : kNewFalse;
  item_written();
}

void PickleWriter::none() {
  out_ += kNone;
  item_written();
}

void PickleWriter::real(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  out_ += kBinFloat;
  for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  item_written();
}

std::string PickleWriter::finish() {
  if (!open_.empty()) throw std::logic_error("PickleWriter::finish() with an open container");
  out_ += kStop;
  return std::move(out_);
}

}  // namespace oomcast::sim::pickle
