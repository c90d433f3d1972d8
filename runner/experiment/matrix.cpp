// Operations on cells: the matrix expansion (Cartesian product, excludes,
// includes, duplicates, per-cell checks, baseline) for the loader, and the
// slugs, --filter matching and config hashes that the runner uses.
#include "runner/experiment/matrix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/content_hash.h"  // fnv1a64, hex64: config_hash
#include "core/strings.h"
#include "runner/experiment/config.h"
#include "runner/experiment/config_limits.h"
#include "runner/experiment/matrix_checks.h"
#include "train/cell_limits.h"

namespace mpb {

using schema::join;

namespace {

struct FilterTerm {
  std::string key;
  std::string value;
};

// The keys of a JMP policy component ("compute=float16"), which may follow a
// precision term because a policy contains commas itself.
bool is_policy_component(const std::string& key) {
  return key == "params" || key == "compute" || key == "output" || key == "p" || key == "c" ||
         key == "o";
}

// The first ',' at or after `start` that is not inside [...] (a list value such as
// inject_nonfinite=[5,9]), or filter.size().
size_t next_term_end(const std::string& filter, size_t start) {
  int depth = 0;
  for (size_t i = start; i < filter.size(); ++i) {
    if (filter[i] == '[') {
      ++depth;
    } else if (filter[i] == ']') {
      depth = std::max(0, depth - 1);
    } else if (filter[i] == ',' && depth == 0) {
      return i;
    }
  }
  return filter.size();
}

// "precision=fp32, fusion=on" -> {precision, fp32}, {fusion, on}.
std::vector<FilterTerm> split_filter(const std::string& filter) {
  std::vector<FilterTerm> terms;
  if (trim(filter).empty()) return terms;  // no terms: every cell matches
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t comma = next_term_end(filter, start);
    const std::string term = trim(filter.substr(start, comma - start));
    start = comma + 1;
    const auto eq = term.find('=');
    const std::string key = trim(term.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : trim(term.substr(eq + 1));
    if (key.empty() || value.empty()) {
      throw std::invalid_argument("filter '" + filter + "': term '" + term +
                                  "' is not key=value (terms are key=value joined by ',')");
    }
    // "precision=params=float32,compute=float16": glue the policy back together.
    if (!terms.empty() && terms.back().key == "precision" && is_policy_component(key)) {
      terms.back().value += "," + key + "=" + value;
      continue;
    }
    terms.push_back({key, value});
  }
  return terms;
}

}  // namespace

std::string cell_slug(const std::string& id) {
  // A readable spelling first: ',' -> "__", anything outside [A-Za-z0-9_.=-]
  // -> '_'. It reads back uniquely (so two ids cannot share it) when nothing
  // was replaced and no '_' touches another '_' or a ','. Then a run of two
  // underscores can only have been a comma. Otherwise, or when it is too long
  // for a file name (NAME_MAX is 255 bytes; ".json.tmp" follows), the
  // spelling is cut and 8 hex digits of the id's hash make it unique
  // (the loader still rejects a collision rather than trust the hash).
  std::string slug;
  bool reads_back = true;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool safe =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '=' || c == '-';
    if (c == ',') {
      slug += "__";
    } else {
      slug += safe ? c : '_';
      reads_back = reads_back && safe;
    }
    const char next = i + 1 < id.size() ? id[i + 1] : '\0';
    if (c == '_' && (next == '_' || next == ',')) reads_back = false;
    if (c == ',' && next == '_') reads_back = false;
  }
  if (reads_back && slug.size() <= kSlugMaxChars) return slug;
  const std::string hash = config_hash(nlohmann::json(id)).substr(0, 8);
  return slug.substr(0, kSlugMaxChars - hash.size() - 1) + "-" + hash;
}

std::string cell_value_string(const Cell& cell, const std::string& key) {
  for (const auto& [axis, value] : cell.axes) {
    if (axis == key) return value;
  }
  return config_value_string(cell.config, key);
}

