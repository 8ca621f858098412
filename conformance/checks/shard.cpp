#include "shard.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "lowbit/output.hpp"
#include "lowbit/sha256.hpp"

namespace lowbit::checks {

namespace fs = std::filesystem;

namespace {

// Decimal digits only: no sign, no space, no base prefix; at most 9 so that the value fits before the
// range check.
std::optional<std::uint32_t> parse_count(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return v;
}

// A result larger than this is not one lowbit wrote (a conform shard is kilobytes, a gate shard with
// every mismatch line a few megabytes).
constexpr std::uintmax_t max_result_bytes = std::uintmax_t{256} << 20;

std::string checksum_line(const std::string& text) { return Sha256::of(text) + "  " + shard_file + "\n"; }

// The whole file, or nullopt when it cannot be opened or read.
std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

// Through the one writer (lowbit/output.hpp); its FileError names the file.
void write_atomically(const fs::path& path, const std::string& text) { io::write_output(path.string(), text); }

std::string brief(const ordered_json& j) {
  std::string s = j.dump();
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

// Where two values first differ: "options.tier \"full\" differs from \"quick\"".
std::string first_difference(const ordered_json& a, const ordered_json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items())
      if (!b.contains(k)) return path + "." + k + " " + brief(v) + " is absent from";
      else if (v != b.at(k)) return first_difference(v, b.at(k), path + "." + k);
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) return path + "." + k + " is absent, unlike " + brief(v) + " in";
  }
  return path + " " + brief(a) + " differs from " + brief(b) + " of";
}

std::string range_text(Range r) { return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")"; }

// "3,5-7,9": the indices as a Slurm --array list.
std::string array_list(const std::vector<std::uint32_t>& sorted) {
  std::string s;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(sorted[i]);
    if (j > i) {
      // Two appends, not `"-" + ...`: GCC 12 warns falsely (-Wrestrict) on the concatenation.
      s += '-';
      s += std::to_string(sorted[j]);
    }
    i = j + 1;
  }
  return s;
}

}  // namespace

std::optional<Shard> parse_shard(std::string_view text, std::string& error) {
  const std::string quoted = "'" + std::string(text) + "'";
  const std::size_t slash = text.find('/');
  const std::optional<std::uint32_t> index =
      slash == std::string_view::npos ? std::nullopt : parse_count(text.substr(0, slash));
  const std::optional<std::uint32_t> count =
      slash == std::string_view::npos ? std::nullopt : parse_count(text.substr(slash + 1));
  if (!index || !count) {
    error = quoted + " is not I/N (two decimal integers, e.g. 3/8)";
    return std::nullopt;
  }
  if (*count == 0) {
    error = quoted + ": the count N must be at least 1";
    return std::nullopt;
  }
  if (*count > max_shard_count) {
    error = quoted + ": the count N is at most " + std::to_string(max_shard_count);
    return std::nullopt;
  }
  if (*index == 0) {
    error = quoted + ": shards are numbered from 1 (1/" + std::to_string(*count) + " is the first)";
    return std::nullopt;
  }
  if (*index > *count) {
    error = quoted + ": the index is beyond the count (" + std::to_string(*count) + "/" + std::to_string(*count) +
            " is the last)";
    return std::nullopt;
  }
  return Shard{*index, *count};
}

std::string shard_text(Shard s) { return std::to_string(s.index) + "/" + std::to_string(s.count); }

Range shard_range(std::uint64_t total, Shard s) {
  // floor(total·k/N) without overflow: with total = qN + r, it is qk + floor(rk/N), and rk < N² <= 10^10.
  const std::uint64_t q = total / s.count, r = total % s.count;
  const auto at = [&](std::uint64_t k) { return q * k + r * k / s.count; };
  return {at(s.index - 1), at(s.index)};
}

const std::string& build_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    if (!in) return std::string("unknown (no /proc/self/exe)");
    Sha256 h;
    std::vector<char> buf(1 << 16);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      h.update(buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    return "sha256:" + h.hex();
  }();
  return id;
}

