// Tests of the typed YAML reader: every error names file:line:col and the key, overrides
// merge into the tree and are named by their --set text.
#include "scenario/yaml_reader.h"

#include <catch2/catch.hpp>

#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const char* kOptimizerDoc = R"(batch_size: 8
optimizer:
  type: adamw
  momentum: 0.9
)";

TEST_CASE("an unknown key is reported at its line and column with a did-you-mean", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("model: gpt2\nbatch_szie: 8\n", "s.yaml");
  CHECK(error_of([&] { document.root().reject_unknown_keys({"model", "batch_size"}); }) ==
        "s.yaml:2:1: error: unknown key 'batch_szie' in scenario (did you mean 'batch_size'?)");
}

TEST_CASE("an unknown key in a section names the section", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse(kOptimizerDoc, "s.yaml");
  CHECK(error_of([&] { document.root().child("optimizer").reject_unknown_keys({"type", "impl"}); }) ==
        "s.yaml:4:3: error: unknown key 'momentum' in 'optimizer'");
}

TEST_CASE("a word where an integer belongs is a type error at the value", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("batch_size: eight\n", "s.yaml");
  CHECK(error_of([&] { document.root().child("batch_size").as_integer(1, 100); }) ==
        "s.yaml:1:13: error: 'batch_size' must be an integer, got 'eight'");
}

TEST_CASE("a map where a string belongs is a type error", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("precision:\n  mode: fp32\n", "s.yaml");
  CHECK(error_of([&] { document.root().child("precision").as_string(); }) ==
        "s.yaml:2:3: error: 'precision' must be a string, got a map");
}

TEST_CASE("an integer below its minimum is an impossible value", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("batch_size: 0\n", "s.yaml");
  CHECK(error_of([&] { document.root().child("batch_size").as_integer(1, 100); }) ==
        "s.yaml:1:13: error: 'batch_size' must be at least 1, got 0");
}

TEST_CASE("a choice outside its list names the list and the closest choice", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("precision: fp33\n", "s.yaml");
  CHECK(error_of([&] { document.root().child("precision").as_choice({"fp32", "amp_bf16"}); }) ==
        "s.yaml:1:12: error: 'precision' must be one of fp32, amp_bf16; got 'fp33' (did you mean 'fp32'?)");
}

TEST_CASE("a nested value's error names its dotted path", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse(kOptimizerDoc, "s.yaml");
  CHECK(error_of([&] { document.root().child("optimizer").child("momentum").as_number(0, 0.5); }) ==
        "s.yaml:4:13: error: 'optimizer.momentum' must be at most 0.5, got 0.9");
}

TEST_CASE("a missing required key is reported at the enclosing map", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("optimizer:\n  type: sgd\n", "s.yaml");
  CHECK(error_of([&] { document.root().child("optimizer").child("impl").as_string(); }) ==
        "s.yaml:2:3: error: missing required key 'optimizer.impl'");
}

TEST_CASE("a duplicate key is an error naming the first occurrence", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("batch_size: 1\nbatch_size: 2\n", "s.yaml");
  CHECK(error_of([&] { document.root().reject_unknown_keys({"batch_size"}); }) ==
        "s.yaml:2:1: error: duplicate key 'batch_size' in scenario (first given on line 1)");
}

TEST_CASE("malformed YAML is an InputError at the parser's 1-based position", "[planner][yaml]") {
  CHECK(error_of([] { YamlDocument::parse("model: [gpt2\n", "s.yaml"); }).rfind("s.yaml:", 0) == 0);
  CHECK(error_of([] { YamlDocument::parse("a: b\n c: d\n", "s.yaml"); }).find("error: invalid YAML:") !=
        std::string::npos);
}

TEST_CASE("an override replaces a value in the file", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse(kOptimizerDoc, "s.yaml", {"batch_size=32", "optimizer.type=sgd"});
  CHECK(document.root().child("batch_size").as_integer(1, 100) == 32);
  CHECK(document.root().child("optimizer").child("type").as_string() == "sgd");
  CHECK(document.root().child("optimizer").child("momentum").as_number(0, 1) == 0.9);
}

TEST_CASE("an override can add a key and a whole section", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse(kOptimizerDoc, "s.yaml", {"allocator.expandable_segments=true"});
  CHECK(document.root().child("allocator").child("expandable_segments").as_bool());
}

TEST_CASE("an override's error leads with its --set text", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse(kOptimizerDoc, "s.yaml", {"batch_size=0"});
  CHECK(error_of([&] { document.root().child("batch_size").as_integer(1, 100); }) ==
        "s.yaml: error: --set batch_size=0: 'batch_size' must be at least 1, got 0");
}

TEST_CASE("an override of an unknown key is an error with a did-you-mean", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse(kOptimizerDoc, "s.yaml", {"batch_szie=32"});
  CHECK(error_of([&] { document.root().reject_unknown_keys({"batch_size", "optimizer"}); }) ==
        "s.yaml: error: --set batch_szie=32: unknown key 'batch_szie' in scenario (did you mean 'batch_size'?)");
}

TEST_CASE("an override reaching into a scalar shorthand expands it into a map", "[planner][yaml]") {
  ShorthandKey shorthand = [](const std::string& path, const std::string&) {
    return path == "device" ? std::string("profile") : std::string();
  };
  YamlDocument document = YamlDocument::parse("device: a100-80gb\n", "s.yaml", {"device.context_mib=600"}, shorthand);
  YamlNode device = document.root().child("device");
  CHECK(device.child("profile").as_string() == "a100-80gb");
  CHECK(device.child("context_mib").as_number(0, 1e6) == 600);
}

TEST_CASE("an override reaching into a plain value is an error", "[planner][yaml]") {
  CHECK(error_of([] { YamlDocument::parse("batch_size: 8\n", "s.yaml", {"batch_size.x=1"}); }) ==
        "s.yaml: error: --set batch_size.x=1: 'batch_size' is a single value, not a section");
}

TEST_CASE("an override without '=' is an error", "[planner][yaml]") {
  CHECK(error_of([] { YamlDocument::parse("batch_size: 8\n", "s.yaml", {"batch_size"}); }) ==
        "s.yaml: error: --set batch_size: expected dotted.key=value");
}

TEST_CASE("an override value may be a flow list", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("a: 1\n", "s.yaml", {"held=[loss, logits]"});
  CHECK(document.root().child("held").as_string_list() == std::vector<std::string>{"loss", "logits"});
}

TEST_CASE("booleans accept YAML 1.1 spellings and reject others", "[planner][yaml]") {
  YamlDocument document = YamlDocument::parse("a: yes\nb: False\nc: maybe\n", "s.yaml");
  CHECK(document.root().child("a").as_bool());
  CHECK_FALSE(document.root().child("b").as_bool());
  CHECK(error_of([&] { document.root().child("c").as_bool(); }) ==
        "s.yaml:3:4: error: 'c' must be true or false, got 'maybe'");
}

TEST_CASE("a file that cannot be read is an InputError naming it", "[planner][yaml]") {
  CHECK(error_of([] { YamlDocument::load_file("/nonexistent/s.yaml"); }) ==
        "/nonexistent/s.yaml: error: cannot open file: No such file or directory");
}

}  // namespace
}  // namespace oomcast::scenario
