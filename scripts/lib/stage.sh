# Stage banners for scripts/build.sh, quickstart.sh and test.sh (sourced, not run):
# "==> [time since the first script started] stage", then how long it took.
# Kept in one file so the three scripts print the same banners; MPB_T0 is
# exported so that a script run by another (quickstart.sh runs build.sh)
# counts from the same start.
export MPB_T0=${MPB_T0:-$(date +%s)}
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
stage() {  # stage "NAME: what" COMMAND...
  local title=$1 t
  shift
  t=$(date +%s)
  printf '\n==> [%s] %s\n' "$(mmss $((t - MPB_T0)))" "$title"
  "$@"
  printf '==> %s took %s\n' "${title%%:*}" "$(mmss $(($(date +%s) - t)))"
}
