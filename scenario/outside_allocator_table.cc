// Reads scenario/outside_allocator.yaml into OutsideAllocatorTable and answers its lookups.
#include "scenario/outside_allocator_table.h"

#include <charconv>
#include <limits>
#include <tuple>

#include "base/input_error.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

std::string_view outside_allocator_yaml_text();  // generated from the YAML by CMake

namespace {

constexpr ReleaseNumber kNoUpperBound = 99 * 100 + 99;

}  // namespace

ReleaseRange read_release_range(const YamlNode& node) {
  std::string text = node.as_string();
  ReleaseRange range;
  auto bad = [&]() -> ReleaseRange {
    node.fail("'" + node.path() + "' must be a release range such as \"11.7-12.9\", \"12.0+\" or \"2.7\", got '" +
              text + "'");
  };
  if (!text.empty() && text.back() == '+') {
    auto low = parse_release(std::string_view(text).substr(0, text.size() - 1));
    if (!low) return bad();
    return ReleaseRange{*low, kNoUpperBound};
  }
  size_t dash = text.find('-');
  if (dash == std::string::npos) {
    auto only = parse_release(text);
    if (!only) return bad();
    return ReleaseRange{*only, *only};
  }
  auto low = parse_release(std::string_view(text).substr(0, dash));
  auto high = parse_release(std::string_view(text).substr(dash + 1));
  if (!low || !high || *high < *low) return bad();
  range.min = *low;
  range.max = *high;
  return range;
}

namespace {

ReleaseNumber read_release(const YamlNode& node) {
  auto release = parse_release(node.as_string());
  if (!release) node.fail("'" + node.path() + "' must be a release such as \"12.4\", got '" + node.as_string() + "'");
  return *release;
}

// `any` -> {}; [sm_80, sm_90] -> {80, 90}.
std::vector<int> read_architectures(const YamlNode& node) {
  if (node.is_scalar() && node.as_string() == "any") return {};
  std::vector<int> capabilities;
  for (const YamlNode& item : node.items()) {
    std::string text = item.as_string();
    int value = 0;
    auto [end, error] = std::from_chars(text.data() + std::min<size_t>(3, text.size()), text.data() + text.size(), value);
    if (text.rfind("sm_", 0) != 0 || error != std::errc() || end != text.data() + text.size() || value < 30 ||
        value > 200) {
      item.fail("'" + item.path() + "' must be `any` or a list of architectures such as [sm_80, sm_90], got '" + text +
                "'");
    }
    capabilities.push_back(value);
  }
  if (capabilities.empty()) node.fail("'" + node.path() + "' must be `any` or a non-empty list of architectures");
  return capabilities;
}

ModuleLoading read_loading(const YamlNode& node) {
  return node.as_choice({"lazy", "eager"}) == "lazy" ? ModuleLoading::Lazy : ModuleLoading::Eager;
}

TableRowOrigin read_origin(const YamlNode& row, const std::string& section, int index, bool needs_kind) {
  TableRowOrigin origin;
  origin.section = section;
  origin.row = index;
  origin.source = row.child("source").as_string();
  if (origin.source.empty()) row.child("source").fail("every row of the table must cite its source");
  if (needs_kind || !row.child("kind").is_missing()) {
    origin.kind = row.child("kind").as_choice({"measurement", "derived", "doc", "ours"});
  }
  return origin;
}

bool architecture_matches(const std::vector<int>& capabilities, int capability) {
  if (capabilities.empty()) return true;
  for (int listed : capabilities) {
    if (listed == capability) return true;
  }
  return false;
}

// Picks the most specific of the rows `matches` accepts: a named architecture first, then the
// narrowest range, then the later row.
template <typename Row, typename Matches, typename Specificity>
const Row* most_specific(const std::vector<Row>& rows, Matches matches, Specificity specificity) {
  const Row* best = nullptr;
  for (const Row& row : rows) {
    if (!matches(row)) continue;
    if (!best || !(specificity(row) < specificity(*best))) best = &row;
  }
  return best;
}

}  // namespace