namespace {

// The filter's terms with each value in the form cells print it.
std::vector<FilterTerm> canonical_filter_terms(const std::string& filter) {
  // Every term is parsed before any is compared, so that a malformed filter fails
  // on every cell, not only on the cells that get as far as the bad term.
  std::vector<FilterTerm> terms = split_filter(filter);
  for (auto& term : terms) {
    // A loss_scale in its canonical form ("dynamic{init:1024}", as ids print it) is
    // compared as written; other values are parsed like YAML values.
    if (term.key == "loss_scale" && term.value.find('{') != std::string::npos) continue;
    try {
      term.value = canonical_value_string(term.key, term.value);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("filter '" + filter + "': " + e.what());
    }
  }
  return terms;
}

}  // namespace

bool cell_matches_filter(const Cell& cell, const std::string& filter) {
  const std::vector<FilterTerm> terms = canonical_filter_terms(filter);
  for (const auto& term : terms) {
    if (cell_value_string(cell, term.key) != term.value) return false;
  }
  return true;
}

std::string filter_no_match_reason(const std::vector<Cell>& cells, const std::string& filter) {
  const std::vector<FilterTerm> terms = canonical_filter_terms(filter);
  std::vector<std::string> every_term;
  for (const FilterTerm& term : terms) {
    std::vector<std::string> values;  // the cells' values of this key, first seen first
    for (const Cell& cell : cells) {
      const std::string v = cell_value_string(cell, term.key);
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
    every_term.push_back(term.key + " is " + join(values, ", "));
    if (std::find(values.begin(), values.end(), term.value) != values.end()) continue;
    // The first term no cell has: name its key's values (an unknown key has none but "").
    if (values.size() == 1 && values[0].empty()) return "no cell has a key '" + term.key + "'";
    std::string reason = "no cell has " + term.key + "=" + term.value;
    std::optional<std::string> near = nearest_name(term.value, values);
    // A bare dtype is pure low precision: a user asking for bf16 usually means AMP's amp_bf16.
    const std::string amp = "amp_" + term.value;
    if (!near && std::find(values.begin(), values.end(), amp) != values.end()) near = amp;
    if (near) reason += " (did you mean " + term.key + "=" + *near + "?)";
    return reason + "; its values here: " + join(values, ", ");
  }
  // Each value occurs, not together (an exclude rule may have removed the combination).
  return "each value occurs, but no cell has them all together (" + join(every_term, "; ") + ")";
}

std::string config_hash(const nlohmann::json& canonical) { return hex64(fnv1a64(canonical.dump())); }

// ===========================================================================
// Matrix expansion
// ===========================================================================

namespace {

std::string describe(const Pattern& pattern) {
  std::vector<std::string> terms;
  for (const auto& [key, value] : pattern) terms.push_back(key + ": " + value);
  return "{" + join(terms, ", ") + "}";
}

bool matches(const Cell& cell, const Pattern& pattern) {
  return std::all_of(pattern.begin(), pattern.end(), [&](const auto& term) {
    return cell_value_string(cell, term.first) == term.second;
  });
}

// The exclude entries grouped by their set of keys: a cell is dropped when its
// values of one group's keys are one of that group's rows. One hash lookup per
// cell and group (usually one or two groups), instead of comparing every cell
// with every entry, which for thousands of each took minutes.
class ExcludeIndex {
 public:
  explicit ExcludeIndex(const std::vector<Pattern>& excludes) {
    std::map<std::vector<std::string>, size_t> group_of;  // sorted keys -> groups_ index
    for (Pattern entry : excludes) {
      std::sort(entry.begin(), entry.end());  // an entry's keys are distinct (the loader checks)
      std::vector<std::string> keys, values;
      for (auto& [key, value] : entry) {
        keys.push_back(key);
        values.push_back(value);
      }
      const auto [it, fresh] = group_of.emplace(keys, groups_.size());
      if (fresh) groups_.push_back(Group{std::move(keys), {}});
      groups_[it->second].rows.insert(row(values));
    }
  }

  bool excludes(const Cell& cell) const {
    std::vector<std::string> values;
    for (const Group& group : groups_) {
      values.clear();
      for (const std::string& key : group.keys) values.push_back(cell_value_string(cell, key));
      if (group.rows.count(row(values))) return true;
    }
    return false;
  }

 private:
  struct Group {
    std::vector<std::string> keys;
    std::unordered_set<std::string> rows;
  };
  // Length-prefixed, so that two lists of values never give the same row.
  static std::string row(const std::vector<std::string>& values) {
    std::string out;
    for (const std::string& v : values) out += std::to_string(v.size()) + ":" + v;
    return out;
  }

  std::vector<Group> groups_;
};

// A cell under construction, with where its values came from.
struct Draft {
  Cell cell;
  Origins origins;
  Origin origin;  // where to point when the cell as a whole is wrong
};

// Where the cell's value of `key` was written: the key itself, or for loss_scale.*
// the whole loss_scale value that set it. nullptr: the default.
const Origin* find_origin(const Draft& draft, const std::string& key) {
  auto it = draft.origins.find(key);
  if (it == draft.origins.end()) it = draft.origins.find(key.substr(0, key.find('.')));
  return it == draft.origins.end() ? nullptr : &it->second;
}

class Expansion {
 public:
  Expansion(const std::string& file, const MatrixSpec& spec, size_t max_cells)
      : file_(file), spec_(spec), max_cells_(max_cells) {}

  std::vector<Draft> product() const;
  Draft make_cell(const std::vector<const Assignment*>& assignments, const Origin& origin) const;
  void check_duplicates(const std::vector<Draft>& drafts) const;
  void check_cell(const Draft& draft, const LoadOptions& options) const;
  size_t find_baseline(const std::vector<Draft>& drafts) const;

  [[noreturn]] void fail(const Where& where, const std::string& path,
                         const std::string& message) const {
    throw ConfigError(file_, where.line, where.col, path, message);
  }

 private:
  const std::string& file_;
  const MatrixSpec& spec_;
  size_t max_cells_;  // LoadOptions::max_cells
};

// The Cartesian product in the order the axes are written: the first axis varies
// slowest. No axes: the one cell "base".
std::vector<Draft> Expansion::product() const {
  const std::vector<Axis>& axes = spec_.axes;
  if (axes.empty()) return {make_cell({}, Origin{Where{1, 1}, "", false})};
  size_t count = 1;
  for (const auto& axis : axes) {
    count *= axis.values.size();
    if (count > max_cells_) {
      fail(axis.values.front().origin.where, "matrix",
           "the matrix expands to more than " + std::to_string(max_cells_) +
               " cells (the product of the axis lengths, before exclude)");
    }
  }
  std::vector<Draft> drafts;
  std::vector<size_t> index(axes.size(), 0);  // an odometer over the axes
  for (size_t n = 0; n < count; ++n) {
    std::vector<const Assignment*> assignments;
    for (size_t a = 0; a < axes.size(); ++a) assignments.push_back(&axes[a].values[index[a]]);
    drafts.push_back(make_cell(assignments, assignments.back()->origin));
    for (size_t a = axes.size(); a-- > 0;) {  // advance the last axis first
      if (++index[a] < axes[a].values.size()) break;
      index[a] = 0;
    }
  }
  return drafts;
}

Draft Expansion::make_cell(const std::vector<const Assignment*>& assignments,
                           const Origin& origin) const {
  Draft draft{Cell{}, spec_.base_origins, origin};
  draft.cell.config = spec_.base;
  std::vector<std::string> terms;
  for (const Assignment* a : assignments) {
    a->spec->set(draft.cell.config, a->value);
    // A whole loss_scale replaces its fields, and where they came from.
    const std::string prefix = a->spec->key + ".";
    for (auto it = draft.origins.begin(); it != draft.origins.end();) {
      it = schema::starts_with(it->first, prefix) ? draft.origins.erase(it) : std::next(it);
    }
    draft.origins[a->spec->key] = a->origin;
    draft.cell.axes.emplace_back(a->spec->key, a->canonical);
    terms.push_back(a->spec->key + "=" + a->canonical);
  }
  draft.cell.id = terms.empty() ? "base" : join(terms, ",");
  draft.cell.slug = cell_slug(draft.cell.id);
  return draft;
}

// Two cells with the same id, or the same configuration, would run the same thing
// twice and collide in results/ (an include that repeats a matrix cell, or a
// loss_scale axis next to loss_scale.value).
void Expansion::check_duplicates(const std::vector<Draft>& drafts) const {
  std::unordered_map<std::string, size_t> ids, configs, slugs;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const Draft& draft = drafts[i];
    const std::string where = draft.origin.path.empty() ? "matrix" : draft.origin.path;
    if (const auto [it, fresh] = ids.emplace(draft.cell.id, i); !fresh) {
      fail(draft.origin.where, where, "duplicate cell id '" + draft.cell.id + "'");
    }
    if (const auto [it, fresh] = slugs.emplace(draft.cell.slug, i); !fresh) {  // a hash collision
      fail(draft.origin.where, where,
           "cells '" + draft.cell.id + "' and '" + drafts[it->second].cell.id + "' would share the result file " +
               "cells/" + draft.cell.slug + ".json; rename a value");
    }
    const std::string config = cell_config_to_json(draft.cell.config).dump();
    if (const auto [it, fresh] = configs.emplace(config, i); !fresh) {
      fail(draft.origin.where, where,
           "duplicate cell: '" + draft.cell.id + "' has the same configuration as '" +
               drafts[it->second].cell.id + "'");
    }
  }
}

// The schema's per-cell checks, then the model's and the data's own rules and
// the files the cell reads (train/cell_limits.h), pointed at the value most
// specific to this cell among the problem's keys: one the matrix or an include
// set, else one the base set, else (defaults only) no position.
void Expansion::check_cell(const Draft& draft, const LoadOptions& options) const {
  auto problem = check_cell_config(draft.cell.config, options.reject_unsupported);
  if (!problem) problem = check_cell_model(draft.cell.config);
  if (!problem && options.check_files) problem = check_cell_files(draft.cell.config);
  if (!problem) return;
  if (problem->unsupported) {  // at the value itself, as a value error
    const Origin* origin = find_origin(draft, problem->keys.front());
    if (!origin) fail(Where{}, problem->keys.front(), problem->message);  // a default: not reached
    fail(origin->where, origin->path, problem->message);
  }
  const Origin* chosen = nullptr;
  for (const bool per_cell : {true, false}) {
    for (const auto& key : problem->keys) {
      const Origin* origin = find_origin(draft, key);
      if (!chosen && origin && origin->per_cell == per_cell) chosen = origin;
    }
  }
  const std::string text = "cell '" + draft.cell.id + "': " + problem->message;
  if (!chosen) fail(Where{}, problem->keys.front(), text);
  fail(chosen->where, chosen->path, text);
}

size_t Expansion::find_baseline(const std::vector<Draft>& drafts) const {
  if (!spec_.baseline) return 0;  // default: the first cell
  const Pattern& baseline = *spec_.baseline;
  std::vector<size_t> found;
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (matches(drafts[i].cell, baseline)) found.push_back(i);
  }
  if (found.size() == 1) return found.front();
  // A few cells, never all of them: a message listing 10,000 ids is unreadable.
  const size_t shown = kBaselineCandidatesShown;
  const auto quoted = [&](size_t i) { return "'" + drafts[i].cell.id + "'"; };
  if (found.empty()) {
    // The nearest cells: the fewest of the baseline's keys with another value
    // (the earlier cell on a tie), each with its values of those keys.
    std::vector<std::pair<size_t, size_t>> by_distance;  // differing keys, cell index
    for (size_t i = 0; i < drafts.size(); ++i) {
      size_t differ = 0;
      for (const auto& [key, value] : baseline) differ += cell_value_string(drafts[i].cell, key) != value;
      by_distance.emplace_back(differ, i);
    }
    const size_t n = std::min(shown, by_distance.size());
    std::partial_sort(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(n),
                      by_distance.end());
    std::vector<std::string> nearest;
    for (size_t j = 0; j < n; ++j) {
      const Cell& cell = drafts[by_distance[j].second].cell;
      std::vector<std::string> values;
      for (const auto& [key, value] : baseline) {
        const std::string actual = cell_value_string(cell, key);
        if (actual != value) values.push_back(key + " is " + actual);
      }
      nearest.push_back(quoted(by_distance[j].second) + " (" + join(values, ", ") + ")");
    }
    fail(spec_.baseline_at, "baseline",
         describe(baseline) + " matches none of the " + std::to_string(drafts.size()) + " cells; nearest: " +
             join(nearest, ", ") + (drafts.size() > n ? ", ..." : ""));
  }
  std::vector<std::string> listed;
  for (size_t j = 0; j < std::min(shown, found.size()); ++j) listed.push_back(quoted(found[j]));
  if (found.size() > shown) listed.push_back("and " + std::to_string(found.size() - shown) + " more");
  fail(spec_.baseline_at, "baseline",
       describe(baseline) + " matches " + std::to_string(found.size()) + " cells (" + join(listed, ", ") +
           "); add keys so that it matches exactly one");
}

}  // namespace