ordered_json shard_header(std::string_view kind, Shard s, std::string_view version, std::string_view build,
                          const ordered_json& options, const std::vector<SpacePart>& space) {
  ordered_json j;
  j["schema"] = shard_schema;
  j["kind"] = kind;
  j["shard"] = {{"index", s.index}, {"count", s.count}};
  j["lowbit_version"] = version;
  j["build_id"] = build;
  j["options"] = options;
  ordered_json parts = ordered_json::array();
  for (const SpacePart& p : space)
    parts.push_back({{"name", p.name}, {"inputs", p.inputs}, {"begin", p.range.begin}, {"end", p.range.end}});
  j["space"] = parts;
  return j;
}

void write_shard(const fs::path& dir, const ordered_json& doc) {
  const std::string text = doc.dump(1) + "\n";
  write_atomically(dir / shard_file, text);
  write_atomically(dir / shard_checksum_file, checksum_line(text));
}

void write_shard(io::FolderOutput& out, const ordered_json& doc) {
  const std::string text = doc.dump(1) + "\n";
  out.add(shard_file, text);
  out.add(shard_checksum_file, checksum_line(text));
}

// ---- fields ----------------------------------------------------------------------------------------

const ordered_json& field(const ordered_json& o, std::string_view key, const std::string& path) {
  if (!o.is_object()) throw Malformed(path + " is not an object");
  const auto it = o.find(std::string(key));
  if (it == o.end()) throw Malformed(path + "." + std::string(key) + " is missing");
  return *it;
}

std::uint64_t uint_field(const ordered_json& o, std::string_view key, const std::string& path) {
  const ordered_json& v = field(o, key, path);
  if (!v.is_number_unsigned()) throw Malformed(path + "." + std::string(key) + " is not an unsigned integer");
  return v.get<std::uint64_t>();
}

double number_field(const ordered_json& o, std::string_view key, const std::string& path) {
  const ordered_json& v = field(o, key, path);
  if (!v.is_number()) throw Malformed(path + "." + std::string(key) + " is not a number");
  return v.get<double>();
}

bool bool_field(const ordered_json& o, std::string_view key, const std::string& path) {
  const ordered_json& v = field(o, key, path);
  if (!v.is_boolean()) throw Malformed(path + "." + std::string(key) + " is not true or false");
  return v.get<bool>();
}

std::string string_field(const ordered_json& o, std::string_view key, const std::string& path) {
  const ordered_json& v = field(o, key, path);
  if (!v.is_string()) throw Malformed(path + "." + std::string(key) + " is not a string");
  return v.get<std::string>();
}

const ordered_json& array_field(const ordered_json& o, std::string_view key, const std::string& path) {
  const ordered_json& v = field(o, key, path);
  if (!v.is_array()) throw Malformed(path + "." + std::string(key) + " is not an array");
  return v;
}

const ordered_json& object_field(const ordered_json& o, std::string_view key, const std::string& path) {
  const ordered_json& v = field(o, key, path);
  if (!v.is_object()) throw Malformed(path + "." + std::string(key) + " is not an object");
  return v;
}

// ---- reading a result ----------------------------------------------------------------------------------

