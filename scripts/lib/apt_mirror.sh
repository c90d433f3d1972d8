# find_mirror SUITE: the first Debian mirror URI that this machine's apt sources name for
# SUITE (one-line sources.list / *.list, or deb822 *.sources), so no host is written in the
# project's files. Sourced by scripts/fresh_machine_test.sh and scripts/cuda12_compile_check.sh.
# Prints the first URI that serves suite $1 for `deb` in the one-line format
# (sources.list, *.list) or in deb822 (*.sources).
find_mirror() {
  local want=$1 f type rest uri s
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    while read -r type rest; do
      [[ $type == deb ]] || continue
      rest=$(sed -E 's/^\[[^]]*\][[:space:]]*//' <<<"$rest")  # [arch=... signed-by=...]
      read -r uri s _ <<<"$rest"
      if [[ $s == "$want" ]]; then
        echo "${uri%/}"
        return 0
      fi
    done <"$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    uri=$(awk -v want="$want" '
      function flush() {
        if ((" " types " ") ~ / deb / && enabled != "no" && uris != "" &&
            index(" " suites " ", " " want " ") > 0) { split(uris, u, " "); print u[1]; done = 1; exit }
        types = uris = suites = enabled = last = ""
      }
      /^#/ { next }
      /^[[:space:]]*$/ { flush(); next }
      /^[[:space:]]/ {  # a continuation line
        if (last == "uris") uris = uris " " $0
        else if (last == "suites") suites = suites " " $0
        next
      }
      {
        i = index($0, ":"); if (i == 0) next
        key = tolower(substr($0, 1, i - 1)); val = substr($0, i + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", val)
        if (key == "types") types = val
        else if (key == "uris") uris = val
        else if (key == "suites") suites = val
        else if (key == "enabled") enabled = tolower(val)
        last = key
      }
      END { if (!done) flush() }' "$f")
    if [[ -n $uri ]]; then
      echo "${uri%/}"
      return 0
    fi
  done
  return 1
}