std::vector<Cell> expand_matrix(const std::string& file, const MatrixSpec& spec,
                                const LoadOptions& options) {
  const Expansion expansion(file, spec, options.max_cells);
  std::vector<Draft> drafts = expansion.product();
  // Excludes: drop a cell that matches every key of any entry. Includes come after,
  // so they may add back a cell that an exclude dropped.
  {
    std::vector<Cell> product;
    product.reserve(drafts.size());
    for (const Draft& d : drafts) product.push_back(d.cell);
    check_excludes_match(file, spec.excludes, spec.excludes_at, product);
  }
  const ExcludeIndex excludes(spec.excludes);
  const auto excluded = [&](const Draft& draft) { return excludes.excludes(draft.cell); };
  drafts.erase(std::remove_if(drafts.begin(), drafts.end(), excluded), drafts.end());
  const size_t max_cells = options.max_cells;
  if (drafts.size() + spec.includes.size() > max_cells) {
    const Include& entry = spec.includes[max_cells - std::min(max_cells, drafts.size())];
    expansion.fail(entry.origin.where, entry.origin.path,
                   "this include makes more than " + std::to_string(max_cells) + " cells (" +
                       std::to_string(drafts.size()) + " from the matrix, " + std::to_string(spec.includes.size()) +
                       " includes)");
  }
  for (const auto& entry : spec.includes) {
    std::vector<const Assignment*> assignments;
    for (const auto& a : entry.assignments) assignments.push_back(&a);
    drafts.push_back(expansion.make_cell(assignments, entry.origin));
  }
  if (drafts.empty()) {
    expansion.fail(spec.exclude_at, "exclude", "the matrix expands to zero cells after excludes");
  }
  expansion.check_duplicates(drafts);
  for (const auto& draft : drafts) expansion.check_cell(draft, options);

  const size_t baseline = expansion.find_baseline(drafts);
  drafts[baseline].cell.is_baseline = true;
  std::vector<Cell> cells;
  for (auto& draft : drafts) {
    for (const auto& [key, o] : draft.origins) {
      draft.cell.origins[key] = ValueOrigin{o.path, o.where.line, o.where.col, o.per_cell};
    }
    cells.push_back(std::move(draft.cell));
  }
  return cells;
}

}  // namespace mpb
