#include "vectors_shard.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli_util.hpp"
#include "lowbit/output.hpp"
#include "lowbit/sha256.hpp"

namespace lowbit::vectors {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using checks::Malformed;
using checks::Range;

bool is_convert(const json& manifest) { return manifest.value("kind", "") == "convert"; }

// A tensor suite's file belongs to the unit of its case; a file without one (no suite writes such a file
// today) to the first unit.
std::uint64_t case_of(const json& meta) { return meta.value("case", std::uint64_t{0}); }

// The case indices of the manifest's cases in `r`.
std::set<std::uint64_t> cases_in(const json& manifest, Range r) {
  std::set<std::uint64_t> v;
  const json cases = manifest.value("cases", json::array());
  for (std::uint64_t i = r.begin; i < r.end && i < cases.size(); ++i) v.insert(cases[i].value("index", i));
  return v;
}

json cut_cases(const json& manifest, Range r) {
  json out = json::array();
  const json cases = manifest.value("cases", json::array());
  for (std::uint64_t i = r.begin; i < r.end && i < cases.size(); ++i) out.push_back(cases[i]);
  return out;
}

// A path inside a suite: relative, '/'-separated names of letters, digits, '.', '_', '-', none of them
// "." or "..".
bool safe_relative(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = std::min(p.find('/', start), p.size());
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
    start = end + 1;
  }
  return true;
}

// The file `rel` under `root`, refusing links anywhere on the way, exactly `size` bytes.
std::optional<std::string> read_inside(const fs::path& root, const std::string& rel, std::uint64_t size,
                                       std::string& why) {
  fs::path at = root;
  std::error_code ec;
  for (const fs::path& part : fs::path(rel)) {
    at /= part;
    if (fs::is_symlink(fs::symlink_status(at, ec))) {
      why = "is a symbolic link";
      return std::nullopt;
    }
  }
  if (!fs::is_regular_file(fs::symlink_status(at, ec))) {
    why = "missing";
    return std::nullopt;
  }
  if (fs::file_size(at, ec) != size || ec) {
    why = "not the " + std::to_string(size) + " bytes its shard.json lists";
    return std::nullopt;
  }
  std::ifstream in(at, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in) {
    why = "unreadable";
    return std::nullopt;
  }
  return ss.str();
}

std::vector<const checks::LoadedShard*> by_index(const std::vector<checks::LoadedShard>& shards) {
  std::vector<const checks::LoadedShard*> v;
  for (const checks::LoadedShard& s : shards) v.push_back(&s);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->shard.index < b->shard.index; });
  return v;
}

ordered_json unit_json(const Unit& u) {
  return {{"name", u.name},
          {"cases", u.cases},
          {"mismatches", u.mismatches},
          {"skipped", u.skipped},
          {"skip_reason", u.skip_reason},
          {"error", u.error},
          {"details", u.details}};
}

Unit read_unit(const ordered_json& j, const std::string& path) {
  Unit u;
  u.name = checks::string_field(j, "name", path);
  u.cases = checks::uint_field(j, "cases", path);
  u.mismatches = checks::uint_field(j, "mismatches", path);
  u.skipped = checks::bool_field(j, "skipped", path);
  u.skip_reason = checks::string_field(j, "skip_reason", path);
  u.error = checks::string_field(j, "error", path);
  const ordered_json& details = checks::array_field(j, "details", path);
  for (std::size_t i = 0; i < details.size(); ++i) {
    if (!details[i].is_string()) throw Malformed(path + ".details[" + std::to_string(i) + "] is not a string");
    u.details.push_back(details[i].get<std::string>());
  }
  return u;
}

}  // namespace

checks::Shard shard_option(const std::string& text) {
  std::string error;
  const std::optional<checks::Shard> s = checks::parse_shard(text, error);
  if (!s) throw cli::InputError("--shard: " + error);
  return *s;
}

std::uint64_t unit_count(const Suite& s) {
  return is_convert(s.manifest) ? s.files.size() : s.manifest.value("cases", json::array()).size();
}

std::uint64_t unit_count(const Golden& g) {
  return is_convert(g.manifest) ? g.manifest.at("files").size() : g.manifest.value("cases", json::array()).size();
}

Suite suite_part(const Suite& s, Range r) {
  Suite p;
  p.name = s.name;
  p.manifest = s.manifest;
  if (is_convert(s.manifest)) {
    for (std::uint64_t i = r.begin; i < r.end && i < s.files.size(); ++i) p.files.push_back(s.files[i]);
    return p;
  }
  const std::set<std::uint64_t> keep = cases_in(s.manifest, r);
  for (const File& f : s.files)
    if (keep.count(case_of(f.meta))) p.files.push_back(f);
  p.manifest["cases"] = cut_cases(s.manifest, r);
  return p;
}

