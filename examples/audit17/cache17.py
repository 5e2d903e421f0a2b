"""Audit 17: the grammar's LALR cache (ldpql/grammar/parser.py _cache_file; lark 1.3.1, no atomicwrites installed).
Each case runs a fresh `python -c` that parses a statement, with XDG_CACHE_HOME pointing at a scratch directory.

  A foreign pickle at the cache path: runs code in the ldpql process (lark pickle.load()s the file before checking its
    hash line), here creating a marker file.
  A symlink at the cache path: the first process that (re)builds the tables writes through it (open(..., 'wb'),
    truncating the target): another file of the user is overwritten with the pickle.
  A FIFO at the cache path: the first parse blocks forever (killed after 15 s here).
  A truncated / garbage cache file, a read-only cache directory, a directory at the cache path: parse still works.
  Concurrency: 6 processes started together on an empty cache, 5 times: every parse must succeed.
  Python-version thrash: lark hashes the Python version into the file's CONTENT, not its name.
"""
import os, pickle, stat, subprocess, sys, tempfile, time
import lark

HERE = os.path.dirname(os.path.abspath(__file__))
PARSE = ("import ldpql.grammar.parser as p, time; t=time.time(); "
         "s=p.parse('SELECT LDP_QUANTILE(x, 0.5) FROM t EPSILON 1'); print(type(s[0]).__name__, round(time.time()-t, 2))")
NAME = f"grammar-lark-{lark.__version__}.cache"


def run(cache_home, timeout=60):
    env = dict(os.environ, XDG_CACHE_HOME=cache_home)
    try:
        r = subprocess.run([sys.executable, "-c", PARSE], env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=HERE)
        return r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1:] 
    except subprocess.TimeoutExpired:
        return "TIMEOUT", []


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def fresh():
    d = tempfile.mkdtemp(prefix="audit17_cache_")
    os.makedirs(os.path.join(d, "ldpql"))
    return d, os.path.join(d, "ldpql", NAME)


def main():
    d, path = fresh()
    print("cold build:", run(d), "| warm load:", run(d))

    d, path = fresh()
    marker = os.path.join(d, "PWNED")
    with open(path, "wb") as f:
        f.write(b"not-the-hash\n")
        pickle.dump(Payload(marker), f)
    rc = run(d)
    print("foreign pickle: parse", rc, "| payload ran (marker exists):", os.path.exists(marker))

    d, path = fresh()
    victim = os.path.join(d, "victim.txt")
    with open(victim, "w") as f:
        f.write("the user's own file\n")
    os.symlink(victim, path)
    rc = run(d)
    with open(victim, "rb") as f:
        head = f.read(40)
    print("symlink at cache path: parse", rc, "| victim now starts with:", head[:40])

    d, path = fresh()
    os.mkfifo(path)
    t0 = time.time()
    rc = run(d, timeout=15)
    print(f"FIFO at cache path: {rc} after {time.time() - t0:.0f}s")

    d, path = fresh()
    run(d)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    print("truncated cache:", run(d))
    open(path, "wb").write(b"\x00garbage" * 10)
    print("garbage cache:", run(d))

    d, path = fresh()
    os.chmod(os.path.join(d, "ldpql"), stat.S_IRUSR | stat.S_IXUSR)
    print("read-only cache dir (as this uid):", run(d), "| file written:", os.path.exists(path))
    os.chmod(os.path.join(d, "ldpql"), 0o755)

    d, path = fresh()
    os.makedirs(path)
    print("directory at cache path:", run(d))

    fails = 0
    for rep in range(5):
        d, path = fresh()
        env = dict(os.environ, XDG_CACHE_HOME=d)
        procs = [subprocess.Popen([sys.executable, "-c", PARSE], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=HERE) for _ in range(6)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            if p.returncode != 0 or "Select" not in out:
                fails += 1
                print("  concurrent failure:", p.returncode, err.strip().splitlines()[-1:])
        print(f"concurrent rep {rep}: after: cache file loads ->", run(d))
    print("concurrent processes failing:", fails, "of 30")


if __name__ == "__main__":
    main()
