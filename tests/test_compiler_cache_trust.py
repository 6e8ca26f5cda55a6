"""Trusting the kernel cache of ember.compiler.build: dlopen runs a library's code, so an entry is loaded
only from directories nobody else can write, only when it is a regular file of this user's, and anything
else at an entry's path is rebuilt over (issue 9, item 6).

Each attack plants a *different* library (``add3`` returning x + 100) with a sidecar that matches it, at
the path of the real entry, so that only the trust rules stand between it and the loader; the
``trusted`` case shows the plant is loaded when nothing is wrong with it. The caches are new for each
test: glibc's dlopen returns the library already loaded under a name, so no path is loaded twice.
"""
import ctypes
import hashlib
import json
import os
import stat
import tempfile
import warnings

import pytest

from ember.compiler import build, logs

GOOD = "int add3(int x) { return x + 3; }\n"
EVIL = "int add3(int x) { return x + 100; }\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """GOOD's key, stem and bytes and EVIL's bytes, built in a cache of their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBER_CACHE_DIR", str(tmp_path_factory.mktemp("origin")))
        mp.delenv("EMBER_FAST_MATH", raising=False)
        good = build.compile_source(GOOD, name="add3")
        evil = build.compile_source(EVIL, name="add3")
    build.clear_memory_cache()
    assert good.key != evil.key
    with open(good.path, "rb") as f, open(evil.path, "rb") as g:
        return {"key": good.key, "stem": os.path.basename(good.path)[:-3], "good": f.read(), "evil": g.read()}


