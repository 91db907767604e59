#!/usr/bin/env python3
"""A fork server for the Python tests: PyTorch imported once, a test forked from it.

Most of ncc's tests are Python scripts that compare ncc with PyTorch, and
`import torch` costs about 1.6 s of CPU a process on the CI machine: more than
many such tests spend on everything else.  This server imports torch and numpy
(and onnx, where it is installed) once; each test is then a fork of it that
runs the script as `__main__`, with the client's argv, working directory,
environment and standard streams.

  pyserve.py start NAME     start the server (a daemon) and wait until it answers
  pyserve.py stop NAME      stop it
  pyserve.py run NAME SCRIPT [ARGS...]
                            run SCRIPT with ARGS through the server, with the
                            exit status (or the signal) the script ends with;
                            where no server answers, or it refuses the request,
                            exec the interpreter on SCRIPT instead: a test run
                            through `run` gives the same result either way

NAME is a Linux abstract socket name (no file to clean up, no length limit
from the build folder's path).  tests/CMakeLists.txt starts one server a build
folder as a ctest fixture (pyserve.start, pyserve.stop).

What is the same as a fresh interpreter: sys.argv, sys.path[0] (the script's
folder), __file__, os.environ (subprocesses see the client's), the working
directory, file descriptors 0-2, the exit status, and death by a signal (the
client kills itself with it).  What is not: modules imported before the fork
(torch, numpy) saw the server's environment, so a request whose environment
differs from the server's in a variable read at import time (LD_PRELOAD,
PYTHON*, OMP_*, TORCH_*, ...) is refused and runs in a fresh interpreter.  And
the test ends with os._exit after flushing its streams: handlers registered
with atexit do not run (no test script registers one; temporary folders are
removed by `with` blocks).  When ctest kills a client (a timeout), the
server kills the test's process group.  Only the server's own user may
connect (SO_PEERCRED).
"""
import os
import signal
import socket
import struct
import sys

# variables a preloaded module reads when it is imported: a request that
# differs from the server in one of them runs in a fresh interpreter
IMPORT_TIME_ENV = ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME",
                   "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE",
                   "PYTHONIOENCODING", "PYTHONUTF8", "LANG", "LC_ALL", "LC_CTYPE")
IMPORT_TIME_PREFIXES = ("OMP_", "OPENBLAS_", "MKL_", "GOMP_", "TORCH_", "PYTORCH_",
                        "NUMPY_", "KMP_")
IDLE_EXIT_S = 3600          # a server nobody stopped leaves after an hour unused


def _address(name):
    return "\0" + name


def _import_env(env):
    return {k: v for k, v in env.items()
            if k in IMPORT_TIME_ENV or k.startswith(IMPORT_TIME_PREFIXES)}


def _send_msg(sock, payload, fds=()):
    data = struct.pack("<I", len(payload)) + payload
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def _recv_msg(sock, want_fds=0):
    fds = []
    if want_fds:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 16, want_fds)
    else:
        data = sock.recv(1 << 16)
    if len(data) < 4:
        more = _recv_exact(sock, 4 - len(data))
        if more is None:
            return None, fds
        data += more
    (n,) = struct.unpack("<I", data[:4])
    body = data[4:]
    if len(body) < n:
        more = _recv_exact(sock, n - len(body))
        if more is None:
            return None, fds
        body += more
    return body, fds


# ---------------------------------------------------------------- client

def client_run(name, script, args):
    import json
    argv = [script] + args
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(_address(name))
        req = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)})
        _send_msg(sock, req.encode(), fds=(0, 1, 2))
        reply, _ = _recv_msg(sock)
    except OSError:
        reply = None
    if reply is None or reply.startswith(b"refused"):
        # no server, or one that cannot give this request what a fresh
        # interpreter would: run it in one
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable] + argv)
    kind, value = reply.decode().split()
    if kind == "signal":
        sig = int(value)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        sys.exit(128 + sig)
    sys.exit(int(value))


# ---------------------------------------------------------------- server

