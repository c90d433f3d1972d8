// The experiment's results directory (<out>/<name>/) as a place that one
// runner at a time writes to, and whose cells/ and partial/ hold only results
// of the experiment as its file says now. Nothing here deletes a result:
// files that no longer belong move to stale/<time>/ with the reason.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/experiment/config.h"

namespace mpb {

// Another runner holds the directory's lock.
struct ResultDirBusy : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An advisory lock (flock) on <dir>/.runner.lock, held until destruction (or
// the process's exit, however it ends: the kernel drops it). The file holds
// the holder's PID for the message a second runner prints. Creates `dir`.
class ResultDirLock {
 public:
  explicit ResultDirLock(const std::filesystem::path& dir);  // throws ResultDirBusy, std::runtime_error
  ~ResultDirLock();
  ResultDirLock(const ResultDirLock&) = delete;
  ResultDirLock& operator=(const ResultDirLock&) = delete;

 private:
  int fd_ = -1;
};

// What happens to the files of the cells this run will train.
enum class EarlierResults { Keep, Replace };  // --resume | a fresh run

struct StaleMove {
  std::string from, to, reason;  // paths relative to the results directory
};

// Sorts out what an earlier run left in cells/, partial/ and failed/ (hung
// cells, runner/results/hung_cell.h) before this run
// writes anything, against `cells` (the experiment's cells as loaded now):
//  - a file whose cell id is not in the experiment, or whose config_hash
//    differs from the cell's (the YAML was edited), or that does not parse
//    (a `.tmp` a kill left behind included): moved to stale/<time>/;
//  - the file of a cell in `running` when `earlier` is Replace: moved too,
//    so that a fresh run never mixes with the run before it;
//  - a partial/ sidecar or failed/ record of a cell whose cells/ file is
//    current (a kill between writing the one and removing the other): moved too;
//  - a current cell's file under another name (a slug from an older
//    runner): renamed to the cell's slug, or moved to stale/ if that exists.
//  - an entry of cells/, partial/ or failed/ named *.json or *.tmp that is
//    not a regular file (a directory, symlink, FIFO, a symlink loop), and
//    manifest.json when it is not a regular file or not a JSON object: moved
//    too, judged by lstat and never followed (the run writes its own).
// Returns every move, in order; stale/<time>/why.txt lists them too.
// SweepMode::Plan returns the same moves and changes nothing: the run checks
// for strangers among what would stay before it moves anything (issue 43
// item 2: a refused run had already swept the baseline's file to stale/).
enum class SweepMode { Plan, Move };
std::vector<StaleMove> sweep_result_dir(const std::filesystem::path& dir, const std::vector<Cell>& cells,
                                        const std::vector<const Cell*>& running, EarlierResults earlier,
                                        SweepMode mode = SweepMode::Move);

}  // namespace mpb