std::variant<LoadedShard, LoadError> load_shard(const fs::path& dir) {
  const std::string where = dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return LoadError{LoadFailure::unreadable, where + ": not a folder"};
  const fs::path file = dir / shard_file;
  if (!fs::is_regular_file(file, ec))
    return LoadError{LoadFailure::unreadable, where + ": no " + shard_file + " (not a shard's result)"};
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) return LoadError{LoadFailure::unreadable, file.string() + ": unreadable: " + ec.message()};
  if (size > max_result_bytes)
    return LoadError{LoadFailure::damaged, file.string() + ": damaged: larger than any result lowbit writes"};
  const std::optional<std::string> text = read_file(file);
  if (!text) return LoadError{LoadFailure::unreadable, file.string() + ": unreadable"};
  const fs::path sum = dir / shard_checksum_file;
  if (!fs::is_regular_file(sum, ec))
    return LoadError{LoadFailure::damaged,
                     sum.string() + ": damaged: missing (the result is unfinished or was changed)"};
  const std::optional<std::string> line = fs::file_size(sum, ec) <= 256 ? read_file(sum) : std::nullopt;
  if (!line) return LoadError{LoadFailure::unreadable, sum.string() + ": unreadable"};
  if (*line != checksum_line(*text))
    return LoadError{LoadFailure::damaged,
                     file.string() + ": damaged: its SHA-256 differs from " + shard_checksum_file};
  LoadedShard s;
  s.where = where;
  try {
    s.doc = ordered_json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return LoadError{LoadFailure::damaged, file.string() + ": damaged: not JSON: " + e.what()};
  }
  try {
    const std::string schema = string_field(s.doc, "schema", "shard.json");
    if (schema != shard_schema)
      return LoadError{LoadFailure::damaged,
                       file.string() + ": foreign: schema '" + schema + "', this lowbit reads " + shard_schema};
    string_field(s.doc, "kind", "shard.json");
    const ordered_json& shard = object_field(s.doc, "shard", "shard.json");
    const std::uint64_t index = uint_field(shard, "index", "shard.json.shard");
    const std::uint64_t count = uint_field(shard, "count", "shard.json.shard");
    if (count < 1 || count > max_shard_count || index < 1 || index > count)
      throw Malformed("shard.json.shard is not a shard I/N with 1 <= I <= N <= " + std::to_string(max_shard_count));
    s.shard = {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(count)};
    string_field(s.doc, "lowbit_version", "shard.json");
    string_field(s.doc, "build_id", "shard.json");
    field(s.doc, "options", "shard.json");
    const ordered_json& space = array_field(s.doc, "space", "shard.json");
    for (std::size_t i = 0; i < space.size(); ++i) {
      const std::string path = "shard.json.space[" + std::to_string(i) + "]";
      SpacePart p{string_field(space[i], "name", path),
                  uint_field(space[i], "inputs", path),
                  {uint_field(space[i], "begin", path), uint_field(space[i], "end", path)}};
      const Range want = shard_range(p.inputs, s.shard);
      if (p.range != want)
        return LoadError{LoadFailure::damaged, file.string() + ": damaged: '" + p.name + "' holds the range " +
                                                   range_text(p.range) + " of " + std::to_string(p.inputs) +
                                                   ", where shard " + shard_text(s.shard) + " runs " +
                                                   range_text(want)};
      s.space.push_back(std::move(p));
    }
  } catch (const Malformed& e) { return LoadError{LoadFailure::damaged, file.string() + ": damaged: " + e.what()}; }
  return s;
}

std::vector<std::string> verify_cover(const std::vector<LoadedShard>& shards, std::string_view merging_version) {
  std::vector<std::string> problems;
  if (shards.empty()) return {"no shard results given"};
  const LoadedShard& ref = shards.front();
  const std::string ref_version = ref.doc.at("lowbit_version").get<std::string>();
  if (ref_version != merging_version)
    problems.push_back(ref.where + ": foreign: written by lowbit " + ref_version + ", this merge is lowbit " +
                       std::string(merging_version));
  std::map<std::uint32_t, const LoadedShard*> held;
  for (const LoadedShard& s : shards) {
    // The first field that differs from the first folder's makes a shard foreign.
    std::string differs;
    for (const char* key : {"kind", "lowbit_version", "options", "build_id"})
      if (differs.empty() && s.doc.at(key) != ref.doc.at(key))
        differs = "its " + first_difference(s.doc.at(key), ref.doc.at(key), key);
    if (differs.empty() && s.shard.count != ref.shard.count)
      differs = "it is shard " + shard_text(s.shard) + ", of a run in " + std::to_string(s.shard.count) +
                " shards, not " + std::to_string(ref.shard.count) + " as";
    if (differs.empty()) {
      bool same = s.space.size() == ref.space.size();
      for (std::size_t i = 0; same && i < s.space.size(); ++i)
        same = s.space[i].name == ref.space[i].name && s.space[i].inputs == ref.space[i].inputs;
      if (!same) differs = "it splits other inputs: its space differs from that of";
    }
    if (!differs.empty()) {
      problems.push_back(s.where + ": foreign shard: " + differs + " " + ref.where);
      continue;
    }
    const auto [it, fresh] = held.emplace(s.shard.index, &s);
    if (!fresh)
      problems.push_back(s.where + ": duplicated shard: " + shard_text(s.shard) + " is also " + it->second->where);
  }
  std::vector<std::uint32_t> missing;
  for (std::uint32_t i = 1; i <= ref.shard.count; ++i)
    if (!held.count(i)) missing.push_back(i);
  for (std::size_t k = 0; k < missing.size() && k < 20; ++k)
    problems.push_back("missing shard " + shard_text({missing[k], ref.shard.count}) +
                       ": no folder given holds its result");
  if (missing.size() > 20) problems.push_back("and " + std::to_string(missing.size() - 20) + " more missing shards");
  if (!missing.empty())
    problems.push_back("to rerun only the missing shards: indices " + array_list(missing) +
                       " (Slurm: sbatch --array=" + array_list(missing) + " ...)");
  if (!problems.empty()) return problems;
  // Every index once, each with the split's ranges: the ranges tile each space.  Checked as such.
  for (std::size_t p = 0; p < ref.space.size(); ++p) {
    std::uint64_t next = 0;
    for (const auto& [index, s] : held) {
      if (s->space[p].range.begin != next)
        problems.push_back(s->where + ": '" + ref.space[p].name + "' leaves a gap or overlap at " +
                           std::to_string(next));
      next = s->space[p].range.end;
    }
    if (next != ref.space[p].inputs)
      problems.push_back("'" + ref.space[p].name + "': the shards end at " + std::to_string(next) + " of " +
                         std::to_string(ref.space[p].inputs));
  }
  return problems;
}