def _run_script(req):
    """In the forked test process: become the script's interpreter, run it, exit."""
    import traceback
    import types
    os.setpgid(0, 0)               # the test and its subprocesses: one group to kill
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = list(req["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    script = os.path.abspath(sys.argv[0])      # __main__.__file__ is absolute, as in python3 SCRIPT
    code = 0
    try:
        with open(script, "rb") as f:
            source = f.read()
        main = types.ModuleType("__main__")
        main.__file__ = script
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        exec(compile(source, script, "exec"), main.__dict__)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        # the traceback from the script's frames on, as the interpreter prints it
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code & 0xFF)


def _serve_one(conn):
    """In a forked supervisor: read one request, fork the test, report how it ended."""
    import json
    import select
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    msg, fds = _recv_msg(conn, want_fds=3)
    if msg == b"stop":
        os.kill(os.getppid(), signal.SIGTERM)
        os._exit(0)
    if msg is None or len(fds) != 3:
        os._exit(0)
    req = json.loads(msg)
    if _import_env(req["env"]) != _import_env(os.environ):
        _send_msg(conn, b"refused environment")
        os._exit(0)
    pid = os.fork()
    if pid == 0:
        conn.close()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        _run_script(req)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([pidfd, conn], [], [])
        if pidfd in ready:
            break
        # the client went away (ctest's timeout killed it): so does the test
        if not conn.recv(1, socket.MSG_PEEK):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        reply = "signal %d" % os.WTERMSIG(status)
    else:
        reply = "exit %d" % os.WEXITSTATUS(status)
    try:
        _send_msg(conn, reply.encode())
    except OSError:
        pass
    os._exit(0)


def _serve(name, ready_fd):
    import select
    import time
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for attempt in range(50):       # a server just told to stop may hold the name a moment
        try:
            sock.bind(_address(name))
            break
        except OSError as e:
            if attempt == 49:
                os.write(ready_fd, ("cannot listen on @%s: %s\n" % (name, e)).encode())
                os._exit(1)
            time.sleep(0.1)
    sock.listen(128)
    # what every test would import: loaded once, here
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch.nn.functional  # noqa: F401
    try:
        import onnx  # noqa: F401  (the ONNX tests; skipped without python3-onnx)
    except ImportError:
        pass
    os.write(ready_fd, ("ready: torch %s, pid %d\n" % (torch.__version__, os.getpid())).encode())
    os.close(ready_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # supervisors reap themselves
    uid = os.getuid()
    while True:
        ready, _, _ = select.select([sock], [], [], IDLE_EXIT_S)
        if not ready:
            os._exit(0)
        try:
            conn, _ = sock.accept()
        except InterruptedError:
            continue
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, peer_uid, _ = struct.unpack("3i", creds)
        if peer_uid != uid:
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            sock.close()
            _serve_one(conn)
        conn.close()


def start(name):
    stop(name, quiet=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for i in range(3):
            os.dup2(devnull, i)
        try:
            _serve(name, w)
        except BaseException as e:  # noqa: BLE001  (reported to the waiting parent)
            try:
                os.write(w, ("server failed: %r\n" % (e,)).encode())
            except OSError:
                pass
        os._exit(1)
    os.close(w)
    os.waitpid(pid, 0)
    said = b""
    while True:
        part = os.read(r, 4096)
        if not part:
            break
        said += part
    said = said.decode(errors="replace").strip()
    if said.startswith("ready"):
        print("pyserve @%s: %s" % (name, said))
    else:
        # the tests still run, each in a fresh interpreter
        print("pyserve @%s: not started (%s); the Python tests run without it" % (name, said or "no reply"))


def stop(name, quiet=False):
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(_address(name))
        _send_msg(sock, b"stop")
        sock.recv(1)                # EOF once the server has read it
        sock.close()
        if not quiet:
            print("pyserve @%s: stopped" % name)
    except OSError:
        if not quiet:
            print("pyserve @%s: none running" % name)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        client_run(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 3 and sys.argv[1] == "start":
        start(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "stop":
        stop(sys.argv[2])
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
