#!/usr/bin/env python3
"""Every benchmark command the docs write works after either README command (issue 35 §4).

After `./scripts/run.sh`, build/'s cache holds CERTFLEET_BENCH=OFF (and the tests off), so a bench
program is an unknown target there; after `./scripts/test.sh` it holds the tests and benchmarks
on. This takes every command of docs/performance.md and docs/operations-mongodb.md (inline code
and ```sh blocks whose first word is a script of bench/), and runs each one in its check mode
(CERTFLEET_BENCH_CHECK=1: the arguments parsed as in a real run, the build tree configured through
bench/build.sh, ninja asked whether it knows every target; nothing compiled, installed or measured)
against two fresh build trees, configured with the exact cmake line of scripts/run.sh and of
scripts/test.sh, each reset to that state before every command. A command that starts a
build/bench/ program directly, or names a bench program without bench/run, fails here.

Usage: commands_test.py REPO_ROOT WORK_DIR
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

root = os.path.abspath(sys.argv[1])
work = os.path.abspath(sys.argv[2])
docs = ["docs/performance.md", "docs/operations-mongodb.md"]
interpreters = {"node", "python3", "/usr/bin/python3"}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def bench_programs():
    text = open(os.path.join(root, "bench/CMakeLists.txt")).read()
    return set(re.findall(r"add_executable\((\w+)", text))


def documented_commands():
    """(doc:line, command text) for each code span or sh-block line that runs something in bench/."""
    out = []
    for doc in docs:
        text = open(os.path.join(root, doc)).read()
        spans = []
        fence = False
        for n, line in enumerate(text.splitlines(), 1):
            if line.startswith("```"):
                fence = not fence
                continue
            if fence:
                spans.append((n, line.split("  #")[0].strip()))
        in_code = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for m in re.finditer(r"`([^`]+)`", in_code):
            n = in_code.count("\n", 0, m.start()) + 1
            spans.append((n, " ".join(m.group(1).split())))
        for n, span in spans:
            out.append((f"{doc}:{n}", span))
    return out


def classify(where, span, programs):
    """The command's argv when `span` is one to check, else None; a wrong form is a failure."""
    try:
        argv = shlex.split(span)
    except ValueError:
        return None
    if not argv:
        return None
    head = 1 if argv[0] in interpreters and len(argv) > 1 else 0
    first = argv[head][2:] if argv[head].startswith("./") else argv[head]
    args = argv[head + 1:]
    if first.startswith("build/bench/") and args:
        fail(f"{where}: `{span}` starts a build/bench program directly: after ./scripts/run.sh it is not "
             f"built; write `bench/run {first.split('/')[-1]} …`")
        return None
    if first.startswith("bench/") and first[6:] in programs and args:
        fail(f"{where}: `{span}` names the program bench/{first[6:]}: write `bench/run {first[6:]} …`")
        return None
    if not first.startswith("bench/") or not os.path.isfile(os.path.join(root, first)):
        return None
    if not args or any("…" in a or a.isupper() for a in args):
        return None  # a script named in prose, or a usage line with placeholders (PROGRAM ARGS…)
    if not head and not os.access(os.path.join(root, first), os.X_OK):
        fail(f"{where}: `{span}`: {first} is not executable")
        return None
    return argv[:head] + [first] + args


def configure_line(script):
    """The cmake configure line of scripts/run.sh or scripts/test.sh, as argv."""
    for line in open(os.path.join(root, "scripts", script)):
        line = line.strip()
        if line.startswith("cmake -S . -B build "):
            return shlex.split(line.split(">")[0])
    sys.exit(f"commands_test: no `cmake -S . -B build` line in scripts/{script}")


def configure(tree, script):
    argv = configure_line(script)
    argv[argv.index("-B") + 1] = tree
    # Back to the state the README command leaves: its line sets only some options, so the
    # ones bench/build.sh turns on are set back explicitly where the line leaves them unset.
    extra = [] if any(a.startswith("-DCERTFLEET_BENCH=") for a in argv) else ["-DCERTFLEET_BENCH=ON"]
    subprocess.run(argv + extra, cwd=root, check=True, stdout=subprocess.DEVNULL)


def substitute(argv, tree):
    """The command with its build tree (`build`, `build/…`, `--build DIR`) pointed at `tree`."""
    out = []
    for i, a in enumerate(argv):
        if i > 0 and argv[i - 1] == "--build":
            out.append(tree)
        elif a == "build":
            out.append(tree)
        elif a.startswith("build/"):
            out.append(tree + a[5:])
        else:
            out.append(a)
    return out


def run_check(argv, tree):
    env = dict(os.environ, CERTFLEET_BENCH_CHECK="1", CERTFLEET_BENCH_BUILD=tree)
    return subprocess.run(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300)


def main():
    programs = bench_programs()
    commands = []
    for where, span in documented_commands():
        argv = classify(where, span, programs)
        if argv:
            commands.append((where, span, argv))
    if len(commands) < 15:
        fail(f"only {len(commands)} bench commands found in {docs}: the extraction broke")
    shutil.rmtree(work, ignore_errors=True)
    trees = {"run.sh": os.path.join(work, "after-run"), "test.sh": os.path.join(work, "after-test")}
    for script, tree in trees.items():
        configure(tree, script)

    # The trap this guards against, seen in the state ./scripts/run.sh leaves: no bench target.
    query = subprocess.run(["ninja", "-C", trees["run.sh"], "-t", "query", "queue_throughput"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if query.returncode == 0:
        fail("a tree configured as scripts/run.sh does knows queue_throughput: the check proves nothing")
    # And the check mode can fail: a target no CMakeLists defines.
    bad = run_check(["bench/run", "no_such_bench_program"], trees["run.sh"])
    if bad.returncode == 0:
        fail("bench/run no_such_bench_program passed its check: the check mode checks nothing")

    for where, span, argv in commands:
        for script, tree in trees.items():
            # bench/build.sh turns on only what test.sh's line leaves on already: that tree stays.
            if script == "run.sh":
                configure(tree, script)
            r = run_check(substitute(argv, tree), tree)
            if r.returncode != 0:
                fail(f"{where}: `{span}` after ./scripts/{script}: exit {r.returncode}\n{r.stdout.strip()}")
            else:
                print(f"ok   {where}: {span}  (after ./scripts/{script})", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(commands)} documented bench commands, {len(failures)} failures")
    sys.exit(1 if failures else 0)


main()
