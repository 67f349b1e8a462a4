#!/usr/bin/python3
# Checks containers/ without a container engine (none runs on the machines certfleet is built and
# tested on; docs/containers.md):
#
#   /usr/bin/python3 containers/check.py [BINARY]
#
# compose.yaml: parses as YAML; has the services mongo1..3, mongo-init, certfleet-1, certfleet-2
#   and sshd and the named volumes; every image has an explicit tag; the replica set is rs0 on
#   mongo1..3 everywhere it is named (mongod --replSet, rs.initiate's members, certfleet's --store
#   URI); the certfleet services run `serve --mode all --store mongodb://...` and build from
#   containers/Containerfile; long-running services have a healthcheck; depends_on names
#   services; every named volume used is declared and every declared one is used.
# Containerfile: every stage is debian:bookworm-slim; the build stage runs
#   scripts/install-deps.sh, builds and runs scripts/package.sh, and copies only paths that exist;
#   the runtime stage installs the certfleet .deb from the build stage with apt-get (which brings
#   the libraries its Depends name; tests/packaging/deb_test.sh proves that list complete), runs
#   as a non-root USER, EXPOSEs 8080 and has an ENTRYPOINT; and the packages it names besides the
#   .deb are exactly the MongoDB backend's libraries (the package only Recommends them) plus the
#   non-library packages in EXTRAS below, each with its reason:
#   - with BINARY (a built certfleet): the Debian packages owning the libraries in the dynamic
#     section of the backend beside it (DT_NEEDED, resolved with ldd, mapped with dpkg -S) that
#     the binary itself does not need, less libc6 and libgcc-s1 (in every Debian image);
#   - without: the runtime packages of the backend's -dev packages (BACKEND_DEVS) in
#     scripts/install-deps.sh's build_pkgs (the -dev package's .so mapped with dpkg -S).
# Prints one line per check; exits 0 when all pass, 1 otherwise. Needs python3-yaml; the
# package derivation needs dpkg and, without BINARY, install-deps.sh's packages installed.
import glob
import mmap
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMPOSE = os.path.join(HERE, "compose.yaml")
CONTAINERFILE = os.path.join(HERE, "Containerfile")
INSTALL_DEPS = os.path.join(ROOT, "scripts", "install-deps.sh")

SERVICES = ["mongo1", "mongo2", "mongo3", "mongo-init", "certfleet-1", "certfleet-2", "sshd"]
MONGOS = ["mongo1", "mongo2", "mongo3"]
CERTFLEETS = ["certfleet-1", "certfleet-2"]
ONE_SHOT = {"mongo-init"}
VOLUMES = ["mongo1-data", "mongo2-data", "mongo3-data", "certfleet-1-data", "certfleet-2-data",
           "certfleet-key", "sshd-config"]
SET_NAME = "rs0"

# Packages the runtime stage installs that are not libraries the binary links.
EXTRAS = {"ca-certificates": "the CA bundle for TLS to ACME servers, webhooks and notification endpoints"}
# The -dev packages of the libraries only the MongoDB backend (certfleet_store_mongo.so) links.
BACKEND_DEVS = ["libmongoc-dev", "libbson-dev"]
# In every Debian image (priority required): not listed.
BASE = {"libc6": "the C library", "libgcc-s1": "GCC's runtime"}
# -dev package -> the CMake target that links its library: the library is linked when src/'s
# CMakeLists.txt files name the target.
DEV_TARGETS = {
    "libboost-json1.81-dev": r"Boost::json\b",
    "libboost-url1.81-dev": r"Boost::url\b",
    "libsqlite3-dev": r"SQLite::SQLite3\b",
    "libmongoc-dev": r"mongo::mongoc_(shared|static)\b",
    "libbson-dev": r"mongo::bson_(shared|static)\b",
    "libssh2-1-dev": r"PkgConfig::LIBSSH2\b",
    "libssl-dev": r"OpenSSL::(SSL|Crypto)\b",
    "libsimdjson-dev": r"simdjson::simdjson\b",
    "libspdlog-dev": r"spdlog::spdlog\b",
    "libfmt-dev": r"fmt::fmt\b",
    "libtomlplusplus-dev": r"tomlplusplus::tomlplusplus\b",
}

