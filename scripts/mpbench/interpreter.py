"""Find a Python that has the scripts' dependencies, so a `python3` first on PATH without them
(a pyenv or conda one) does not end in a raw ImportError (issue 43, "Also").

Why: the scripts' dependencies (numpy, scipy, matplotlib) are Debian's packages, installed for
/usr/bin/python3 by scripts/install_deps.sh; the entry scripts start with `#!/usr/bin/env python3`
so a user's own interpreter is used when it has them. When it has not, require() re-executes the
script with the first interpreter that has them ($MPB_PYTHON, then /usr/bin/python3), or exits 2
saying which modules are missing and what to do. Only the standard library is imported here.
"""

import importlib.util
import os
import subprocess
import sys

NEEDED = ("numpy", "scipy", "matplotlib")
CANDIDATES = ("/usr/bin/python3",)
_GUARD = "MPB_PYTHON_REEXEC"        # set for the re-executed process: never a second hop


def missing(modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def has_modules(python, modules):
    """Whether interpreter `python` can find every module (it is asked, never imported here)."""
    code = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))"
    try:
        return subprocess.run([python, "-c", code, *modules], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def candidates():
    """$MPB_PYTHON first, then Debian's python3; each once, never this interpreter's own path.
    Paths, not realpaths: a venv's python links to /usr/bin/python3 but has other site packages."""
    seen = []
    for path in (os.environ.get("MPB_PYTHON"), *CANDIDATES):
        if path and os.access(path, os.X_OK) and path != sys.executable and path not in seen:
            seen.append(path)
    return seen


def require(modules=NEEDED):
    """Return when this interpreter has `modules`; else re-execute the script under one that has,
    or print what is missing and exit 2."""
    gone = missing(modules)
    if not gone:
        return
    script = sys.argv[0] if sys.argv and os.path.isfile(sys.argv[0]) else None
    if script and not os.environ.get(_GUARD):
        for python in candidates():
            if has_modules(python, modules):
                os.environ[_GUARD] = python
                os.execv(python, [python, script, *sys.argv[1:]])
    name = os.path.basename(sys.argv[0]) if sys.argv else "mpbench"
    print(f"{name}: error: this Python ({sys.executable}) has no {', '.join(gone)}, and neither has "
          f"{' nor '.join(candidates()) or 'any other interpreter found'}; run scripts/install_deps.sh (Debian's "
          "python3-numpy, -scipy, -matplotlib) or set MPB_PYTHON to a Python that has them", file=sys.stderr)
    sys.exit(2)