@pytest.fixture
def env(tmp_path, monkeypatch, capsys):
    """A private temporary directory under tmp_path, the kernels log channel on, empty memory caches."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    monkeypatch.delenv("EMBER_FAST_MATH", raising=False)
    build.clear_memory_cache()
    logs.set_logs("kernels")
    capsys.readouterr()
    yield tmp_path
    logs.set_logs()
    build.clear_memory_cache()


def _use(monkeypatch, cache):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(cache))
    return cache


def _plant(cache, made, data):
    """``data`` at the entry path of GOOD with a sidecar that matches it; returns (so path, meta path)."""
    kernels = os.path.join(cache, "kernels")
    os.makedirs(kernels, mode=0o700, exist_ok=True)
    so, meta = (os.path.join(kernels, made["stem"] + ext) for ext in (".so", ".json"))
    with open(so, "wb") as f:
        f.write(data)
    os.chmod(so, 0o700)
    with open(meta, "w") as f:
        json.dump({"schema": build.CACHE_SCHEMA, "key": made["key"], "size": len(data),
                   "sha256": hashlib.sha256(data).hexdigest()}, f)
    os.chmod(meta, 0o600)
    return so, meta


def _add3(lib):
    return lib.get("add3", [ctypes.c_int], ctypes.c_int)(4)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- new directories and files are private ------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_new_cache_is_created_private_whatever_the_umask(env, monkeypatch, made, umask):
    cache = _use(monkeypatch, env / "home" / ".cache" / "ember")     # ~/.cache is missing too
    old = os.umask(umask)
    try:
        lib = build.compile_source(GOOD, name="add3")
        with pytest.raises(build.CompileError) as info:
            build.compile_source("int broken(void) { return nope; }\n", name="broken")
    finally:
        os.umask(old)
    assert _add3(lib) == 7 and lib.path == str(cache / "kernels" / (made["stem"] + ".so"))
    mode = lambda p: stat.S_IMODE(os.lstat(p).st_mode)      # noqa: E731
    for d in (env / "home", cache.parent, cache, cache / "kernels", cache / "kernels" / ".locks", cache / "failed"):
        assert mode(d) == 0o700, d
    assert mode(lib.path) == 0o700
    assert mode(lib.source_path) == mode(lib.path[:-3] + ".json") == 0o600
    assert mode(info.value.source_path) == 0o600 and os.path.dirname(info.value.source_path) == str(cache / "failed")
    assert _read(lib.path) == made["good"]


def test_existing_cache_directory_keeps_its_mode(env, monkeypatch):
    cache = _use(monkeypatch, env / "mine")
    cache.mkdir()
    os.chmod(cache, 0o755)
    lib = build.compile_source(GOOD, name="add3")
    assert _add3(lib) == 7 and lib.path.startswith(str(cache))
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o755


# ---- entries: only regular files of this user's, writable by nobody else, are loaded ------------------

@pytest.mark.parametrize("attack", ["trusted", "other_owner", "group_writable", "world_writable",
                                    "symlink_to_library"])
def test_untrusted_entry_is_not_loaded_and_is_rebuilt(env, monkeypatch, capsys, made, attack):
    if attack == "other_owner" and os.geteuid() != 0:
        pytest.skip("needs chown")
    cache = _use(monkeypatch, env / "cache")
    so, meta = _plant(cache, made, made["evil"])
    if attack == "other_owner":
        os.chown(so, 12345, -1)
    elif attack == "group_writable":
        os.chmod(so, 0o770)
    elif attack == "world_writable":
        os.chmod(so, 0o666)
    elif attack == "symlink_to_library":
        elsewhere = str(env / "evil.so")
        os.replace(so, elsewhere)
        os.symlink(elsewhere, so)
    lib = build.compile_source(GOOD, name="add3")
    err = capsys.readouterr().err
    if attack == "trusted":                    # the plant is convincing: only the trust rules stop it
        assert lib.cache_hit and _add3(lib) == 104
        return
    assert not lib.cache_hit and _add3(lib) == 7 and lib.path == so
    st = os.lstat(so)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert _read(so) == made["good"]
    why = {"other_owner": "is owned by uid 12345, not by this user", "group_writable": "is writable by group",
           "world_writable": "is writable by group and others", "symlink_to_library": "is a symbolic link"}
    assert f"cache miss (the library {so} {why[attack]}" in err and "not loaded" in err
    if attack == "symlink_to_library":
        assert _read(str(env / "evil.so")) == made["evil"]      # replaced the link, not what it named
    build.clear_memory_cache()
    again = build.compile_source(GOOD, name="add3")
    assert again.cache_hit and _add3(again) == 7


@pytest.mark.parametrize("what", ["so_directory", "so_fifo", "so_dangling_symlink", "sidecar_directory",
                                  "source_directory"])
def test_something_else_at_an_entry_path_is_replaced(env, monkeypatch, capsys, made, what):
    cache = _use(monkeypatch, env / "cache")
    so, meta = _plant(cache, made, made["good"])
    c = so[:-3] + ".c"
    if what == "so_directory":
        os.remove(so)
        os.makedirs(os.path.join(so, "inside"))
        open(os.path.join(so, "inside", "file"), "w").close()
    elif what == "so_fifo":
        os.remove(so)
        os.mkfifo(so)
    elif what == "so_dangling_symlink":
        os.remove(so)
        os.symlink(str(env / "nowhere.so"), so)
    elif what == "sidecar_directory":
        os.remove(meta)
        os.mkdir(meta)
    else:                 # the .c is only read by people: in the way of a rebuild (of a missing .so)
        os.remove(so)
        os.mkdir(c)
        open(os.path.join(c, "file"), "w").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = build.compile_source(GOOD, name="add3")
    assert not lib.cache_hit and _add3(lib) == 7
    for path in (so, meta, c):
        assert stat.S_ISREG(os.lstat(path).st_mode), path
    assert _read(so) == made["good"]
    assert [n for n in os.listdir(cache / "kernels") if n.startswith(".build-")] == []
    # the next process (here: the next load) finds a whole entry, without a rebuild
    build.clear_memory_cache()
    capsys.readouterr()
    before = dict(build.STATS)
    again = build.compile_source(GOOD, name="add3")
    assert again.cache_hit and build.STATS["compiles"] == before["compiles"]
    assert "disk cache hit" in capsys.readouterr().err


# ---- directories: nothing is loaded from (or written to) a cache others can write ---------------------

@pytest.mark.parametrize("how", ["root_world_writable", "kernels_world_writable", "kernels_group_writable",
                                 "root_other_owner", "kernels_other_owner", "parent_world_writable"])
def test_untrusted_cache_directory_is_not_used(env, monkeypatch, capsys, made, how):
    if "other_owner" in how and os.geteuid() != 0:
        pytest.skip("needs chown")
    parent = env / "parent"
    parent.mkdir(mode=0o700)
    cache = _use(monkeypatch, parent / "cache")
    cache.mkdir(mode=0o700)
    so, meta = _plant(cache, made, made["evil"])
    target = {"root": cache, "kernels": cache / "kernels", "parent": parent}[how.split("_")[0]]
    if how.endswith("world_writable"):
        os.chmod(target, 0o777)
    elif how.endswith("group_writable"):
        os.chmod(target, 0o770)
    else:
        os.chown(target, 12345, -1)
    lib = build.compile_source(GOOD, name="add3")
    second = build.compile_source("int add4(int x) { return x + 4; }\n", name="add4")
    err = capsys.readouterr().err
    assert _add3(lib) == 7 and not lib.cache_hit
    assert second.get("add4", [ctypes.c_int], ctypes.c_int)(1) == 5
    for built in (lib, second):       # built in a private temporary directory, outside the cache
        assert not built.path.startswith(str(cache)) and built.path.startswith(tempfile.gettempdir())
        d = os.lstat(os.path.dirname(built.path))
        assert d.st_uid == os.geteuid() and stat.S_IMODE(d.st_mode) == 0o700
        assert _read(built.source_path) != ""
    # nothing in the cache was loaded, changed or added
    assert _read(so) == made["evil"] and sorted(os.listdir(cache / "kernels")) == sorted(
        [os.path.basename(so), os.path.basename(meta)])
    assert err.count("kernel cache not used") == 1       # said once, with the reason
    reason = {"world_writable": "is writable by group and others (mode 777)",
              "group_writable": "is writable by group (mode 770)",
              "other_owner": "is owned by uid 12345, not by this user"}
    if how == "parent_world_writable":
        assert f"{parent} (above the kernel cache) is writable by group and others without the sticky bit" in err
    else:
        assert f"{target} {reason['_'.join(how.split('_')[1:])]}" in err


def test_sticky_world_writable_parent_is_fine(env, monkeypatch):
    parent = env / "shared"
    parent.mkdir()
    os.chmod(parent, 0o1777)        # like /tmp: others cannot rename what they do not own
    cache = _use(monkeypatch, parent / "cache")
    lib = build.compile_source(GOOD, name="add3")
    assert _add3(lib) == 7 and lib.path.startswith(str(cache / "kernels"))
    build.clear_memory_cache()
    assert build.compile_source(GOOD, name="add3").cache_hit


def test_failed_build_with_untrusted_cache_keeps_source_privately(env, monkeypatch):
    cache = _use(monkeypatch, env / "cache")
    cache.mkdir()
    os.chmod(cache, 0o777)
    src = "int broken(void) { return nope; }\n"
    with pytest.raises(build.CompileError) as info:
        build.compile_source(src, name="broken")
    kept = info.value.source_path
    assert _read(kept) == src.encode() and not kept.startswith(str(cache))
    assert stat.S_IMODE(os.stat(os.path.dirname(kept)).st_mode) == 0o700
    assert os.listdir(cache) == []         # nothing written into the untrusted directory


def test_read_only_cache_still_loads_and_builds(env, monkeypatch, capsys, made):
    cache = _use(monkeypatch, env / "cache")
    _plant(cache, made, made["good"])
    real_mkdtemp = tempfile.mkdtemp

    def read_only(*args, dir=None, **kw):     # root may write anywhere: simulate a read-only file system
        if dir is not None and str(dir).startswith(str(cache)):
            raise OSError(30, "Read-only file system", dir)
        return real_mkdtemp(*args, dir=dir, **kw)
    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    lib = build.compile_source(GOOD, name="add3")
    assert lib.cache_hit and _add3(lib) == 7
    other = build.compile_source("int add4(int x) { return x + 4; }\n", name="add4")
    assert other.get("add4", [ctypes.c_int], ctypes.c_int)(1) == 5 and not other.path.startswith(str(cache))
    assert "cannot write the kernel directory" in capsys.readouterr().err