failures = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)
    return cond


def note(what):
    print("     %s" % what, flush=True)


# --- compose.yaml ----------------------------------------------------------------------------
def image_tagged(image):
    last = image.rsplit("/", 1)[-1]
    return ":" in last or "@sha256:" in image


def as_list(command):
    if command is None:
        return []
    if isinstance(command, str):
        return command.split()
    return [str(x) for x in command]


def named_volumes(service):
    names, binds = [], []
    for v in service.get("volumes") or []:
        source = v.get("source") if isinstance(v, dict) else str(v).split(":", 1)[0]
        if not source:
            continue
        if source.startswith((".", "/", "~")):
            binds.append(source)
        else:
            names.append(source)
    return names, binds


def check_compose():
    try:
        import yaml
    except ImportError:
        check(False, "compose.yaml: python3-yaml is needed (apt-get install python3-yaml)")
        return
    try:
        with open(COMPOSE) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        check(False, "compose.yaml parses as YAML: %s" % e)
        return
    check(isinstance(doc, dict), "compose.yaml parses as YAML")
    services = doc.get("services") or {}
    missing = [s for s in SERVICES if s not in services]
    extra = [s for s in services if s not in SERVICES]
    check(not missing, "compose.yaml: services %s%s" % (", ".join(SERVICES),
                                                        " (missing: %s)" % ", ".join(missing) if missing else ""))
    if extra:
        note("other services: %s" % ", ".join(extra))

    images = {}
    for name, svc in services.items():
        img = svc.get("image")
        if img:
            images.setdefault(img, []).append(name)
        check(bool(img or svc.get("build")), "%s: has an image or a build" % name)
    for img, users in sorted(images.items()):
        check(image_tagged(img), "image %s (%s) has an explicit tag" % (img, ", ".join(users)))
        if img.endswith(":latest"):
            note("%s follows its publisher's latest release (not pinned)" % img)

    # The replica set, the same wherever it is named.
    for m in MONGOS:
        cmd = as_list((services.get(m) or {}).get("command"))
        ok = "--replSet" in cmd and cmd[cmd.index("--replSet") + 1:cmd.index("--replSet") + 2] == [SET_NAME]
        check(ok and (services.get(m) or {}).get("image", "").startswith("mongo:7"),
              "%s: mongo:7 running mongod --replSet %s" % (m, SET_NAME))
    init = " ".join(as_list((services.get("mongo-init") or {}).get("command")))
    members = re.findall(r'host:\s*"([^"]+)"', init)
    check("rs.initiate" in init and re.search(r'_id:\s*"%s"' % SET_NAME, init) is not None
          and sorted(members) == ["%s:27017" % m for m in MONGOS]
          and "NotYetInitialized" in init,
          "mongo-init: rs.initiate of %s with members %s, only when not yet initiated"
          % (SET_NAME, ", ".join("%s:27017" % m for m in MONGOS)))
    deps = (services.get("mongo-init") or {}).get("depends_on") or {}
    check(all(m in deps for m in MONGOS), "mongo-init: waits for mongo1..3")

    for c in CERTFLEETS:
        svc = services.get(c) or {}
        cmd = as_list(svc.get("command"))
        uri = cmd[cmd.index("--store") + 1] if "--store" in cmd[:-1] else ""
        m = re.match(r"^mongodb://([^/?]+)/([^?]*)\?(.*)$", uri)
        hosts = [h.split(":")[0] for h in m.group(1).split(",")] if m else []
        query = dict(kv.split("=", 1) for kv in m.group(3).split("&") if "=" in kv) if m else {}
        check(cmd[:1] == ["serve"] and "--mode" in cmd[:-1] and cmd[cmd.index("--mode") + 1] == "all",
              "%s: certfleet serve --mode all" % c)
        check(sorted(hosts) == MONGOS and query.get("replicaSet") == SET_NAME,
              "%s: --store %s names mongo1..3 and replicaSet=%s" % (c, uri or "(none)", SET_NAME))
        build = svc.get("build") or {}
        context = os.path.normpath(os.path.join(HERE, build.get("context", "."))) if isinstance(build, dict) else ""
        dockerfile = os.path.join(context, build.get("dockerfile", "Dockerfile")) if isinstance(build, dict) else ""
        check(bool(build) and os.path.normpath(dockerfile) == CONTAINERFILE,
              "%s: builds from containers/Containerfile with the repository as context" % c)
        env = svc.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env if "=" in e)
        check(env.get("CERTFLEET_KEY_FILE", "").startswith("/var/lib/certfleet-key/"),
              "%s: CERTFLEET_KEY_FILE on the shared certfleet-key volume" % c)

    for name, svc in services.items():
        if name in ONE_SHOT:
            continue
        hc = svc.get("healthcheck") or {}
        check(bool(hc.get("test")) and not hc.get("disable"), "%s: has a healthcheck" % name)
    for name, svc in services.items():
        deps = svc.get("depends_on") or []
        unknown = [d for d in deps if d not in services]
        if unknown:
            check(False, "%s: depends_on names services that do not exist: %s" % (name, ", ".join(unknown)))

    declared = list((doc.get("volumes") or {}).keys())
    used, binds = set(), []
    for name, svc in services.items():
        n, b = named_volumes(svc)
        used.update(n)
        binds += b
    check(sorted(declared) == sorted(VOLUMES), "named volumes %s" % ", ".join(VOLUMES))
    check(used <= set(declared), "every named volume a service mounts is declared%s"
          % (": undeclared %s" % ", ".join(sorted(used - set(declared))) if used - set(declared) else ""))
    check(set(declared) <= used, "every declared volume is mounted%s"
          % (": unused %s" % ", ".join(sorted(set(declared) - used)) if set(declared) - used else ""))
    for b in binds:
        check(os.path.isdir(os.path.join(HERE, b)), "bind mount source %s exists next to compose.yaml" % b)
    return images