const char* module_loading_name(ModuleLoading loading) { return loading == ModuleLoading::Lazy ? "lazy" : "eager"; }

std::optional<ReleaseNumber> parse_release(std::string_view text) {
  size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= text.size()) return std::nullopt;
  int major = 0, minor = 0;
  auto [major_end, major_error] = std::from_chars(text.data(), text.data() + dot, major);
  auto [minor_end, minor_error] = std::from_chars(text.data() + dot + 1, text.data() + text.size(), minor);
  if (major_error != std::errc() || minor_error != std::errc() || major_end != text.data() + dot ||
      minor_end != text.data() + text.size() || major < 1 || major > 99 || minor < 0 || minor > 99) {
    return std::nullopt;
  }
  return major * 100 + minor;
}

std::string release_text(ReleaseNumber release) {
  return std::to_string(release / 100) + "." + std::to_string(release % 100);
}

std::optional<uint64_t> cublas_workspace_config_bytes(std::string_view config) {
  // ":SIZE:COUNT[:SIZE:COUNT]..." with SIZE in KiB.
  if (config.empty() || config.front() != ':') return std::nullopt;
  std::vector<uint64_t> numbers;
  size_t position = 1;
  while (position <= config.size()) {
    size_t next = config.find(':', position);
    if (next == std::string_view::npos) next = config.size();
    uint64_t value = 0;
    auto [end, error] = std::from_chars(config.data() + position, config.data() + next, value);
    if (error != std::errc() || end != config.data() + next || next == position || value > (1ull << 30)) {
      return std::nullopt;
    }
    numbers.push_back(value);
    position = next + 1;
  }
  if (numbers.empty() || numbers.size() % 2 != 0) return std::nullopt;
  uint64_t total = 0;
  for (size_t i = 0; i < numbers.size(); i += 2) total += numbers[i] * 1024 * numbers[i + 1];
  return total;
}

std::optional<ReleaseNumber> OutsideAllocatorTable::default_cuda(ReleaseNumber torch) const {
  const TorchCudaRow* row = most_specific(
      torch_default_cuda, [&](const TorchCudaRow& r) { return r.torch.contains(torch); },
      [](const TorchCudaRow& r) { return -r.torch.width(); });
  if (!row) return std::nullopt;
  return row->cuda;
}

std::optional<ModuleLoading> OutsideAllocatorTable::default_loading(ReleaseNumber torch, ReleaseNumber cuda) const {
  // The rows are rules in order of precedence: the first that matches decides.
  for (const LoadingDefaultRow& row : module_loading_default) {
    if (row.torch.contains(torch) && row.cuda.contains(cuda)) return row.loading;
  }
  return std::nullopt;
}

const ContextRow* OutsideAllocatorTable::find_context(int capability, ReleaseNumber torch, ReleaseNumber cuda,
                                                      ModuleLoading loading) const {
  return most_specific(
      context,
      [&](const ContextRow& r) {
        return r.loading == loading && r.cuda.contains(cuda) && r.torch.contains(torch) &&
               architecture_matches(r.capabilities, capability);
      },
      [](const ContextRow& r) { return std::tuple(r.capabilities.empty() ? 0 : 1, -r.cuda.width(), -r.torch.width()); });
}

const CublasWorkspaceRow* OutsideAllocatorTable::find_cublas_workspace(int capability, ReleaseNumber torch) const {
  return most_specific(
      cublas_workspace,
      [&](const CublasWorkspaceRow& r) { return r.torch.contains(torch) && architecture_matches(r.capabilities, capability); },
      [](const CublasWorkspaceRow& r) { return std::pair(r.capabilities.empty() ? 0 : 1, -r.torch.width()); });
}

