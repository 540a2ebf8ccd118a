// Tests of the pickle writer: what it writes, read back by the native reader (whose own
// tests pin it to CPython's output), and CPython's exact bytes for small values.
#include "sim/pickle_writer.h"

#include <catch2/catch.hpp>

#include "sim/pickle_reader.h"

namespace {

using oomcast::sim::pickle::Document;
using oomcast::sim::pickle::Kind;
using oomcast::sim::pickle::PickleWriter;
using oomcast::sim::pickle::Value;

Document parse(const std::string& bytes) {
  return oomcast::sim::pickle::parse_pickle("written.pickle", reinterpret_cast<const uint8_t*>(bytes.data()),
                                            bytes.size());
}

TEST_CASE("small ints and strings take the compact opcodes of protocol 2", "[sim][pickle]") {
  PickleWriter out;
  out.begin_tuple();
  out.integer(7);
  out.string("ab");
  out.end();
  // PROTO 2, MARK, BININT1 7, BINUNICODE "ab", TUPLE, STOP: pickle.loads gives (7, "ab").
  CHECK(out.finish() == std::string("\x80\x02(K\x07X\x02\x00\x00\x00" "abt.", 14));
}

TEST_CASE("every value kind reads back as written", "[sim][pickle]") {
  PickleWriter out;
  out.begin_dict();
  out.key("small");
  out.integer(200);
  out.key("two_bytes");
  out.integer(60000);
  out.key("negative");
  out.integer(-5);
  out.key("address");
  out.unsigned_integer(139'872'512'000'000ull);
  out.key("huge");
  out.unsigned_integer(18'446'744'073'709'551'615ull);
  out.key("flag");
  out.boolean(true);
  out.key("nothing");
  out.none();
  out.key("ratio");
  out.real(0.75);
  out.key("empty_tuple");
  out.begin_tuple();
  out.end();
  out.key("pair");
  out.begin_tuple();
  out.integer(0);
  out.integer(0);
  out.end();
  out.end();
  std::string bytes = out.finish();
  Document doc = parse(bytes);
  const Value& root = doc.root();
  REQUIRE(root.is_dict());
  CHECK(doc.find(root, "small")->int_value() == 200);
  CHECK(doc.find(root, "two_bytes")->int_value() == 60000);
  CHECK(doc.find(root, "negative")->int_value() == -5);
  CHECK(doc.find(root, "address")->int_value() == 139'872'512'000'000);
  uint64_t huge = 0;
  CHECK(doc.as_uint64(*doc.find(root, "huge"), &huge));
  CHECK(huge == 18'446'744'073'709'551'615ull);
  CHECK(doc.find(root, "flag")->bool_value());
  CHECK(doc.find(root, "nothing")->kind() == Kind::None);
  CHECK(doc.find(root, "ratio")->float_value() == 0.75);
  CHECK(doc.find(root, "empty_tuple")->kind() == Kind::Tuple);
  CHECK(doc.items(*doc.find(root, "empty_tuple")).empty());
  CHECK(doc.items(*doc.find(root, "pair")).size() == 2);
}

TEST_CASE("lists and dicts longer than one batch keep every item in order", "[sim][pickle]") {
  PickleWriter out;
  out.begin_dict();
  out.key("list");
  out.begin_list();
  for (int i = 0; i < 2'500; ++i) out.integer(i);
  out.end();
  out.key("dict");
  out.begin_dict();
  for (int i = 0; i < 1'500; ++i) {
    out.key("k" + std::to_string(i));
    out.integer(i);
  }
  out.end();
  out.end();
  std::string bytes = out.finish();
  Document doc = parse(bytes);
  auto list = doc.items(*doc.find(doc.root(), "list"));
  REQUIRE(list.size() == 2'500);
  CHECK(list[1'999].int_value() == 1'999);
  CHECK(list[2'499].int_value() == 2'499);
  const Value& dict = *doc.find(doc.root(), "dict");
  CHECK(doc.items(dict).size() == 3'000);
  CHECK(doc.find(dict, "k1499")->int_value() == 1'499);
}

TEST_CASE("closing more containers than were opened is a programming error", "[sim][pickle]") {
  PickleWriter out;
  CHECK_THROWS_AS(out.end(), std::logic_error);
  out.begin_list();
  CHECK_THROWS_AS(out.finish(), std::logic_error);
}

}  // namespace
