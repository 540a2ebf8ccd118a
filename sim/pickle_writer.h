// PickleWriter: writes plain data (dict, list, tuple, str, int, float, bool, None) as a
// Python pickle, protocol 2, in one forward pass: containers are opened, filled and closed
// like a JSON writer's. What pickle_reader.h reads back and Python's pickle.load() accepts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oomcast::sim::pickle {

class PickleWriter {
 public:
  PickleWriter();

  void begin_dict();
  void begin_list();
  void begin_tuple();
  void end();  // closes the innermost open container

  void key(std::string_view name) { string(name); }  // a dict key: then its value
  void string(std::string_view text);
  void integer(int64_t value);
  void unsigned_integer(uint64_t value);
  void boolean(bool value);
  void none();
  void real(double value);

  // The finished pickle. Requires: every container closed.
  std::string finish();

 private:
  enum class Open : uint8_t { Dict, List, Tuple };
  void item_written();
  std::string out_;
  std::vector<Open> open_;
  std::vector<uint32_t> counts_;  // items written since the last batch opcode, per open container
};

}  // namespace oomcast::sim::pickle