Golden golden_part(const Golden& g, Range r) {
  Golden p;
  p.name = g.name;
  p.where = g.where;
  p.manifest = g.manifest;
  json files = json::array();
  const json& all = g.manifest.at("files");
  if (is_convert(g.manifest)) {
    for (std::uint64_t i = r.begin; i < r.end && i < all.size(); ++i) files.push_back(all[i]);
  } else {
    const std::set<std::uint64_t> keep = cases_in(g.manifest, r);
    for (const json& e : all)
      if (keep.count(case_of(e))) files.push_back(e);
    p.manifest["cases"] = cut_cases(g.manifest, r);
  }
  for (const json& e : files) {
    const std::string path = e.at("path");
    p.files[path] = g.files.at(path);
  }
  p.manifest["files"] = files;
  return p;
}

void write_suite_shard(const Suite& whole, checks::Shard shard, const std::string& dir, const ShapeRequest& shapes) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec)) &&
      !(fs::is_directory(fs::symlink_status(dir, ec)) && fs::is_empty(dir, ec)))
    throw cli::InputError("--out: '" + dir + "' exists and is not an empty folder");
  const std::uint64_t units = unit_count(whole);
  const Range r = checks::shard_range(units, shard);
  const Suite part = suite_part(whole, r);
  ordered_json files = ordered_json::array();
  for (const File& f : part.files)
    files.push_back({{"path", f.path},
                     {"role", f.role},
                     {"bytes", f.bytes.size()},
                     {"sha256", Sha256::of(f.bytes)},
                     {"meta", ordered_json::parse(f.meta.dump())}});
  const ordered_json options = {{"suite", whole.name},
                                {"seed", whole.manifest.value("seed", std::uint64_t{0})},
                                {"shapes", shapes_json(shapes)}};
  ordered_json doc =
      checks::shard_header("vectors", shard, LOWBIT_VERSION, checks::build_id(), options, {{whole.name, units, r}});
  doc["manifest"] = ordered_json::parse(whole.manifest.dump());
  doc["files"] = files;

  // Everything into a new folder, swapped in whole at the end (lowbit/output.hpp).
  try {
    io::FolderOutput out(dir, {});
    for (const File& f : part.files) out.add("files/" + f.path, f.bytes);
    checks::write_shard(out, doc);
    out.commit();
  } catch (const io::FileError& e) {
    throw cli::InputError(std::string("--out: ") + e.what());
  }
}

std::optional<Suite> merge_suite_shards(const std::vector<checks::LoadedShard>& shards,
                                        std::vector<std::string>& problems) {
  const std::size_t before = problems.size();
  const std::vector<const checks::LoadedShard*> order = by_index(shards);
  Suite s;
  std::map<std::string, std::string> seen;  // path -> the folder holding it
  for (const checks::LoadedShard* sh : order) {
    const std::string file = sh->where + "/" + checks::shard_file;
    try {
      const ordered_json& manifest = checks::object_field(sh->doc, "manifest", "shard.json");
      if (sh == order.front()) {
        s.manifest = json::parse(manifest.dump());
        s.name = checks::string_field(manifest, "suite", "shard.json.manifest");
      } else if (json::parse(manifest.dump()) != s.manifest) {
        problems.push_back(sh->where + ": foreign shard: its suite manifest differs from " + order.front()->where +
                           "'s");
        continue;
      }
      const ordered_json& files = checks::array_field(sh->doc, "files", "shard.json");
      const Range r = sh->space.at(0).range;
      const std::set<std::uint64_t> cases = cases_in(s.manifest, r);
      if (is_convert(s.manifest) && files.size() != r.size())
        throw Malformed("shard.json.files lists " + std::to_string(files.size()) + " files for " +
                        std::to_string(r.size()) + " units");
      for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string at = "shard.json.files[" + std::to_string(i) + "]";
        File f;
        f.path = checks::string_field(files[i], "path", at);
        f.role = checks::string_field(files[i], "role", at);
        const std::uint64_t bytes = checks::uint_field(files[i], "bytes", at);
        const std::string sha = checks::string_field(files[i], "sha256", at);
        f.meta = json::parse(checks::object_field(files[i], "meta", at).dump());
        if (!safe_relative(f.path)) throw Malformed(at + ".path '" + f.path + "' leaves the shard's files folder");
        if (!is_convert(s.manifest) && !cases.count(case_of(f.meta)))
          throw Malformed(at + " belongs to a case outside the shard's range");
        if (const auto [it, fresh] = seen.emplace(f.path, sh->where); !fresh)
          throw Malformed(at + " '" + f.path + "' is also in " + it->second);
        std::string why;
        const std::optional<std::string> content = read_inside(fs::path(sh->where) / "files", f.path, bytes, why);
        if (!content) {
          problems.push_back(sh->where + "/files/" + f.path + ": damaged: " + why);
          continue;
        }
        if (Sha256::of(*content) != sha) {
          problems.push_back(sh->where + "/files/" + f.path + ": damaged: its SHA-256 differs from shard.json");
          continue;
        }
        f.bytes = *content;
        s.files.push_back(std::move(f));
      }
    } catch (const Malformed& e) {
      problems.push_back(file + ": damaged: " + e.what());
    } catch (const json::exception& e) { problems.push_back(file + ": damaged: " + e.what()); }
  }
  if (problems.size() != before) return std::nullopt;
  std::sort(s.files.begin(), s.files.end(), [](const File& a, const File& b) { return a.path < b.path; });
  if (unit_count(s) != order.front()->space.at(0).inputs) {
    problems.push_back("the shards hold " + std::to_string(unit_count(s)) + " units of the suite's " +
                       std::to_string(order.front()->space.at(0).inputs));
    return std::nullopt;
  }
  return s;
}

