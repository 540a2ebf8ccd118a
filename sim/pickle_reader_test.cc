// Tests of the native pickle reader on pickles written by CPython 3.11's pickle module (bytes
// pasted below with the Python expression that made them) and on corrupt data.
#include "sim/pickle_reader.h"

#include <catch2/catch.hpp>

#include "base/input_error.h"

namespace {

using oomcast::InputError;
using oomcast::sim::pickle::Document;
using oomcast::sim::pickle::Kind;
using oomcast::sim::pickle::ParseOptions;
using oomcast::sim::pickle::Value;

// Keeps embedded NUL bytes, which a const char* constructor would cut at.
template <size_t N>
std::string bytes_of(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

Document parse(const std::string& bytes, const ParseOptions& options = {}) {
  return oomcast::sim::pickle::parse_pickle("test.pickle", reinterpret_cast<const uint8_t*>(bytes.data()),
                                            bytes.size(), options);
}

std::string error_of(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const InputError& error) {
    return error.message();
  }
  return "no error";
}

std::vector<int64_t> ints_of(const Document& doc, const Value& list) {
  std::vector<int64_t> out;
  for (const Value& v : doc.items(list)) out.push_back(v.is_int() ? v.int_value() : -999);
  return out;
}

}  // namespace

TEST_CASE("a protocol 4 dict of str to int decodes to a dict", "[sim][pickle]") {
  // pickle.dumps({'a': 1, 'b': -2}, protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01" "a\x94K\x01\x8c\x01" "b\x94J\xfe\xff\xff\xffu.");
  const Document doc = parse(bytes);
  REQUIRE(doc.root().kind() == Kind::Dict);
  REQUIRE(doc.items(doc.root()).size() == 4);
  CHECK(doc.text(doc.items(doc.root())[0]) == "a");
  CHECK(doc.find(doc.root(), "a")->int_value() == 1);
  CHECK(doc.find(doc.root(), "b")->int_value() == -2);
  CHECK(doc.find(doc.root(), "c") == nullptr);
}

TEST_CASE("ints of every width and sign decode exactly", "[sim][pickle]") {
  // pickle.dumps([0, 255, 65535, -1, 2**31-1, -2**31, 2**40, -2**40, 2**63-1, -2**63], protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x3f\x00\x00\x00\x00\x00\x00\x00]\x94(K\x00K\xffM\xff\xffJ\xff\xff\xff\xffJ\xff\xff"
      "\xff\x7fJ\x00\x00\x00\x80\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x06\x00\x00\x00\x00\x00\xff\x8a"
      "\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80" "e.");
  const Document doc = parse(bytes);
  CHECK(ints_of(doc, doc.root()) ==
        std::vector<int64_t>{0, 255, 65535, -1, 2147483647, -2147483648LL, 1LL << 40, -(1LL << 40),
                             INT64_MAX, INT64_MIN});
}

TEST_CASE("ints outside int64 are big ints, and those below 2^64 still read as uint64", "[sim][pickle]") {
  // pickle.dumps([2**63, 2**64-1, 2**64, -2**63-1], protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95" "1\x00\x00\x00\x00\x00\x00\x00]\x94(\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00\x8a"
      "\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01\x8a\x09\xff"
      "\xff\xff\xff\xff\xff\xff\x7f\xff" "e.");
  const Document doc = parse(bytes);
  const auto items = doc.items(doc.root());
  REQUIRE(items.size() == 4);
  for (const Value& v : items) CHECK(v.kind() == Kind::BigInt);
  uint64_t value = 0;
  CHECK(doc.as_uint64(items[0], &value));
  CHECK(value == (uint64_t{1} << 63));
  CHECK(doc.as_uint64(items[1], &value));
  CHECK(value == UINT64_MAX);
  CHECK_FALSE(doc.as_uint64(items[2], &value));
  CHECK_FALSE(doc.as_uint64(items[3], &value));
}

TEST_CASE("a LONG4 int of 263 bytes is a big int", "[sim][pickle]") {
  // pickle.dumps(-2**2100, protocol=4) without its FRAME: LONG4, length 263, 262 zero bytes, 0xf0.
  std::string bytes = bytes_of("\x80\x04\x8b\x07\x01\x00\x00");
  bytes += std::string(262, '\0') + "\xf0.";
  const Document doc = parse(bytes);
  CHECK(doc.root().kind() == Kind::BigInt);
  CHECK(doc.root().offset() == 2);
}

