#include "runner/results/merge_paths.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
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

namespace {

// A directory's identity: a bind mount shows one directory under two paths that no
// spelling rule can relate, but both stat to the same device and inode.
struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

std::optional<FileId> file_id(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// The identities of `p` (when it exists) and of every directory above it.
std::vector<FileId> ids_up_from(const fs::path& p) {
  std::vector<FileId> ids;
  for (fs::path cur = p;; cur = cur.parent_path()) {
    if (const auto id = file_id(cur)) ids.push_back(*id);
    if (cur == cur.root_path() || cur.empty() || cur.parent_path() == cur) break;
  }
  return ids;
}

bool contains(const std::vector<FileId>& ids, const std::optional<FileId>& id) {
  return id && std::find(ids.begin(), ids.end(), *id) != ids.end();
}

}  // namespace

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
    // The same checks by identity (issue 43 item 13: OUT inside a bind mount of a shard
    // wrote the merged set into the shard).
    if (contains(ids_up_from(out_c), file_id(in_c)))
      return "OUT " + out.string() + " lies inside the input " + in.string() +
             " by another path to the same directory (a bind mount): write the merged set elsewhere";
    if (contains(ids_up_from(in_c), file_id(out_c)))
      return "the input " + in.string() + " lies inside OUT " + out.string() +
             " by another path to the same directory (a bind mount): choose an OUT that holds no shard";
  }
  return "";
}

}  // namespace mpb
