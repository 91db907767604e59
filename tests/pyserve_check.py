#!/usr/bin/env python3
"""pyserve.self_check: the fork server (tests/pyserve.py) gives a test what a
fresh interpreter would.  A server of its own (a name with this process's
pid), a probe script run through it, and the checks:
  - argv, working directory, environment, sys.path[0], __file__, __name__;
  - the exit status (0, 77 the skip code, 3) and a traceback from the
    script's own frames, status 1, for an exception;
  - death by a signal (SIGSEGV): the client dies by the same signal;
  - torch already imported (the point of the server), and a request whose
    environment differs in an import-time variable (OMP_NUM_THREADS) run in
    a fresh interpreter instead, as is every request when no server answers;
  - a client killed (ctest's timeout) takes the test's subprocesses with it.
usage: pyserve_check.py [PYTHON]"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVE = os.path.join(HERE, "pyserve.py")
PROBE = r'''
import os, sys, signal, subprocess, time
print("preloaded=%d" % ("torch" in sys.modules))
print("argv=%s" % "|".join(sys.argv))
print("cwd=%s" % os.getcwd())
print("env=%s" % os.environ.get("PYSERVE_PROBE", "-"))
print("path0=%s" % sys.path[0])
print("file=%s name=%s" % (__file__, __name__))
sys.stdout.flush()
what = sys.argv[1]
if what == "exit":
    sys.exit(int(sys.argv[2]))
if what == "raise":
    def inner():
        raise ValueError("probe failed on purpose")
    inner()
if what == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
if what == "sleep":
    p = subprocess.Popen(["sleep", sys.argv[2]])
    open(sys.argv[3], "w").write(str(p.pid))
    p.wait()
'''


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("ok: " + what)


def main():
    py = sys.argv[1] if len(sys.argv) > 1 else sys.executable
    name = "ncc-pyserve-check-%d" % os.getpid()
    work = tempfile.mkdtemp(prefix="pyserve_check_")
    probe = os.path.join(work, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    sub = os.path.join(work, "sub")
    os.mkdir(sub)

    def run(*args, env=None, timeout=120):
        e = dict(os.environ)
        e.pop("OMP_NUM_THREADS", None)
        e.update(env or {})
        return subprocess.run([py, SERVE, "run", name, probe] + list(args), cwd=sub, env=e, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def field(p, key):
        for line in p.stdout.splitlines():
            if line.startswith(key + "="):
                return line[len(key) + 1:]
        return None

    try:
        p = run("exit", "0")
        check(field(p, "preloaded") == "0" and p.returncode == 0, "no server: the script runs in a fresh interpreter")
        s = subprocess.run([py, SERVE, "start", name], stdout=subprocess.PIPE, text=True, timeout=300)
        print(s.stdout.strip())
        check(s.returncode == 0 and "ready" in s.stdout, "the server starts and says so")

        p = run("exit", "0", "two words", env={"PYSERVE_PROBE": "probe value"})
        check(field(p, "preloaded") == "1", "through the server: torch is imported before the script runs")
        check(field(p, "argv") == probe + "|exit|0|two words", "argv is the client's: %s" % field(p, "argv"))
        check(field(p, "cwd") == sub, "the working directory is the client's")
        check(field(p, "env") == "probe value", "the environment is the client's")
        check(field(p, "path0") == work, "sys.path[0] is the script's folder")
        check(field(p, "file") == probe + " name=__main__", "__file__ and __name__ as for python3 SCRIPT")
        for code in (0, 3, 77):
            p = run("exit", str(code))
            check(p.returncode == code and field(p, "preloaded") == "1", "exit status %d comes back" % code)
        p = run("raise")
        check(p.returncode == 1 and "ValueError: probe failed on purpose" in p.stderr
              and "pyserve.py" not in p.stderr and 'File "%s"' % probe in p.stderr,
              "an exception: status 1 and the script's traceback, none of the server's frames")
        p = run("segv")
        check(p.returncode == -11, "death by SIGSEGV comes back as death by SIGSEGV (%d)" % p.returncode)
        p = run("exit", "5", env={"OMP_NUM_THREADS": "1"})
        check(p.returncode == 5 and field(p, "preloaded") == "0",
              "an import-time variable that differs (OMP_NUM_THREADS): a fresh interpreter")

        # a client killed: the test and its subprocess go too
        pidfile = os.path.join(work, "sleep.pid")
        c = subprocess.Popen([py, SERVE, "run", name, probe, "sleep", "300", pidfile], cwd=sub,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if os.path.exists(pidfile) and open(pidfile).read():
                break
            time.sleep(0.05)
        sleeper = int(open(pidfile).read())
        c.kill()
        c.wait()
        gone = False
        for _ in range(100):
            try:
                os.kill(sleeper, 0)
            except ProcessLookupError:
                gone = True
                break
            time.sleep(0.05)
        check(gone, "a killed client takes the test's subprocesses with it")

        s = subprocess.run([py, SERVE, "stop", name], stdout=subprocess.PIPE, text=True, timeout=60)
        check(s.returncode == 0 and "stopped" in s.stdout, "the server stops")
        time.sleep(0.2)
        p = run("exit", "0")
        check(field(p, "preloaded") == "0" and p.returncode == 0, "after stop: a fresh interpreter again")
    except Failure as e:
        print("FAIL: %s" % e)
        subprocess.run([py, SERVE, "stop", name], stdout=subprocess.DEVNULL)
        return 1
    finally:
        subprocess.run(["rm", "-rf", work])
    print("PASS pyserve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