TEST_CASE("floats, bools, None, bytes, bytearray and non-ASCII str decode", "[sim][pickle]") {
  // pickle.dumps([1.5, True, False, None, b'xy', 'h\u00e9', bytearray(b'z')], protocol=5)
  const std::string bytes = bytes_of(
      "\x80\x05\x95'\x00\x00\x00\x00\x00\x00\x00]\x94(G\x3f\xf8\x00\x00\x00\x00\x00\x00\x88\x89NC\x02xy"
      "\x94\x8c\x03h\xc3\xa9\x94\x96\x01\x00\x00\x00\x00\x00\x00\x00z\x94" "e.");
  const Document doc = parse(bytes);
  const auto items = doc.items(doc.root());
  REQUIRE(items.size() == 7);
  CHECK(items[0].float_value() == 1.5);
  CHECK(items[1].kind() == Kind::Bool);
  CHECK(items[1].bool_value());
  CHECK_FALSE(items[2].bool_value());
  CHECK(items[3].kind() == Kind::None);
  CHECK(items[4].kind() == Kind::Bytes);
  CHECK(doc.text(items[4]) == "xy");
  CHECK(doc.text(items[5]) == "h\xc3\xa9");
  CHECK(doc.text(items[6]) == "z");
}

TEST_CASE("tuples of every length decode, from TUPLE1-3 and from MARK TUPLE", "[sim][pickle]") {
  // pickle.dumps(((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)), protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x22\x00\x00\x00\x00\x00\x00\x00()K\x01\x85\x94K\x01K\x02\x86\x94K\x01K\x02K\x03\x87"
      "\x94(K\x01K\x02K\x03K\x04t\x94t\x94.");
  const Document doc = parse(bytes);
  const auto tuples = doc.items(doc.root());
  REQUIRE(tuples.size() == 5);
  for (size_t n = 0; n < 5; ++n) {
    CHECK(tuples[n].kind() == Kind::Tuple);
    CHECK(doc.items(tuples[n]).size() == n);
  }
  CHECK(ints_of(doc, tuples[4]) == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("sets and frozensets decode as sets", "[sim][pickle]") {
  // pickle.dumps([{1, 2}, frozenset([3])], protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00]\x94(\x8f\x94(K\x01K\x02\x90(K\x03\x91\x94" "e.");
  const Document doc = parse(bytes);
  const auto sets = doc.items(doc.root());
  REQUIRE(sets.size() == 2);
  CHECK(sets[0].kind() == Kind::Set);
  CHECK(ints_of(doc, sets[0]) == std::vector<int64_t>{1, 2});
  CHECK(ints_of(doc, sets[1]) == std::vector<int64_t>{3});
}

TEST_CASE("a shared object comes back through MEMOIZE and BINGET", "[sim][pickle]") {
  // x = [1]; pickle.dumps([x, x], protocol=4)
  const std::string bytes =
      bytes_of("\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94K\x01" "ah\x01" "e.");
  const Document doc = parse(bytes);
  const auto items = doc.items(doc.root());
  REQUIRE(items.size() == 2);
  CHECK(ints_of(doc, items[0]) == std::vector<int64_t>{1});
  CHECK(ints_of(doc, items[1]) == std::vector<int64_t>{1});
}

TEST_CASE("a protocol 2 pickle with BINPUT and BINGET decodes", "[sim][pickle]") {
  // x = [1]; pickle.dumps([x, x], protocol=2)
  const std::string bytes = bytes_of("\x80\x02]q\x00(]q\x01K\x01" "ah\x01" "e.");
  const Document doc = parse(bytes);
  const auto items = doc.items(doc.root());
  REQUIRE(items.size() == 2);
  CHECK(ints_of(doc, items[1]) == std::vector<int64_t>{1});
}

TEST_CASE("strings of BINUNICODE and BINUNICODE8 decode", "[sim][pickle]") {
  // pickle.dumps('x' * 300, protocol=4) without its FRAME: BINUNICODE, length 300.
  std::string bytes = bytes_of("\x80\x04X,\x01\x00\x00") + std::string(300, 'x') + ".";
  CHECK(parse(bytes).text(parse(bytes).root()) == std::string(300, 'x'));
  // BINUNICODE8 is only written for strings over 4 GiB; this one is made by hand.
  const std::string bytes8 = bytes_of("\x80\x04\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi.");
  const Document doc = parse(bytes8);
  CHECK(doc.text(doc.root()) == "hi");
}

TEST_CASE("a list of 2500 lists, filled in batches of 1000, keeps every item", "[sim][pickle]") {
  // Shaped like pickle.dumps([[i] for i in range(2500)], protocol=4), which appends at most
  // 1000 items per APPENDS, building the inner lists between batches (memo ops left out).
  std::string bytes = bytes_of("\x80\x04]");
  for (int i = 0; i < 2500; ++i) {
    if (i % 1000 == 0) bytes += "(";
    bytes += "]J";
    for (int b = 0; b < 4; ++b) bytes += static_cast<char>((i >> (8 * b)) & 0xff);
    bytes += "a";
    if (i % 1000 == 999 || i == 2499) bytes += "e";
  }
  bytes += ".";
  const Document doc = parse(bytes);
  const auto lists = doc.items(doc.root());
  REQUIRE(lists.size() == 2500);
  for (int i = 0; i < 2500; ++i) {
    REQUIRE(ints_of(doc, lists[static_cast<size_t>(i)]) == std::vector<int64_t>{i});
  }
}

TEST_CASE("memo entries past the first memo chunks come back intact", "[sim][pickle]") {
  // Like pickle.dumps([str(i) for i in range(5000)] * 2, protocol=4) (FRAME left out): every
  // string memoized as it is written, then fetched back with LONG_BINGET.
  std::string bytes = bytes_of("\x80\x04]\x94(");
  const int count = 5000;
  for (int i = 0; i < count; ++i) {
    const std::string text = std::to_string(i);
    bytes += "\x8c" + std::string(1, static_cast<char>(text.size())) + text + "\x94";
  }
  for (int i = 0; i < count; ++i) {
    bytes += "j";
    for (int b = 0; b < 4; ++b) bytes += static_cast<char>(((i + 1) >> (8 * b)) & 0xff);
  }
  bytes += "e.";
  const Document doc = parse(bytes);
  const auto items = doc.items(doc.root());
  REQUIRE(items.size() == 2 * count);
  for (int i = 0; i < count; ++i) {
    REQUIRE(doc.text(items[static_cast<size_t>(i)]) == std::to_string(i));
    REQUIRE(doc.text(items[static_cast<size_t>(count + i)]) == std::to_string(i));
  }
}

TEST_CASE("the value of the skipped key and everything inside it become Skipped", "[sim][pickle]") {
  // pickle.dumps({'frames': [{'name': 'f', 'line': 1}], 'size': 3, 'after': [7]}, protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x3f\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x06" "frames\x94]\x94}\x94(\x8c\x04name\x94"
      "\x8c\x01" "f\x94\x8c\x04line\x94K\x01ua\x8c\x04size\x94K\x03\x8c\x05" "after\x94]\x94K\x07" "au.");
  ParseOptions options;
  options.skip_value_of_key = "frames";
  const Document doc = parse(bytes, options);
  CHECK(doc.find(doc.root(), "frames")->kind() == Kind::Skipped);
  CHECK(doc.items(*doc.find(doc.root(), "frames")).empty());
  CHECK(doc.find(doc.root(), "size")->int_value() == 3);
  CHECK(ints_of(doc, *doc.find(doc.root(), "after")) == std::vector<int64_t>{7});
  // Without the option the frames are kept.
  const Document full = parse(bytes);
  CHECK(full.items(*full.find(full.root(), "frames")).size() == 1);
}