// ---- conform ---------------------------------------------------------------------------------------

std::vector<Example> first_examples(const std::vector<const Outcome*>& parts) {
  std::vector<Example> all;
  for (const Outcome* o : parts) all.insert(all.end(), o->examples.begin(), o->examples.end());
  std::stable_sort(all.begin(), all.end(), [](const Example& a, const Example& b) { return a.at < b.at; });
  if (all.size() > kept_examples) all.resize(kept_examples);
  return all;
}

ordered_json conform_shard_doc(Shard s, const RunInfo& info, const std::vector<std::string>& checks,
                               const std::vector<CheckRun>& runs, std::string_view build) {
  std::vector<SpacePart> space;
  for (const CheckRun& r : runs) space.push_back({r.name, r.inputs, r.range});
  ordered_json j = shard_header("conform", s, info.version, build, {{"tier", info.tier}, {"checks", checks}}, space);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  j["run"] = {{"started", info.started}, {"seconds", info.seconds}, {"threads", info.threads}, {"host", host}};
  ordered_json results = ordered_json::array();
  for (const CheckRun& r : runs) {
    ordered_json c;
    c["name"] = r.name;
    c["tier"] = name(r.tier);
    c["description"] = r.description;
    c["unit"] = r.unit;
    c["cases"] = r.outcome.cases;
    c["mismatches"] = r.outcome.mismatches;
    c["skipped"] = r.outcome.skipped;
    c["note"] = r.outcome.note;
    c["seconds"] = r.seconds;
    ordered_json ex = ordered_json::array();
    for (const Example& e : r.outcome.examples)
      ex.push_back({{"input", e.at.input}, {"step", e.at.step}, {"text", e.text}});
    c["first_mismatches"] = ex;
    results.push_back(c);
  }
  j["results"] = results;
  return j;
}

