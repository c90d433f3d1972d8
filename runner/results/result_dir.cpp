#include "runner/results/result_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "runner/io/atomic_file.h"
#include "runner/experiment/config.h"

namespace fs = std::filesystem;

namespace mpb {

ResultDirLock::ResultDirLock(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path path = dir / ".runner.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);  // never a planted link
  if (fd_ < 0) throw std::runtime_error(path.string() + ": cannot open: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {0};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw std::runtime_error(path.string() + ": cannot lock: " + std::strerror(err));
    std::string holder = n > 0 ? std::string(pid, size_t(n)) : "unknown";
    holder.erase(std::remove(holder.begin(), holder.end(), '\n'), holder.end());
    throw ResultDirBusy(dir.string() + " is being written by another runner (pid " + holder +
                        ", lock " + path.string() + "); wait for it to finish, or give another --out");
  }
  // Ours now: say who holds it. A failed write only costs the next runner's message its PID.
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // not fatal: the lock itself is held
  }
}

ResultDirLock::~ResultDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

namespace {

// stale/20261123T170102Z/, or -2, -3... when a run in the same second made one.
fs::path new_stale_dir(const fs::path& dir) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  fs::path p = dir / "stale" / stamp;
  for (int i = 2; fs::exists(p); ++i) p = dir / "stale" / (std::string(stamp) + "-" + std::to_string(i));
  return p;
}

struct ResultFile {
  std::string cell_id, config_hash;
};

std::optional<ResultFile> read_result_file(const fs::path& path) {
  if (path.extension() != ".json") return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(path.string()));
    return ResultFile{j.at("cell_id").get<std::string>(), j.at("config_hash").get<std::string>()};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// `p` relative to `dir` by its parent, not itself: fs::relative would resolve
// a symlink entry to its target.
std::string entry_relative(const fs::path& p, const fs::path& dir) {
  return (fs::relative(p.parent_path(), dir) / p.filename()).lexically_normal().string();
}

using MoveFn = std::function<void(const fs::path&, const std::string&, const std::string&)>;

// Every "*.tmp" entry at the set's top level (manifest.json.tmp, ...) and,
// when it is not a regular file (a planted symlink, a FIFO, a directory, a
// symlink loop), every *.tmp and *.json entry in cells/, partial/ and failed/:
// judged by lstat, never opened or followed (issue 43, items 1 and 14: a
// directory at cells/<slug>.json let a run train and then fail to write its
// result; a symlink loop there made --resume exit 1 with a raw error).
// Regular *.tmp files under those three are left to the loop below, which
// reads them and says "an unfinished write".
void sweep_special_entries(const fs::path& dir, const MoveFn& move) {
  for (const std::string sub : {"", "cells", "partial", "failed"}) {
    const fs::path where = sub.empty() ? dir : dir / sub;
    if (!fs::is_directory(fs::symlink_status(where))) continue;
    std::vector<fs::path> odd;
    for (const auto& e : fs::directory_iterator(where)) {
      const bool regular = fs::is_regular_file(e.symlink_status());
      if (e.path().extension() == ".tmp" && (sub.empty() || !regular)) odd.push_back(e.path());
      else if (e.path().extension() == ".json" && !sub.empty() && !regular) odd.push_back(e.path());
    }
    std::sort(odd.begin(), odd.end());
    for (const fs::path& t : odd)
      move(t, sub, t.extension() == ".tmp"
                       ? "a leftover temporary entry (an unfinished write, or a link or special file; not followed)"
                       : "not a regular file (a directory, link or special file; not followed)");
  }
}

// manifest.json when it is not a regular file, or does not parse as a JSON
// object (issue 43 item 14: a garbage manifest was overwritten, and a
// directory there failed the run after it trained). The run writes a new one.
void sweep_manifest(const fs::path& dir, const MoveFn& move) {
  const fs::path manifest = dir / "manifest.json";
  const fs::file_status st = fs::symlink_status(manifest);
  if (!fs::exists(st)) return;
  if (!fs::is_regular_file(st)) {
    move(manifest, "", "manifest.json is not a regular file (a directory, link or special file; not followed)");
    return;
  }
  try {
    if (nlohmann::json::parse(read_file(manifest.string())).is_object()) return;
  } catch (const std::exception&) {
  }
  move(manifest, "", "manifest.json is not a manifest (not a JSON object); this run writes a new one");
}