TEST_CASE("skipped values shared through the memo stay skipped without breaking the rest", "[sim][pickle]") {
  // f = {'name': 'g'}
  // pickle.dumps([{'frames': [f, f], 'size': 1}, {'frames': [f], 'size': 2}], protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95>\x00\x00\x00\x00\x00\x00\x00]\x94(}\x94(\x8c\x06" "frames\x94]\x94(}\x94\x8c\x04name"
      "\x94\x8c\x01g\x94sh\x04" "e\x8c\x04size\x94K\x01u}\x94(h\x02]\x94h\x04" "ah\x07K\x02ue.");
  ParseOptions options;
  options.skip_value_of_key = "frames";
  const Document doc = parse(bytes, options);
  const auto entries = doc.items(doc.root());
  REQUIRE(entries.size() == 2);
  CHECK(doc.find(entries[0], "frames")->kind() == Kind::Skipped);
  CHECK(doc.find(entries[1], "frames")->kind() == Kind::Skipped);
  CHECK(doc.find(entries[0], "size")->int_value() == 1);
  CHECK(doc.find(entries[1], "size")->int_value() == 2);
}

TEST_CASE("a pickle of a Python object is refused naming the opcode and its byte", "[sim][pickle]") {
  // pickle.dumps(collections.OrderedDict(), protocol=4)
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x22\x00\x00\x00\x00\x00\x00\x00\x8c\x0b" "collections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94.");
  CHECK(error_of(bytes) ==
        "unsupported pickle opcode 0x93 (STACK_GLOBAL): the pickle holds Python objects, not plain "
        "data at byte 39");
}

