// Flattening MemoryStats to torch.cuda.memory_stats() keys.
#include "sim/memory_stats.h"

namespace oomcast::sim {
namespace {

void add_stat(std::map<std::string, int64_t>& out, const std::string& prefix, const Stat& stat) {
  out[prefix + ".current"] = stat.current;
  out[prefix + ".peak"] = stat.peak;
  out[prefix + ".allocated"] = stat.allocated;
  out[prefix + ".freed"] = stat.freed;
}

void add_array(std::map<std::string, int64_t>& out, const std::string& name, const StatArray& array) {
  add_stat(out, name + ".all", array.all());
  add_stat(out, name + ".small_pool", array.pool(true));
  add_stat(out, name + ".large_pool", array.pool(false));
}

}  // namespace

std::map<std::string, int64_t> MemoryStats::as_flat_map() const {
  std::map<std::string, int64_t> out;
  add_array(out, "allocation", allocation);
  add_array(out, "segment", segment);
  add_array(out, "active", active);
  add_array(out, "inactive_split", inactive_split);
  add_array(out, "allocated_bytes", allocated_bytes);
  add_array(out, "reserved_bytes", reserved_bytes);
  add_array(out, "active_bytes", active_bytes);
  add_array(out, "inactive_split_bytes", inactive_split_bytes);
  add_array(out, "requested_bytes", requested_bytes);
  add_stat(out, "oversize_allocations", oversize_allocations);
  add_stat(out, "oversize_segments", oversize_segments);
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_ooms"] = num_ooms;
  out["num_sync_all_streams"] = num_sync_all_streams;
  out["num_device_alloc"] = num_device_alloc;
  out["num_device_free"] = num_device_free;
  out["max_split_size"] = max_split_size;
  return out;
}

}  // namespace oomcast::sim