// stale/<time>/why.txt: every move, one line each.
void write_why(const fs::path& stale, const std::vector<StaleMove>& moves) {
  std::string why;
  for (const StaleMove& m : moves) why += m.from + " -> " + m.to + ": " + m.reason + "\n";
  write_file_atomic((stale / "why.txt").string(), why);
}

}  // namespace

std::vector<StaleMove> sweep_result_dir(const fs::path& dir, const std::vector<Cell>& cells,
                                        const std::vector<const Cell*>& running, EarlierResults earlier,
                                        SweepMode mode) {
  const bool plan = mode == SweepMode::Plan;
  struct Current {
    const Cell* cell;
    std::string hash;
    bool running;
  };
  std::map<std::string, Current> by_id;
  for (const Cell& c : cells) by_id[c.id] = {&c, config_hash(cell_config_to_json(c.config)), false};
  for (const Cell* c : running) by_id.at(c->id).running = true;

  std::vector<StaleMove> moves;
  std::set<fs::path> renamed_to;  // Plan: the names a rename would have made
  fs::path stale;  // made on the first move
  auto move_to_stale = [&](const fs::path& from, const std::string& sub, const std::string& reason) {
    if (stale.empty()) stale = new_stale_dir(dir);
    const fs::path to = stale / sub / from.filename();
    if (!plan) {
      fs::create_directories(stale / sub);
      fs::rename(from, to);
    }
    moves.push_back({entry_relative(from, dir), entry_relative(to, dir), reason});
  };

  sweep_special_entries(dir, move_to_stale);
  sweep_manifest(dir, move_to_stale);
  std::set<std::string> finished;  // ids whose cells/ file is the current cell's
  for (const std::string sub : {"cells", "partial", "failed"}) {
    if (!fs::is_directory(fs::symlink_status(dir / sub))) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir / sub))
      if (fs::is_regular_file(e.symlink_status())) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::optional<ResultFile> r = read_result_file(f);
      if (!r) {
        move_to_stale(f, sub, f.extension() == ".tmp" ? "an unfinished write (the runner was killed before renaming it)"
                                                      : "not a result file (does not parse)");
        continue;
      }
      const auto it = by_id.find(r->cell_id);
      if (it == by_id.end()) {
        move_to_stale(f, sub, "cell '" + r->cell_id + "' is not in the experiment any more");
        continue;
      }
      const Current& cur = it->second;
      if (r->config_hash != cur.hash) {
        move_to_stale(f, sub, "cell '" + r->cell_id + "' ran with another configuration (config_hash " +
                                  r->config_hash + ", the experiment file now gives " + cur.hash + ")");
        continue;
      }
      if (cur.running && earlier == EarlierResults::Replace) {
        move_to_stale(f, sub, "cell '" + r->cell_id + "' runs again (no --resume)");
        continue;
      }
      if (sub != "cells" && finished.count(r->cell_id)) {
        // A kill between writing the cell and removing its sidecar, or a
        // hang record of a cell that has finished since.
        move_to_stale(f, sub, "cell '" + r->cell_id + "' has finished: its cells/ file has every repeat");
        continue;
      }
      const fs::path want = dir / sub / (cur.cell->slug + ".json");
      if (sub == "cells") finished.insert(r->cell_id);
      if (f == want) continue;
      if (fs::exists(want) || renamed_to.count(want)) {
        move_to_stale(f, sub, "a second file of cell '" + r->cell_id + "' (the cell's file is " +
                                  fs::relative(want, dir).string() + ")");
      } else {
        if (plan) renamed_to.insert(want);
        else fs::rename(f, want);
        moves.push_back({fs::relative(f, dir).string(), fs::relative(want, dir).string(),
                         "renamed to the cell's current file name"});
      }
    }
  }
  if (!stale.empty() && !plan) write_why(stale, moves);
  return moves;
}

}  // namespace mpb