# --- Containerfile ---------------------------------------------------------------------------
def instructions(path):
    """[(stage index, INSTRUCTION, arguments)] with continuation lines joined, comments dropped."""
    out, stage, buf = [], -1, ""
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.lstrip().startswith("#") and not buf:
                continue
            if line.lstrip().startswith("#"):
                continue  # a comment inside a continued instruction
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            buf += line
            if buf.strip():
                word, _, args = buf.strip().partition(" ")
                word = word.upper()
                if word == "FROM":
                    stage += 1
                out.append((stage, word, args.strip()))
            buf = ""
    return out


def apt_packages(run_args):
    pkgs = []
    for part in re.split(r"&&|;|\|\|", run_args):
        words = part.split()
        if len(words) >= 2 and words[0] == "apt-get" and "install" in words:
            for w in words[words.index("install") + 1:]:
                if not w.startswith("-") and re.match(r"^[a-z0-9][a-z0-9+.-]+$", w):
                    pkgs.append(w)
    return pkgs


def check_containerfile():
    try:
        ins = instructions(CONTAINERFILE)
    except OSError as e:
        check(False, "Containerfile: %s" % e)
        return None
    froms = [(s, a) for s, w, a in ins if w == "FROM"]
    check(len(froms) == 2, "Containerfile: two stages (build, runtime)")
    for s, a in froms:
        check(a.split()[0] == "debian:bookworm-slim", "stage %d FROM %s is debian:bookworm-slim" % (s, a))
    last = len(froms) - 1
    build = [(w, a) for s, w, a in ins if s == 0]
    runtime = [(w, a) for s, w, a in ins if s == last]
    check(any(w == "RUN" and "scripts/install-deps.sh" in a for w, a in build),
          "build stage runs scripts/install-deps.sh")
    check(any(w == "RUN" and "cmake" in a and "ninja" in a for w, a in build),
          "build stage configures with cmake and builds with ninja")
    check(any(w == "RUN" and "scripts/package.sh" in a for w, a in build),
          "build stage makes the package with scripts/package.sh")
    for w, a in build:
        if w == "COPY" and not a.startswith("--from"):
            sources = a.split()[:-1]
            for src in sources:
                check(os.path.exists(os.path.join(ROOT, src)), "COPY %s: exists in the repository" % src)
    users = [a for w, a in runtime if w == "USER"]
    user = users[-1].split(":")[0] if users else ""
    check(bool(user) and user not in ("root", "0"), "runtime stage runs as a non-root USER (%s)" % (users[-1] if users else "none"))
    check(any(w == "EXPOSE" and "8080" in a.split() for w, a in runtime), "runtime stage EXPOSEs 8080")
    check(any(w == "ENTRYPOINT" for w, a in runtime), "runtime stage has an ENTRYPOINT")
    check(any(w == "COPY" and a.startswith("--from=") for w, a in runtime),
          "runtime stage copies the package from the build stage")
    check(any(w == "RUN" and re.search(r"apt-get install[^&;]*/certfleet_\*_amd64\.deb", a) for w, a in runtime),
          "runtime stage installs the certfleet package with apt-get")
    check(any(w == "ENTRYPOINT" and "/usr/bin/certfleet" in a for w, a in runtime),
          "runtime stage's ENTRYPOINT is the package's /usr/bin/certfleet")
    pkgs = []
    for w, a in runtime:
        if w == "RUN":
            pkgs += apt_packages(a)
    check(bool(pkgs), "runtime stage installs packages with apt-get install (%d)" % len(pkgs))
    return pkgs, [a.split()[0] for s, a in froms]