OutsideAllocatorTable parse_outside_allocator_table(const std::string& text, const std::string& name) {
  YamlDocument document = YamlDocument::parse(text, name);
  YamlNode root = document.root();
  root.require_map();
  root.reject_unknown_keys({"torch_default_cuda", "module_loading_default", "context", "cublas_workspace", "cudnn", "nccl"});
  OutsideAllocatorTable table;
  int index = 0;
  for (const YamlNode& row : root.child("torch_default_cuda").items()) {
    row.reject_unknown_keys({"torch", "cuda", "source"});
    table.torch_default_cuda.push_back(
        {read_release_range(row.child("torch")), read_release(row.child("cuda")), read_origin(row, "torch_default_cuda", ++index, false)});
  }
  index = 0;
  for (const YamlNode& row : root.child("module_loading_default").items()) {
    row.reject_unknown_keys({"torch", "cuda", "loading", "source"});
    table.module_loading_default.push_back({read_release_range(row.child("torch")), read_release_range(row.child("cuda")),
                                            read_loading(row.child("loading")),
                                            read_origin(row, "module_loading_default", ++index, false)});
  }
  index = 0;
  for (const YamlNode& row : root.child("context").items()) {
    row.reject_unknown_keys({"arch", "cuda", "torch", "loading", "mib", "kind", "source"});
    ContextRow context;
    context.capabilities = read_architectures(row.child("arch"));
    context.cuda = read_release_range(row.child("cuda"));
    if (!row.child("torch").is_missing()) context.torch = read_release_range(row.child("torch"));
    context.loading = read_loading(row.child("loading"));
    context.bytes = static_cast<uint64_t>(row.child("mib").as_number(1, 1 << 20) * 1024.0 * 1024.0 + 0.5);
    context.origin = read_origin(row, "context", ++index, true);
    table.context.push_back(std::move(context));
  }
  index = 0;
  for (const YamlNode& row : root.child("cublas_workspace").items()) {
    row.reject_unknown_keys({"torch", "arch", "config", "kind", "source"});
    CublasWorkspaceRow workspace;
    workspace.torch = read_release_range(row.child("torch"));
    workspace.capabilities = read_architectures(row.child("arch"));
    workspace.config = row.child("config").as_string();
    auto bytes = cublas_workspace_config_bytes(workspace.config);
    if (!bytes) row.child("config").fail("'config' must be CUBLAS_WORKSPACE_CONFIG text such as \":4096:8\"");
    workspace.bytes = *bytes;
    workspace.origin = read_origin(row, "cublas_workspace", ++index, true);
    table.cublas_workspace.push_back(std::move(workspace));
  }
  index = 0;
  for (const YamlNode& row : root.child("cudnn").items()) {
    row.reject_unknown_keys({"rule", "modelled", "source"});
    table.cudnn.push_back({row.child("rule").as_string(), row.bool_or("modelled", false),
                           read_origin(row, "cudnn", ++index, false)});
  }
  index = 0;
  bool seen[5] = {};
  const char* keys[5] = {"simple_buffer", "ll128_buffer", "ll_buffer", "channels", "ring_peers"};
  for (const YamlNode& row : root.child("nccl").items()) {
    row.reject_unknown_keys({"key", "bytes", "count", "kind", "source"});
    read_origin(row, "nccl", ++index, true);
    std::string key = row.child("key").as_choice({keys[0], keys[1], keys[2], keys[3], keys[4]});
    for (int k = 0; k < 5; ++k) {
      if (key != keys[k]) continue;
      if (seen[k]) row.child("key").fail("nccl key '" + key + "' given twice");
      seen[k] = true;
      if (k < 3) {
        uint64_t bytes = static_cast<uint64_t>(row.child("bytes").as_integer(0, 1ll << 34));
        (k == 0 ? table.nccl.simple_bytes : k == 1 ? table.nccl.ll128_bytes : table.nccl.ll_bytes) = bytes;
      } else {
        int64_t count = row.child("count").as_integer(1, 1024);
        (k == 3 ? table.nccl.channels : table.nccl.ring_peers) = count;
      }
    }
  }
  for (int k = 0; k < 5; ++k) {
    if (!seen[k]) root.child("nccl").fail(std::string("the nccl section needs the key '") + keys[k] + "'");
  }
  return table;
}

const OutsideAllocatorTable& outside_allocator_table() {
  static const OutsideAllocatorTable table =
      parse_outside_allocator_table(std::string(outside_allocator_yaml_text()), "scenario/outside_allocator.yaml");
  return table;
}

}  // namespace oomcast::scenario