TEST_CASE("a protocol 0 text opcode is refused", "[sim][pickle]") {
  // pickle.dumps(1, protocol=0)
  CHECK(error_of("I1\n.") ==
        "unsupported pickle opcode 0x49 (INT): protocol 0/1 text opcodes are not read at byte 0");
}

TEST_CASE("a pickle cut short reports where the data ends", "[sim][pickle]") {
  // pickle.dumps({'a': 1, 'b': -2}, protocol=4), cut inside the BININT of -2.
  const std::string bytes = bytes_of(
      "\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01" "a\x94K\x01\x8c\x01" "b\x94J\xfe\xff");
  CHECK(error_of(bytes) == "truncated pickle: the data (27 bytes) ends inside the BININT opcode at byte 24");
  CHECK(error_of(bytes_of("\x80\x04K\x01")) ==
        "truncated pickle: the data ends before the STOP opcode at byte 4");
  CHECK(error_of("") == "truncated pickle: the data ends before the STOP opcode at byte 0");
}

TEST_CASE("a string length beyond the data is an error, not an allocation", "[sim][pickle]") {
  CHECK(error_of(bytes_of("\x80\x04X\xff\xff\xff\xff" "abc.")) ==
        "truncated pickle: the data (11 bytes) ends inside the BINUNICODE opcode at byte 2");
  CHECK(error_of(bytes_of("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.")) ==
        "truncated pickle: the data (12 bytes) ends inside the BINUNICODE8 opcode at byte 2");
  CHECK(error_of(bytes_of("\x80\x04\x8b\xff\xff\xff\xff.")) == "negative length in LONG4 at byte 2");
}

TEST_CASE("memo indices that were never stored or are absurdly large are errors", "[sim][pickle]") {
  CHECK(error_of(bytes_of("\x80\x04h\x05.")) == "memo index 5 was never stored at byte 2");
  CHECK(error_of(bytes_of("\x80\x04Nr\xff\xff\xff\xff.")) == "memo index 4294967295 out of range at byte 3");
  CHECK(error_of(bytes_of("\x80\x04\x94.")) == "stack underflow in memo put at byte 2");
}

TEST_CASE("opcodes that find the wrong things on the stack are errors", "[sim][pickle]") {
  CHECK(error_of(bytes_of("\x80\x04" "a.")) == "stack underflow in APPEND at byte 2");
  CHECK(error_of(bytes_of("\x80\x04](K\x01K\x02u.")) == "SETITEMS needs a dict on the stack, found list at byte 8");
  CHECK(error_of(bytes_of("\x80\x04K\x01K\x02" "a.")) == "APPEND needs a list on the stack, found int at byte 6");
  CHECK(error_of(bytes_of("\x80\x04K\x01" "e.")) == "no MARK before APPENDS at byte 4");
  CHECK(error_of(bytes_of("\x80\x04(K\x01" "d.")) == "odd number of items for DICT at byte 5");
  CHECK(error_of(bytes_of("\x80\x04(.")) == "stack underflow in STOP at byte 3");
}

TEST_CASE("a pickle protocol above 5 is refused", "[sim][pickle]") {
  CHECK(error_of(bytes_of("\x80\x06N.")) == "unsupported pickle protocol 6 at byte 0");
}

TEST_CASE("errors name the file and carry no line", "[sim][pickle]") {
  try {
    parse(bytes_of("\x80\x04h\x05."));
    FAIL("expected an InputError");
  } catch (const InputError& error) {
    CHECK(error.where().file == "test.pickle");
    CHECK(error.where().line == 0);
    CHECK(std::string(error.what()) == "test.pickle: error: memo index 5 was never stored at byte 2");
  }
}
