// Sites are matched by their text (file:line function and the via frame), so two runs of the
// same code line up even when their addresses, sizes and event counts differ.
#include "advisor/snapshot_diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"

namespace oomcast::advisor {
namespace {

using Key = std::pair<std::string, std::string>;

std::string signed_bytes(int64_t delta) {
  if (delta == 0) return "0";
  return (delta > 0 ? "+" : "") + byte_text(delta);
}

// "profile.py:11 <module>" -> "<module>"; native sites are matched whole.
std::string function_of(const std::string& site) {
  size_t space = site.rfind(' ');
  return site.find(".py:") == std::string::npos || space == std::string::npos ? site : site.substr(space + 1);
}

// Two scripts that do the same thing put it on other lines (or in files of other names): a site
// only A has and a site only B has are one site when each is the only one of its run with that
// function and via frame.
void pair_moved_sites(std::map<Key, SiteDiff>& sites) {
  std::map<Key, std::vector<Key>> only_a, only_b;
  for (const auto& [key, site] : sites) {
    bool in_a = site.allocs_a > 0 || site.live_a > 0, in_b = site.allocs_b > 0 || site.live_b > 0;
    Key loose{function_of(key.first), key.second};
    if (in_a && !in_b) only_a[loose].push_back(key);
    if (in_b && !in_a) only_b[loose].push_back(key);
  }
  for (const auto& [loose, keys_a] : only_a) {
    auto found = only_b.find(loose);
    if (found == only_b.end() || keys_a.size() != 1 || found->second.size() != 1) continue;
    SiteDiff& a = sites[keys_a.front()];
    const SiteDiff& b = sites[found->second.front()];
    a.live_b = b.live_b;
    a.allocated_b = b.allocated_b;
    a.allocs_b = b.allocs_b;
    a.site_b = b.where.site;
    sites.erase(found->second.front());
  }
}

std::string site_text(const SiteDiff& site) {
  return call_site_text(site.where) + (site.site_b.empty() ? "" : "  | B: " + site.site_b);
}

}  // namespace

SnapshotDiff diff_snapshots(SnapshotAnalysis a, SnapshotAnalysis b) {
  std::map<Key, SiteDiff> sites;
  auto row = [&](const CallSite& where) -> SiteDiff& {
    SiteDiff& diff = sites[{where.site, where.via}];
    diff.where = where;
    return diff;
  };
  for (const SiteBytes& s : a.live_at_peak) row(s.where).live_a += s.bytes;
  for (const SiteBytes& s : b.live_at_peak) row(s.where).live_b += s.bytes;
  for (const SiteBytes& s : a.allocated_in_window) {
    SiteDiff& d = row(s.where);
    d.allocated_a += s.bytes;
    d.allocs_a += s.blocks;
  }
  for (const SiteBytes& s : b.allocated_in_window) {
    SiteDiff& d = row(s.where);
    d.allocated_b += s.bytes;
    d.allocs_b += s.blocks;
  }
  pair_moved_sites(sites);
  SnapshotDiff diff;
  for (auto& [key, site] : sites) diff.sites.push_back(std::move(site));
  std::stable_sort(diff.sites.begin(), diff.sites.end(), [](const SiteDiff& x, const SiteDiff& y) {
    if (std::llabs(x.live_delta()) != std::llabs(y.live_delta())) return std::llabs(x.live_delta()) > std::llabs(y.live_delta());
    return std::llabs(x.allocated_delta()) > std::llabs(y.allocated_delta());
  });
  diff.a = std::move(a);
  diff.b = std::move(b);
  return diff;
}

std::string render_diff_text(const SnapshotDiff& diff, size_t top) {
  std::string text;
  text += fmt::format("A  {}\n   peak allocated {} from {}\n", diff.a.name, byte_text(diff.a.peak_allocated_bytes),
                      call_site_text(diff.a.peak_site));
  text += fmt::format("B  {}\n   peak allocated {} from {}\n", diff.b.name, byte_text(diff.b.peak_allocated_bytes),
                      call_site_text(diff.b.peak_site));
  int64_t peak_delta = static_cast<int64_t>(diff.b.peak_allocated_bytes) - static_cast<int64_t>(diff.a.peak_allocated_bytes);
  text += fmt::format("peak allocated B - A: {}\n\n", signed_bytes(peak_delta));
  if (!diff.a.has_frames || !diff.b.has_frames) text += "(one snapshot has no frames: call sites are coarse)\n";
  text += fmt::format("{:>12} {:>12} {:>12}   {:>12} {:>12}   call site\n", "live@peak A", "live@peak B", "B - A",
                      "alloc'd A", "alloc'd B");
  size_t shown = 0;
  for (const SiteDiff& site : diff.sites) {
    if (shown == top) break;
    if (site.live_delta() == 0 && site.allocated_delta() == 0) break;  // sorted: the rest are equal
    text += fmt::format("{:>12} {:>12} {:>12}   {:>12} {:>12}   {}\n", byte_text(site.live_a), byte_text(site.live_b),
                        signed_bytes(site.live_delta()), byte_text(site.allocated_a), byte_text(site.allocated_b),
                        site_text(site));
    shown += 1;
  }
  size_t differing = 0;
  for (const SiteDiff& site : diff.sites) differing += site.live_delta() != 0 || site.allocated_delta() != 0;
  if (differing > shown) text += fmt::format("... {} more call sites differ\n", differing - shown);
  if (differing == 0) text += "(no call site allocates differently)\n";
  text += fmt::format("{} call sites in all, {} the same in both\n", diff.sites.size(), diff.sites.size() - differing);
  return text;
}

std::string render_diff_json(const SnapshotDiff& diff) {
  using Json = nlohmann::ordered_json;
  auto run = [](const SnapshotAnalysis& analysis) {
    return Json{{"name", analysis.name},
                {"peak_allocated_bytes", analysis.peak_allocated_bytes},
                {"peak_site", call_site_text(analysis.peak_site)},
                {"has_frames", analysis.has_frames}};
  };
  Json out;
  out["a"] = run(diff.a);
  out["b"] = run(diff.b);
  out["peak_delta_bytes"] = static_cast<int64_t>(diff.b.peak_allocated_bytes) - static_cast<int64_t>(diff.a.peak_allocated_bytes);
  Json sites = Json::array();
  for (const SiteDiff& site : diff.sites) {
    sites.push_back(Json{{"site", site.where.site}, {"via", site.where.via}, {"site_b", site.site_b}, {"live_a", site.live_a},
                         {"live_b", site.live_b}, {"live_delta", site.live_delta()}, {"allocated_a", site.allocated_a},
                         {"allocated_b", site.allocated_b}, {"allocated_delta", site.allocated_delta()},
                         {"allocs_a", site.allocs_a}, {"allocs_b", site.allocs_b}});
  }
  out["sites"] = std::move(sites);
  return out.dump(2) + "\n";
}

}  // namespace oomcast::advisor
