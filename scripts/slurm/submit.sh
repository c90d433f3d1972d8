#!/usr/bin/env bash
# Runs an mpbench experiment on a Slurm cluster: an array job of N shards
# (scripts/slurm/shard.sbatch: runner --shard I/N --resume), then a merge job
# that waits for all of them (--dependency=afterok; scripts/slurm/merge.sbatch:
# job states, runner merge, report.py). docs/SCALE.md.
#
#   submit.sh EXPERIMENT.yaml --shards N [--gpus-per-task G] [--partition P]
#             [--out DIR] [--runner PATH] [-- EXTRA SBATCH ARGS...]
#
#   --shards N         array tasks 0..N-1 (at most the number of cells)
#   --gpus-per-task G  GPUs per shard (default 1; 0: request none, a CPU run)
#   --partition P      the partition of both jobs
#   --out DIR          where everything goes (default results/slurm): DIR/shards/,
#                      DIR/merged/<name>/, DIR/logs/ (shard-<I>.out, merge.out),
#                      DIR/job_states.json
#   --runner PATH      the runner binary (default build/runner of this checkout)
#   -- ARGS            passed to sbatch for both jobs (--account, --qos, --time, ...)
#
# Paths are made absolute: the jobs run on other nodes, which must see this
# checkout, the runner and DIR at the same paths (a shared file system).
# Prints the two job ids last, as "jobs: ARRAY_ID MERGE_ID".
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage() {
  sed -n '7,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,3\}/usage: /;2s/^usage: /       /' >&2
  exit 2
}
die() {
  echo "submit.sh: $*" >&2
  exit 2
}
(($#)) || usage
experiment=$1
shift
shards="" gpus=1 partition="" out=results/slurm runner=$root/build/runner
extra=()
while (($#)); do
  case $1 in
    --shards) shards=${2:?--shards needs a number}; shift 2 ;;
    --gpus-per-task) gpus=${2:?--gpus-per-task needs a number}; shift 2 ;;
    --partition) partition=${2:?--partition needs a name}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --runner) runner=${2:?--runner needs a path}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown argument '$1' (sbatch's own go after --)" ;;
  esac
done
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "--shards: expected a whole number of at least 1, got '${shards}'"
[[ $gpus =~ ^[0-9]+$ ]] || die "--gpus-per-task: expected a whole number, got '$gpus'"
[[ -f $experiment ]] || die "$experiment: no such file"
[[ -x $runner ]] || die "$runner: no runner binary there (build it: bash scripts/build.sh runner, or give --runner)"
command -v sbatch >/dev/null || die "sbatch not found: is this a Slurm login node?"
experiment=$(realpath "$experiment")
runner=$(realpath "$runner")
out=$(realpath -m "$out")

# The file loads, N shards fit it, and its name, before anything is submitted
# (--assume-gpu: a dry run that measures nothing on this login node).
if ! listing=$("$runner" "$experiment" --dry-run --shard "0/$shards" --assume-gpu a100 2>&1); then
  echo "$listing" >&2
  die "the runner refused $experiment with --shard 0/$shards (above)"
fi
name=${listing%%:*}
[[ ! -e $out/merged/$name ]] || die "$out/merged/$name exists: the merge would refuse to replace it (move it, or give --out)"
mkdir -p "$out/logs" "$out/shards"

common=()
[[ -n $partition ]] && common+=(--partition="$partition")
gpu_args=()
((gpus > 0)) && gpu_args+=(--gpus-per-task="$gpus")
array_out=$(sbatch --parsable --array="0-$((shards - 1))" --job-name="mpb-$name" --ntasks=1 \
  --output="$out/logs/shard-%a.out" "${gpu_args[@]}" "${common[@]}" "${extra[@]}" \
  "$root/scripts/slurm/shard.sbatch" "$experiment" "$out" "$runner" "$shards")
array=${array_out%%;*}
merge_out=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --job-name="mpb-$name-merge" --output="$out/logs/merge.out" "${common[@]}" "${extra[@]}" \
  "$root/scripts/slurm/merge.sbatch" "$name" "$out" "$runner" "$shards" "$array" "$root")
merge=${merge_out%%;*}
echo "submit.sh: $name: array job $array ($shards shards: $out/shards/), merge job $merge after it" \
  "($out/merged/$name/); logs in $out/logs/"
echo "jobs: $array $merge"
