#include "runner/results/merge_paths.h"

#include <system_error>

namespace mpb {

namespace fs = std::filesystem;

bool path_is_within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // the trailing "" of "a/b/"
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

std::string merge_path_conflict(const fs::path& out, const std::vector<fs::path>& inputs) {
  std::error_code ec;
  const fs::path out_c = fs::weakly_canonical(fs::absolute(out), ec);
  if (ec) return "OUT " + out.string() + ": " + ec.message();
  for (const fs::path& in : inputs) {
    const fs::path in_c = fs::weakly_canonical(fs::absolute(in), ec);
    if (ec) return "input " + in.string() + ": " + ec.message();
    if (in_c == out_c)
      return "OUT " + out.string() + " is the input " + in.string() + ": write the merged set elsewhere";
    if (path_is_within(out_c, in_c))
      return "OUT " + out.string() + " lies inside the input " + in.string() + " (" + in_c.string() +
             "): the merged set would become part of that shard; write it elsewhere";
    if (path_is_within(in_c, out_c))
      return "the input " + in.string() + " lies inside OUT " + out.string() + " (" + out_c.string() +
             "): choose an OUT that holds no shard, e.g. a sibling of the shards' directory";
  }
  return "";
}

}  // namespace mpb