ordered_json plugin_identity(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  Sha256 h;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  return {{"path", path}, {"name", name}, {"sha256", h.hex()}};
}

ordered_json shapes_json(const ShapeRequest& shapes) {
  auto text = [](const std::optional<std::string>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
  return {{"shape", text(shapes.shape)}, {"layout", text(shapes.layout)}};
}

ordered_json gate_shard_doc(checks::Shard shard, const GateShard& g) {
  const ordered_json options = {{"suites", g.suites},   {"seed", g.seed},
                                {"max_report", g.max_report}, {"plugin", g.plugin},
                                {"require", g.req.require},   {"min_cases", g.req.min_cases},
                                {"shapes", shapes_json(g.shapes)}};
  ordered_json doc = checks::shard_header("gate", shard, LOWBIT_VERSION, checks::build_id(), options, g.space);
  ordered_json results = ordered_json::array();
  for (const SuiteReport& r : g.reports) {
    ordered_json units = ordered_json::array();
    for (const Unit& u : r.units) units.push_back(unit_json(u));
    results.push_back({{"suite", r.name}, {"units", units}});
  }
  doc["results"] = results;
  return doc;
}

std::optional<MergedGate> merge_gate_shards(const std::vector<checks::LoadedShard>& shards,
                                            std::vector<std::string>& problems) {
  const std::size_t before = problems.size();
  const std::vector<const checks::LoadedShard*> order = by_index(shards);
  MergedGate m;
  for (const checks::LoadedShard* sh : order) {
    try {
      const ordered_json& options = checks::object_field(sh->doc, "options", "shard.json");
      const ordered_json& plugin = checks::object_field(options, "plugin", "shard.json.options");
      m.max_report = checks::uint_field(options, "max_report", "shard.json.options");
      m.plugin_path = checks::string_field(plugin, "path", "shard.json.options.plugin");
      m.plugin_name = checks::string_field(plugin, "name", "shard.json.options.plugin");
      m.req.min_cases = checks::uint_field(options, "min_cases", "shard.json.options");
      m.req.require.clear();
      for (const ordered_json& r : checks::array_field(options, "require", "shard.json.options")) {
        if (!r.is_string()) throw Malformed("shard.json.options.require holds a non-string");
        m.req.require.push_back(r.get<std::string>());
      }
      const ordered_json& results = checks::array_field(sh->doc, "results", "shard.json");
      if (results.size() != sh->space.size()) throw Malformed("shard.json.results does not match shard.json.space");
      if (m.reports.empty())
        for (const checks::SpacePart& p : sh->space) m.reports.push_back({p.name, {}});
      for (std::size_t i = 0; i < results.size(); ++i) {
        const std::string at = "shard.json.results[" + std::to_string(i) + "]";
        if (checks::string_field(results[i], "suite", at) != sh->space[i].name)
          throw Malformed(at + ".suite is not its space's");
        const ordered_json& units = checks::array_field(results[i], "units", at);
        if (units.size() != sh->space[i].range.size())
          throw Malformed(at + ".units holds " + std::to_string(units.size()) + " units for a range of " +
                          std::to_string(sh->space[i].range.size()));
        for (std::size_t k = 0; k < units.size(); ++k)
          m.reports[i].units.push_back(read_unit(units[k], at + ".units[" + std::to_string(k) + "]"));
      }
    } catch (const Malformed& e) {
      problems.push_back(sh->where + "/" + checks::shard_file + ": damaged: " + e.what());
    }
  }
  if (problems.size() != before) return std::nullopt;
  return m;
}

}  // namespace lowbit::vectors