# --- package derivation ----------------------------------------------------------------------
def run(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def owner(path):
    """The Debian package that owns `path` (trying the /usr-merged spelling too), or None."""
    candidates = [path, os.path.realpath(path)]
    for p in list(candidates):
        if p.startswith("/usr/lib/"):
            candidates.append(p[len("/usr"):])
        elif p.startswith("/lib/"):
            candidates.append("/usr" + p)
    for p in candidates:
        r = run(["dpkg-query", "-S", p])
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                pkgs, _, owned = line.partition(": ")
                if owned.strip() == p:
                    return pkgs.split(",")[0].split(":")[0].strip()
    return None


def elf_needed(path):
    """DT_NEEDED of a 64-bit little-endian ELF file, read from its section headers."""
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if m[:4] != b"\x7fELF":
            raise ValueError("%s is not an ELF file" % path)
        if m[4] != 2 or m[5] != 1:
            raise ValueError("%s is not a 64-bit little-endian ELF file" % path)
        shoff, = struct.unpack_from("<Q", m, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", m, 0x3A)
        sections = []
        for i in range(shnum):
            base = shoff + i * shentsize
            sh_type, = struct.unpack_from("<I", m, base + 4)
            sh_offset, sh_size = struct.unpack_from("<QQ", m, base + 24)
            sh_link, = struct.unpack_from("<I", m, base + 40)
            sections.append((sh_type, sh_offset, sh_size, sh_link))
        needed = []
        for sh_type, off, size, link in sections:
            if sh_type != 6:  # SHT_DYNAMIC
                continue
            strtab = sections[link][1]
            for j in range(size // 16):
                tag, val = struct.unpack_from("<qQ", m, off + 16 * j)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    end = m.find(b"\0", strtab + val)
                    needed.append(m[strtab + val:end].decode())
        if not sections:
            raise ValueError("%s has no section headers" % path)
        return needed
    finally:
        m.close()


def from_binary(binary):
    # The package's Depends bring the binary's libraries; the MongoDB backend beside it (loaded
    # only for a MongoDB store) needs more, which the package only recommends: the image names them.
    module = os.path.join(os.path.dirname(os.path.abspath(binary)), "certfleet_store_mongo.so")
    own = from_elf(binary)
    pkgs = {}
    if check(os.path.exists(module), "the MongoDB backend module is beside the binary (%s)" % module):
        for pkg, sonames in from_elf(module).items():
            if pkg not in own:
                pkgs[pkg] = sonames
    return pkgs


def from_elf(binary):
    needed = elf_needed(binary)
    r = run(["ldd", binary])
    paths = {}
    for line in r.stdout.splitlines():
        mm = re.match(r"^\s*(\S+)\s+=>\s+(\S+)", line)
        if mm:
            paths[mm.group(1)] = mm.group(2)
    pkgs = {}
    for soname in needed:
        if soname.startswith("ld-linux"):
            continue  # the dynamic loader: libc6, which BASE covers
        path = paths.get(soname)
        if not path or path == "not":
            check(False, "%s: ldd finds no %s" % (binary, soname))
            continue
        pkg = owner(path)
        if not check(pkg is not None, "%s -> %s -> %s" % (soname, path, pkg or "no Debian package")):
            continue
        pkgs.setdefault(pkg, []).append(soname)
    return pkgs


def build_packages():
    with open(INSTALL_DEPS) as f:
        text = f.read()
    m = re.search(r"^build_pkgs=\((.*?)^\)", text, re.S | re.M)
    if not m:
        raise ValueError("scripts/install-deps.sh has no build_pkgs=( ... ) array")
    words = []
    for line in m.group(1).splitlines():
        words += line.split("#", 1)[0].split()
    return words


def from_install_deps():
    cmake_text = ""
    for p in glob.glob(os.path.join(ROOT, "src", "**", "CMakeLists.txt"), recursive=True):
        with open(p) as f:
            cmake_text += f.read() + "\n"
    pkgs = {}
    for dev in build_packages():
        if dev not in BACKEND_DEVS:
            continue
        r = run(["dpkg-query", "-L", dev])
        if r.returncode != 0:
            check(False, "%s is not installed here: run scripts/install-deps.sh, or give a built binary" % dev)
            continue
        libs = [p for p in r.stdout.splitlines() if re.search(r"/lib[^/]*\.so$", p) and os.path.exists(p)]
        if not libs:
            note("%s: headers only, no runtime package" % dev)
            continue
        runtime = sorted({owner(os.path.realpath(p)) or "?" for p in libs})
        target = DEV_TARGETS.get(dev)
        if target is None:
            check(False, "%s ships %s but containers/check.py's DEV_TARGETS does not say which CMake "
                         "target links it: add it" % (dev, ", ".join(os.path.basename(p) for p in libs)))
            continue
        if not re.search(target, cmake_text):
            note("%s: src/ does not link %s, so %s is not needed"
                 % (dev, re.sub(r"\\b$", "", target), ", ".join(runtime)))
            continue
        check("?" not in runtime, "%s -> %s" % (dev, ", ".join(runtime)))
        for p in runtime:
            pkgs.setdefault(p, []).append(dev)
    return pkgs


def check_packages(listed, binary):
    if binary:
        print("== the MongoDB backend's runtime packages beside %s (DT_NEEDED, ldd, dpkg -S)" % binary)
        derived = from_binary(binary)
    else:
        print("== the MongoDB backend's runtime packages from scripts/install-deps.sh's build_pkgs (no binary given)")
        derived = from_install_deps()
    for b in BASE:
        derived.pop(b, None)
    want = set(derived)
    have = set(listed) - set(EXTRAS)
    missing, extra = sorted(want - have), sorted(have - want)
    dupes = sorted({p for p in listed if listed.count(p) > 1})
    check(not missing, "Containerfile lists every runtime package%s"
          % (": missing %s" % ", ".join("%s (for %s)" % (p, ", ".join(derived[p])) for p in missing) if missing else ""))
    check(not extra, "Containerfile lists no package the binary does not need%s"
          % (": %s" % ", ".join(extra) if extra else ""))
    check(not dupes, "Containerfile lists each package once%s" % (": %s" % ", ".join(dupes) if dupes else ""))
    for p, why in EXTRAS.items():
        if p in listed:
            note("%s: %s" % (p, why))
    # The names exist in this machine's Debian (bookworm here) when apt has its lists.
    if run(["apt-cache", "policy"]).returncode == 0:
        unknown = []
        for p in listed:
            out = run(["apt-cache", "policy", p]).stdout
            if not out.strip() or "Candidate: (none)" in out:
                unknown.append(p)
        check(not unknown, "every listed package is known to apt here%s" % (": %s" % ", ".join(unknown) if unknown else ""))


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else None
    if binary in ("-h", "--help"):
        print(__doc__ or "usage: containers/check.py [BINARY]")
        return 0
    if binary and not os.path.isfile(binary):
        print("containers/check.py: %s is not a file" % binary)
        return 2
    print("== containers/compose.yaml")
    check_compose()
    print("== containers/Containerfile")
    result = check_containerfile()
    if result:
        listed, _ = result
        try:
            check_packages(listed, binary)
        except (OSError, ValueError) as e:
            check(False, "runtime packages: %s" % e)
    if failures:
        print("containers/check.py: %d failed" % len(failures))
        return 1
    print("containers/check.py: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