namespace {

CheckRun read_check(const ordered_json& c, const std::string& path, const SpacePart& part) {
  CheckRun r;
  r.name = string_field(c, "name", path);
  if (r.name != part.name) throw Malformed(path + ".name '" + r.name + "' is not its space's '" + part.name + "'");
  const std::optional<Tier> tier = parse_tier(string_field(c, "tier", path));
  if (!tier) throw Malformed(path + ".tier is not quick or full");
  r.tier = *tier;
  r.description = string_field(c, "description", path);
  r.unit = string_field(c, "unit", path);
  r.inputs = part.inputs;
  r.range = part.range;
  r.outcome.cases = uint_field(c, "cases", path);
  r.outcome.mismatches = uint_field(c, "mismatches", path);
  r.outcome.skipped = bool_field(c, "skipped", path);
  r.outcome.note = string_field(c, "note", path);
  r.seconds = number_field(c, "seconds", path);
  const ordered_json& ex = array_field(c, "first_mismatches", path);
  if (ex.size() > kept_examples || ex.size() > r.outcome.mismatches)
    throw Malformed(path + ".first_mismatches holds more than its mismatches or than " + std::to_string(kept_examples));
  for (std::size_t k = 0; k < ex.size(); ++k) {
    const std::string at = path + ".first_mismatches[" + std::to_string(k) + "]";
    const std::uint64_t input = uint_field(ex[k], "input", at), step = uint_field(ex[k], "step", at);
    if (input < part.range.begin || input >= part.range.end || step > 0xFFFFFFFFu)
      throw Malformed(at + " lies outside the shard's inputs");
    r.outcome.examples.push_back({{input, static_cast<std::uint32_t>(step)}, string_field(ex[k], "text", at)});
  }
  return r;
}

}  // namespace

std::optional<MergedRun> merge_conform(const std::vector<LoadedShard>& shards, std::vector<std::string>& problems) {
  std::vector<const LoadedShard*> order;
  for (const LoadedShard& s : shards) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->shard.index < b->shard.index; });
  // Per shard, its checks in order.
  std::vector<std::vector<CheckRun>> parts;
  MergedRun m;
  const std::size_t before = problems.size();
  for (const LoadedShard* s : order) {
    try {
      const ordered_json& opts = object_field(s->doc, "options", "shard.json");
      const std::string tier = string_field(opts, "tier", "shard.json.options");
      const ordered_json& run = object_field(s->doc, "run", "shard.json");
      const std::string started = string_field(run, "started", "shard.json.run");
      const double seconds = number_field(run, "seconds", "shard.json.run");
      const std::uint64_t threads = uint_field(run, "threads", "shard.json.run");
      const ordered_json& results = array_field(s->doc, "results", "shard.json");
      if (results.size() != s->space.size()) throw Malformed("shard.json.results does not match shard.json.space");
      std::vector<CheckRun> runs;
      for (std::size_t i = 0; i < results.size(); ++i)
        runs.push_back(read_check(results[i], "shard.json.results[" + std::to_string(i) + "]", s->space[i]));
      if (parts.empty()) {
        m.info = {s->doc.at("lowbit_version").get<std::string>(), tier, started, 0, static_cast<unsigned>(threads)};
      } else {
        m.info.started = std::min(m.info.started, started);
        // Hardware threads: the shards' value where they agree, else the fewest.
        m.info.threads = std::min(m.info.threads, static_cast<unsigned>(threads));
      }
      m.info.seconds += seconds;
      parts.push_back(std::move(runs));
    } catch (const Malformed& e) { problems.push_back(s->where + "/" + shard_file + ": damaged: " + e.what()); }
  }
  if (problems.size() != before) return std::nullopt;
  if (parts.empty()) {
    problems.push_back("no shard results given");
    return std::nullopt;
  }
  for (std::size_t i = 0; i < parts.front().size(); ++i) {
    CheckRun merged = parts.front()[i];
    merged.range = {0, merged.inputs};
    merged.outcome.cases = merged.outcome.mismatches = 0;
    merged.seconds = 0;
    std::vector<const Outcome*> outcomes;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const CheckRun& r = parts[k][i];
      if (r.tier != merged.tier || r.description != merged.description || r.unit != merged.unit ||
          r.outcome.skipped != merged.outcome.skipped || r.outcome.note != merged.outcome.note)
        problems.push_back(order[k]->where + ": foreign shard: its check '" + r.name +
                           "' differs from the first shard's (tier, description, unit, skip or note)");
      merged.outcome.cases += r.outcome.cases;
      merged.outcome.mismatches += r.outcome.mismatches;
      merged.seconds += r.seconds;
      outcomes.push_back(&r.outcome);
    }
    merged.outcome.examples = first_examples(outcomes);
    m.runs.push_back(std::move(merged));
  }
  if (problems.size() != before) return std::nullopt;
  return m;
}

}  // namespace lowbit::checks
