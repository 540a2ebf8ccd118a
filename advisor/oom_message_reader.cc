// Reads the OOM text with one pattern per format. Whitespace is collapsed first: logs wrap
// long lines, and the original's double spaces before "See documentation" carry nothing.
#include "advisor/oom_message_reader.h"

#include <cmath>
#include <regex>

namespace oomcast::advisor {
namespace {

// format_size's output: "512 bytes", "1.50 KiB", "20.00 MiB", "4.50 GiB".
const std::string kSize = R"(([0-9]+(?:\.[0-9]+)?) (bytes|KiB|MiB|GiB))";

uint64_t size_at(const std::smatch& match, size_t group) {
  return parse_format_size(match[group].str(), match[group + 1].str()).value_or(0);
}

std::string collapse_whitespace(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::optional<OomMessageFigures> read_legacy(const std::string& text, const std::string& backend) {
  static const std::regex pattern("out of memory\\. Tried to allocate " + kSize + " \\(GPU ([0-9]+); " + kSize +
                                  " total capacity; " + kSize + " already allocated; " + kSize + " free; (?:" + kSize +
                                  " allowed; )?" + kSize + " (reserved in total by PyTorch|cached)");
  std::smatch match;
  if (!std::regex_search(text, match, pattern)) return std::nullopt;
  OomMessageFigures figures;
  figures.backend = backend;
  figures.alloc_size = size_at(match, 1);
  figures.device_index = std::stoi(match[3].str());
  figures.device_total = size_at(match, 4);
  figures.allocated_by_pytorch = size_at(match, 6);
  figures.device_free = size_at(match, 8);
  if (match[10].matched) figures.allowed_bytes = size_at(match, 10);
  figures.reserved = size_at(match, 12);
  figures.format = match[14].str() == "cached" ? OomMessageFormat::Cached : OomMessageFormat::Legacy;
  // "cached" counted the free cached blocks only; reserved = allocated + cached.
  if (figures.format == OomMessageFormat::Cached) {
    figures.reserved_unallocated = figures.reserved;
    figures.reserved += figures.allocated_by_pytorch;
  } else {
    figures.reserved_unallocated =
        figures.reserved > figures.allocated_by_pytorch ? figures.reserved - figures.allocated_by_pytorch : 0;
  }
  return figures;
}

std::optional<OomMessageFigures> read_current(const std::string& text, const std::string& backend) {
  static const std::regex head("out of memory\\. Tried to allocate " + kSize + "\\. GPU ([0-9]+) has a total (capacity|capacty) of " +
                               kSize + " of which " + kSize + " is free\\.");
  std::smatch match;
  if (!std::regex_search(text, match, head)) return std::nullopt;
  OomMessageFigures figures;
  figures.backend = backend;
  figures.alloc_size = size_at(match, 1);
  figures.device_index = std::stoi(match[3].str());
  figures.format = match[4].str() == "capacty" ? OomMessageFormat::Torch21 : OomMessageFormat::Current;
  figures.device_total = size_at(match, 5);
  figures.device_free = size_at(match, 7);
  const std::string rest = match.suffix().str();

  static const std::regex process("(?:Process ([0-9]+)|Including non-PyTorch memory, this process) has " + kSize +
                                  " memory in use\\.");
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), process); it != std::sregex_iterator(); ++it) {
    ProcessUsage usage;
    usage.this_process = !(*it)[1].matched;
    if (!usage.this_process) usage.pid = std::stoll((*it)[1].str());
    usage.bytes = parse_format_size((*it)[2].str(), (*it)[3].str()).value_or(0);
    figures.processes.push_back(usage);
  }
  static const std::regex allowed(kSize + " allowed; ");
  std::smatch allowed_match;
  if (std::regex_search(rest, allowed_match, allowed)) figures.allowed_bytes = size_at(allowed_match, 1);
  static const std::regex allocated("Of the allocated memory " + kSize + " is allocated by PyTorch, (?:with " + kSize +
                                    " allocated in private pools \\(e\\.g\\., [A-Z]+ Graphs\\), )?and " + kSize +
                                    " is reserved by PyTorch but unallocated");
  std::smatch numbers;
  if (!std::regex_search(rest, numbers, allocated)) return std::nullopt;
  figures.allocated_by_pytorch = size_at(numbers, 1);
  if (numbers[3].matched) figures.in_private_pools = size_at(numbers, 3);
  figures.reserved_unallocated = size_at(numbers, 5);
  figures.reserved = figures.allocated_by_pytorch + figures.reserved_unallocated;
  return figures;
}

}  // namespace

std::optional<uint64_t> parse_format_size(const std::string& number, const std::string& unit) {
  double value = 0;
  try {
    value = std::stod(number);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  double scale = unit == "bytes" ? 1.0 : unit == "KiB" ? 1024.0 : unit == "MiB" ? 1048576.0 : unit == "GiB" ? 1073741824.0 : 0.0;
  if (scale == 0.0 || value < 0) return std::nullopt;
  return static_cast<uint64_t>(std::llround(value * scale));
}

const char* format_name(OomMessageFormat format) {
  switch (format) {
    case OomMessageFormat::Cached: return "torch 1.0-1.4 (\"cached\")";
    case OomMessageFormat::Legacy: return "torch 1.5-2.0";
    case OomMessageFormat::Torch21: return "torch 2.1";
    case OomMessageFormat::Current: return "torch 2.2+";
    case OomMessageFormat::OverOneExbibyte: return "request over 1 EiB";
  }
  return "unknown";
}

std::optional<OomMessageFigures> read_oom_message(const std::string& raw) {
  const std::string text = collapse_whitespace(raw);
  static const std::regex backend_pattern("(CUDA|HIP) out of memory\\.");
  std::smatch backend;
  if (!std::regex_search(text, backend, backend_pattern)) return std::nullopt;
  const std::string from = text.substr(static_cast<size_t>(backend.position(0)));
  if (from.find("Tried to allocate more than 1EB memory") != std::string::npos) {
    OomMessageFigures figures;
    figures.backend = backend[1].str();
    figures.format = OomMessageFormat::OverOneExbibyte;
    figures.alloc_size = 1ull << 60;
    figures.reserved_known = false;
    return figures;
  }
  if (auto figures = read_current(from, backend[1].str())) return figures;
  if (auto figures = read_legacy(from, backend[1].str())) return figures;
  return std::nullopt;
}

}  // namespace oomcast::advisor
