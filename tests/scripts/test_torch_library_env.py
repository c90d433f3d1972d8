"""bench/torch_library_env.py: PyTorch's side of bench/torch_bert_gpu.py runs
without the CUDA directories bin/mpbench-env put first on LD_LIBRARY_PATH, the
runner's side gets them back, and /proc/<pid>/maps text names the libcudnn* /
libcublas* each process mapped. Pure functions: no torch, no GPU. The last test
runs the re-exec for real in a child Python that stands in for the script.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from script_test_helpers import PYTHON, SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import torch_library_env as libenv  # noqa: E402

# /proc/self/maps of a PyTorch process that loaded its wheel's cuDNN, the
# toolkit's cuBLASLt (the shadowing item 8 is about), and some non-matches.
MAPS = """\
55d0c0a00000-55d0c0a28000 r--p 00000000 08:01 131 /usr/bin/python3.11
7f1a00000000-7f1a00200000 r--p 00000000 08:01 901 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9
7f1a00200000-7f1a00400000 r-xp 00200000 08:01 901 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9
7f1a10000000-7f1a12000000 r-xp 00000000 08:01 902 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9
7f1a20000000-7f1a30000000 r-xp 00000000 08:01 903 /usr/local/cuda-13.0/lib64/libcublasLt.so.13.1.0.3
7f1a30000000-7f1a30100000 r-xp 00000000 08:01 904 /usr/local/cuda-13.0/lib64/libcublas.so.13.1.0.3 (deleted)
7f1a40000000-7f1a40100000 r-xp 00000000 08:01 905 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a50000000-7f1a50021000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7f1a60000000-7f1a60100000 r-xp 00000000 08:01 906 /opt/my libs/libcudart.so.13
"""


class TorchEnvironment(unittest.TestCase):
    def test_strips_what_mpbench_env_added_and_keeps_the_rest(self):
        env = {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/opt/nccl/lib:/home/u/lib",
               libenv.ADDED_DIRS_VAR: "/usr/local/cuda/lib64:/opt/nccl/lib", "HOME": "/home/u"}
        torch_env, stripped = libenv.torch_environment(env)
        self.assertEqual(torch_env["LD_LIBRARY_PATH"], "/home/u/lib")
        self.assertEqual(stripped, ["/usr/local/cuda/lib64", "/opt/nccl/lib"])
        self.assertEqual(torch_env["HOME"], "/home/u")
        # The runner gets the started-with path back, exactly.
        runner_env = libenv.runner_environment(torch_env)
        self.assertEqual(runner_env["LD_LIBRARY_PATH"], env["LD_LIBRARY_PATH"])
        self.assertNotIn(libenv.RUNNER_PATH_VAR, runner_env)
        self.assertNotIn(libenv.DONE_VAR, runner_env)

    def test_toolkit_dirs_go_even_without_mpbench_env(self):
        env = {"LD_LIBRARY_PATH": "/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64/:"
                                  "/usr/local/cudann/lib:/home/u/lib"}
        torch_env, stripped = libenv.torch_environment(env)
        self.assertEqual(torch_env["LD_LIBRARY_PATH"], "/usr/local/cudann/lib:/home/u/lib")
        self.assertEqual(len(stripped), 2)
        self.assertTrue(libenv.is_toolkit_dir("/usr/local/cuda"))
        self.assertFalse(libenv.is_toolkit_dir("/usr/local/lib"))

    def test_nothing_left_unsets_and_unset_is_restored_unset(self):
        torch_env, stripped = libenv.torch_environment({"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"})
        self.assertNotIn("LD_LIBRARY_PATH", torch_env)  # not "": an empty entry would mean the current directory
        self.assertEqual(stripped, ["/usr/local/cuda/lib64"])
        self.assertEqual(libenv.runner_environment(torch_env)["LD_LIBRARY_PATH"], "/usr/local/cuda/lib64")
        torch_env, stripped = libenv.torch_environment({})
        self.assertEqual(stripped, [])
        self.assertNotIn("LD_LIBRARY_PATH", libenv.runner_environment(torch_env))


class MappedLibraries(unittest.TestCase):
    def test_names_each_cuda_library_once(self):
        self.assertEqual(libenv.mapped_libraries(MAPS), [
            "/opt/my libs/libcudart.so.13",  # a space in the path survives
            "/usr/local/cuda-13.0/lib64/libcublas.so.13.1.0.3 (deleted)",
            "/usr/local/cuda-13.0/lib64/libcublasLt.so.13.1.0.3",
            "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
            "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9",
        ])
        self.assertEqual(libenv.mapped_libraries(MAPS, ("libcudnn",)), [
            "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
            "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9",
        ])
        self.assertEqual(libenv.mapped_libraries(""), [])

    def test_this_process_maps_libc_not_cudnn(self):
        # A live /proc/self/maps parses: the interpreter maps no CUDA library here.
        self.assertEqual(libenv.process_libraries(), [])
        with open("/proc/self/maps") as f:
            self.assertTrue(libenv.mapped_libraries(f.read(), ("libc.", "libc-")))

    def test_cudnn_version_strings(self):
        self.assertEqual(libenv.cudnn_version_string(91900), "9.19.0")
        self.assertEqual(libenv.cudnn_version_string(90100), "9.1.0")
        self.assertEqual(libenv.cudnn_version_string(8907), "8.9.7")

    def test_runner_libraries_from_a_manifest(self):
        m = {"libraries": {"header_vs_runtime": {"cudnn": {"header": "9.19.0", "runtime": "9.1.0"}},
                           "warnings": ["cuDNN: runtime 9.1.0 is older"]}}
        r = libenv.runner_libraries(m)
        self.assertEqual(r["header_vs_runtime"]["cudnn"]["runtime"], "9.1.0")
        self.assertEqual(r["warnings"], ["cuDNN: runtime 9.1.0 is older"])
        self.assertIsNone(libenv.runner_libraries({})["header_vs_runtime"])


class Reexec(unittest.TestCase):
    def test_the_child_starts_again_without_the_toolkit_path(self):
        # A stand-in for bench/torch_bert_gpu.py: re-exec, then report what the
        # new process sees. Proves the loader-relevant part: the *process* (not
        # just os.environ) starts with the stripped LD_LIBRARY_PATH.
        child = ("import json, os, sys; sys.path.insert(0, %r); import torch_library_env as e; "
                 "e.reexec_with_torch_environment(); "
                 "print(json.dumps({'ld': os.environ.get('LD_LIBRARY_PATH'), 'pid_env': open('/proc/self/environ').read(), "
                 "'stripped': e.stripped_dirs(), 'runner': e.runner_environment(os.environ).get('LD_LIBRARY_PATH')}))"
                 % os.path.join(SOURCE_DIR, "bench"))
        env = dict(os.environ, LD_LIBRARY_PATH="/usr/local/cuda/lib64:/home/u/lib",
                   **{libenv.ADDED_DIRS_VAR: "/usr/local/cuda/lib64"})
        env.pop(libenv.DONE_VAR, None)
        env.pop(libenv.RUNNER_PATH_VAR, None)
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "stand_in.py")  # a file: re-exec runs sys.argv again, which -c would lose
            with open(script, "w") as f:
                f.write(child + "\n")
            p = subprocess.run([PYTHON, script], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(out["ld"], "/home/u/lib")
        self.assertIn("LD_LIBRARY_PATH=/home/u/lib\0", out["pid_env"])  # the environment the process started with
        self.assertEqual(out["stripped"], ["/usr/local/cuda/lib64"])
        self.assertEqual(out["runner"], "/usr/local/cuda/lib64:/home/u/lib")


if __name__ == "__main__":
    unittest.main()
