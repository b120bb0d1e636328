"""Library-layer probe: which CUDA libraries the installed TensorFlow needs, where the dynamic loader
finds each of them for TensorFlow, what version each says it is, and where XLA's ptxas and libdevice are.

Runs only inside a probe child process (it dlopens the CUDA libraries). TensorFlow itself is not
imported: its package is located with importlib and ``tensorflow/python/platform/build_info.py`` is
read as data (an ``ast`` literal), so the probe stays fast and works when ``import tensorflow`` dies.

The search follows glibc's order for a ``dlopen`` from TensorFlow's ``libtensorflow_framework.so.2``
(the object that calls it, see xla/tsl/platform/default/dso_loader.cc): ``LD_LIBRARY_PATH``, then the
caller's ``DT_RUNPATH`` (``$ORIGIN/../nvidia/*/lib``: the pip wheels), then the ldconfig cache, then
the default directories (ld.so(8), "Finding shared libraries at run time").
"""

from __future__ import annotations

import ast
import ctypes
import importlib.metadata
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from gpucheck import knowledge
from gpucheck.frameworks.tensorflow.facts import CudaLibrary, LibrariesFacts, SearchDir, ToolchainFile
from gpucheck.probes.host import host_root
from gpucheck.protocol import stage

#: The TensorFlow object that dlopens the CUDA libraries (tsl's dso_loader lives in it).
LOADER_OBJECTS = ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2")
DT_NEEDED, DT_RPATH, DT_RUNPATH = 1, 15, 29
SHT_DYNAMIC = 6


# --- finding TensorFlow without importing it --------------------------------------------


def locate_framework() -> tuple[Path | None, str | None]:
    """The directory of the ``tensorflow`` package ``import tensorflow`` would load, without loading it."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if spec is None:
        return None, "no module named tensorflow"
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))), None
    return (Path(spec.origin).parent if spec.origin else None), "tensorflow is a single module, not the package"


def read_build_info(path: Path) -> dict[str, Any]:
    """``build_info = collections.OrderedDict([...])`` (or a dict literal) read with ``ast``, never executed."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "build_info" for t in node.targets):
            continue
        value = node.value
        if isinstance(value, ast.Call) and value.args:
            value = value.args[0]
        return dict(_literal(value))
    return {}


def _literal(node: ast.expr | None) -> Any:
    """Constants, lists, tuples and dicts of them: all build_info.py holds. Anything else is refused."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    raise ValueError(f"build_info holds something other than a literal: {ast.dump(node)[:80] if node else None}")


def framework_distribution(location: Path | None) -> tuple[str | None, dict[str, str]]:
    """Version of the distribution that installed ``location`` and its "and-cuda" minimums."""
    names = importlib.metadata.packages_distributions().get("tensorflow", [])
    for name in names:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if location is not None:
            try:
                installed_at = Path(str(dist.locate_file("tensorflow"))).resolve()
            except (OSError, TypeError):
                installed_at = None
            if installed_at is not None and installed_at != location.resolve():
                continue
        return dist.version, _cuda_requirements(dist.requires or [])
    return None, {}


_REQ = re.compile(r"^\s*(nvidia-[A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*([^;]*)(?:;(.*))?$")


def _cuda_requirements(requires: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for req in requires:
        m = _REQ.match(req)
        if not m or (m.group(3) and "and-cuda" not in m.group(3)):
            continue
        lower = re.search(r">=\s*([0-9][0-9.]*)", m.group(2) or "")
        out[m.group(1).lower()] = lower.group(1) if lower else (m.group(2) or "").strip()
    return out


# --- ELF: RUNPATH of TensorFlow's own objects ---------------------------------------------


def elf_dynamic(path: Path) -> dict[int, list[str]]:
    """DT_NEEDED / DT_RPATH / DT_RUNPATH strings of an ELF64 little-endian object, read from its
    section headers (no external tool). Empty when the file is not such an object."""
    out: dict[int, list[str]] = {}
    try:
        with path.open("rb") as fh:
            ident = fh.read(64)
            if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
                return out
            shoff = struct.unpack_from("<Q", ident, 0x28)[0]
            shentsize, shnum = struct.unpack_from("<HH", ident, 0x3A)
            fh.seek(shoff)
            table = fh.read(shentsize * shnum)
            sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
            for sh in sections:
                if sh[1] != SHT_DYNAMIC:
                    continue
                strtab = sections[sh[6]]
                fh.seek(strtab[4])
                strings = fh.read(strtab[5])
                fh.seek(sh[4])
                dyn = fh.read(sh[5])
                for off in range(0, len(dyn) - 15, 16):
                    tag, val = struct.unpack_from("<qQ", dyn, off)
                    if tag == 0:
                        break
                    if tag in (DT_NEEDED, DT_RPATH, DT_RUNPATH):
                        end = strings.find(b"\0", val)
                        out.setdefault(tag, []).append(strings[val:end].decode(errors="replace"))
    except (OSError, struct.error, IndexError):
        return {}
    return out


def runpath_dirs(obj: Path) -> list[str]:
    dyn = elf_dynamic(obj)
    entries = dyn.get(DT_RUNPATH) or dyn.get(DT_RPATH) or []
    origin = str(obj.parent)
    dirs: list[str] = []
    for entry in entries:
        for item in entry.split(":"):
            if not item:
                continue
            resolved = os.path.normpath(item.replace("$ORIGIN", origin).replace("${ORIGIN}", origin))
            if resolved not in dirs:
                dirs.append(resolved)
    return dirs


# --- the loader's search -----------------------------------------------------------------


def ldconfig_cache() -> dict[str, list[str]]:
    """soname -> paths from ``ldconfig -p`` (the cache /etc/ld.so.cache), 64-bit entries for a 64-bit Python."""
    exe = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None)
    if exe is None:
        return {}
    stage("ldconfig -p")
    try:
        proc = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    want64 = sys.maxsize > 2**32
    out: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
        if not m:
            continue
        flags = m.group(2)
        if want64 and "64" not in flags:
            continue
        out.setdefault(m.group(1), []).append(m.group(3))
    return out


def default_dirs() -> list[str]:
    multiarch = sysconfig.get_config_var("MULTIARCH")
    dirs = [f"/lib/{multiarch}", f"/usr/lib/{multiarch}"] if multiarch else []
    dirs += ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    return dirs


def search_order(framework: Path | None) -> list[SearchDir]:
    order: list[SearchDir] = []
    for d in (os.environ.get("LD_LIBRARY_PATH") or "").split(":"):
        if d:
            order.append(SearchDir(os.path.abspath(d), "LD_LIBRARY_PATH"))
    if framework is not None:
        for name in LOADER_OBJECTS:
            obj = framework / name
            if obj.exists():
                order.extend(SearchDir(d, f"RUNPATH of {name}") for d in runpath_dirs(obj))
                break
    return order


def resolve(soname: str, order: list[SearchDir], cache: dict[str, list[str]]) -> tuple[str | None, str | None, list[str]]:
    """The first file named ``soname`` in the loader's order; with the later ones it shadows."""
    hits: list[tuple[str, str]] = []
    seen: set[str] = set()
    for d in order:
        candidate = os.path.join(d.path, soname)
        if os.path.exists(candidate) and candidate not in seen:
            seen.add(candidate)
            hits.append((candidate, d.source))
    for path in cache.get(soname, []):
        if os.path.exists(path) and path not in seen:
            seen.add(path)
            hits.append((path, "ldconfig cache"))
    for directory in default_dirs():
        candidate = os.path.join(directory, soname)
        if os.path.exists(candidate) and os.path.realpath(candidate) not in {os.path.realpath(x) for x in seen}:
            seen.add(candidate)
            hits.append((candidate, "default directory"))
    if not hits:
        return None, None, []
    return hits[0][0], hits[0][1], [h[0] for h in hits[1:]]


def other_versions(soname: str, order: list[SearchDir], cache: dict[str, list[str]]) -> list[str]:
    """Files of the same library under another soname version (``libcudart.so.13`` for ``libcudart.so.12``)."""
    stem = soname.split(".so")[0] + ".so."
    found: list[str] = []
    for name, paths in cache.items():
        if name.startswith(stem) and name != soname:
            found.extend(p for p in paths if p not in found)
    for directory in [entry.path for entry in order] + default_dirs():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if name.startswith(stem) and not soname.startswith(name) and name != soname and path not in found:
                found.append(path)
    return sorted(found)[:8]


# --- asking a library its version ---------------------------------------------------------

_FILE_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")


def version_from_file(path: str) -> str | None:
    m = _FILE_VERSION.search(os.path.basename(os.path.realpath(path)))
    return m.group(1) if m else None


def _property_version(lib: ctypes.CDLL, function: str) -> str | None:
    fn = getattr(lib, function, None)
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    parts = []
    for prop in (0, 1, 2):  # libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int(0)
        if fn(ctypes.c_int(prop), ctypes.byref(value)) != 0:
            return None
        parts.append(str(value.value))
    return ".".join(parts)


def ask_version(key: str, lib: ctypes.CDLL) -> tuple[str | None, str | None]:
    """The library's own answer about its version, and the call that gave it."""
    try:
        if key == "cudart" and hasattr(lib, "cudaRuntimeGetVersion"):
            v = ctypes.c_int(0)
            lib.cudaRuntimeGetVersion.restype = ctypes.c_int
            if lib.cudaRuntimeGetVersion(ctypes.byref(v)) == 0:
                return knowledge.cuda_int_to_text(v.value), "cudaRuntimeGetVersion"
        if key == "cudnn" and hasattr(lib, "cudnnGetVersion"):
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            return knowledge.decode_cudnn_version(int(lib.cudnnGetVersion())), "cudnnGetVersion"
        if key == "nccl" and hasattr(lib, "ncclGetVersion"):
            v = ctypes.c_int(0)
            lib.ncclGetVersion.restype = ctypes.c_int
            if lib.ncclGetVersion(ctypes.byref(v)) == 0:
                n = v.value
                return f"{n // 10000}.{n % 10000 // 100}.{n % 100}", "ncclGetVersion"
        if key in ("nvrtc", "nvjitlink"):
            function = "nvrtcVersion" if key == "nvrtc" else "nvJitLinkVersion"
            fn = getattr(lib, function, None)
            if fn is not None:
                a, b = ctypes.c_int(0), ctypes.c_int(0)
                fn.restype = ctypes.c_int
                if fn(ctypes.byref(a), ctypes.byref(b)) == 0:
                    return f"{a.value}.{b.value}", function
        prop = {
            "cublas": "cublasGetProperty",
            "cublasLt": "cublasLtGetProperty",
            "cufft": "cufftGetProperty",
            "curand": "curandGetProperty",
            "cusolver": "cusolverGetProperty",
            "cusparse": "cusparseGetProperty",
        }.get(key)
        if prop:
            v2 = _property_version(lib, prop)
            if v2:
                return v2, prop
    except (OSError, ValueError):
        return None, None
    return None, None


def built_for_cuda(key: str, lib: ctypes.CDLL) -> str | None:
    """The CUDA version a library was built for, where it can say: cuDNN's cudnnGetCudartVersion()."""
    fn = getattr(lib, "cudnnGetCudartVersion", None) if key == "cudnn" else None
    if fn is None:
        return None
    fn.restype = ctypes.c_size_t
    try:
        return knowledge.cuda_int_to_text(int(fn()))
    except (OSError, ValueError):
        return None


def probe_library(entry: dict[str, Any], requirements: dict[str, str], order: list[SearchDir],
                  cache: dict[str, list[str]]) -> CudaLibrary:
    soname = entry["soname"]
    package = entry.get("package")
    min_version = requirements.get(package.lower()) if package else None
    path, via, shadowed = resolve(soname, order, cache)
    target = path or soname
    stage(f"dlopen {target}")
    try:
        lib = ctypes.CDLL(target, mode=ctypes.RTLD_LOCAL)
        error = None
    except OSError as exc:
        lib, error = None, str(exc)
    version = source = built_for = None
    if lib is not None:
        stage(f"version of {soname}")
        version, source = ask_version(entry["key"], lib)
        built_for = built_for_cuda(entry["key"], lib)
    if version is None and path is not None:
        version, source = version_from_file(path), "file name"
    elif version is not None and path is not None:
        precise = version_from_file(path)
        if precise and precise.startswith(version + ".") and source:
            version, source = precise, f"{source} and file name"
    return CudaLibrary(
        key=entry["key"],
        soname=soname,
        package=package,
        min_version=min_version,
        required=bool(entry.get("required")),
        path=os.path.realpath(path) if path else None,
        found_via=via,
        loaded=lib is not None,
        load_error=error,
        version=version,
        version_source=source,
        shadowed=tuple(shadowed),
        other_versions=tuple(other_versions(soname, order, cache)) if path is None else (),
        built_for_cuda=built_for,
    )


def registers_no_gpu_without() -> tuple[str, ...]:
    """The CUDA libraries TensorFlow registers no GPU without (``required`` in data/cuda_libraries.json: its
    TryDlopenCUDALibraries list) that the loader's search for TensorFlow finds no file of, by soname: where one is
    missing, ``import tensorflow`` would say "Cannot dlopen some GPU libraries" and list no GPU. A child that only
    configures TensorFlow's GPUs asks this before paying for the import. Empty where it cannot be told without
    TensorFlow: not found or not a CUDA build (the import says why), libraries preloaded (``LD_PRELOAD``,
    ``/etc/ld.so.preload``), which ``dlopen`` takes by soname wherever their files lie, or no ldconfig cache to read."""
    if os.environ.get("LD_PRELOAD", "").strip() or os.path.exists("/etc/ld.so.preload"):
        return ()
    location, _problem = locate_framework()
    info_path = location / "python" / "platform" / "build_info.py" if location is not None else None
    if info_path is None or not info_path.is_file():
        return ()
    try:
        build_info = read_build_info(info_path)
    except (OSError, SyntaxError, ValueError):
        return ()
    cuda_version = str(build_info.get("cuda_version") or "")
    if not build_info.get("is_cuda_build") or not cuda_version:
        return ()
    order = search_order(location)
    cache = ldconfig_cache()
    if not cache:
        return ()  # ldconfig missing or refused: what only /etc/ld.so.cache lists would look missing
    entries = knowledge.libraries_for(cuda_version, str(build_info.get("cudnn_version") or "") or None)
    return tuple(e["soname"] for e in entries if e.get("required") and resolve(e["soname"], order, cache)[0] is None)


# --- XLA's toolchain --------------------------------------------------------------------------

_DATA_DIR = re.compile(r"--xla_gpu_cuda_data_dir=(\S+)")


def xla_cuda_data_dir() -> str | None:
    m = _DATA_DIR.search(os.environ.get("XLA_FLAGS") or "")
    return m.group(1).strip("'\"") if m else None


def cuda_roots(framework: Path | None, cuda_major: int | None) -> list[str]:
    """Where XLA looks for a CUDA root (xla/tsl/platform/default/cuda_root_path.cc, CandidateCudaRoots):
    --xla_gpu_cuda_data_dir first, /usr/local/cuda, /opt/cuda, the nvidia-cuda-nvcc wheel beside
    TensorFlow, TensorFlow's own cuda/ copy of libdevice, and a conda prefix. The fixed system
    directories are read below GPUCHECK_HOST_ROOT, like every other host path."""
    roots: list[str] = []
    data_dir = xla_cuda_data_dir()
    if data_dir:
        roots.append(data_dir)
    root = host_root()
    for fixed in ("/usr/local/cuda", "/opt/cuda"):
        roots.append(str(root / fixed.lstrip("/")))
    if framework is not None:
        wheel = "cu13" if cuda_major == 13 else "cuda_nvcc"
        for base in (framework, framework / "python"):
            roots.append(os.path.normpath(str(base / ".." / "nvidia" / wheel)))
        roots.append(str(framework / "cuda"))
        roots.append(os.path.normpath(str(framework / ".." / ".." / ".." / "..")))
    return list(dict.fromkeys(roots))


def find_ptxas(roots: list[str]) -> ToolchainFile:
    searched: list[str] = []
    on_path = shutil.which("ptxas")
    searched.append("PATH")
    path = on_path
    if path is None:
        for r in roots:
            candidate = os.path.join(r, "bin", "ptxas")
            searched.append(candidate)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                path = candidate
                break
    version = None
    if path is not None:
        stage("ptxas --version")
        try:
            proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20, check=False)
            m = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", proc.stdout)
            version = m.group(2) if m else None
        except (OSError, subprocess.SubprocessError):
            version = None
    return ToolchainFile("ptxas", path, tuple(searched), version)


def find_libdevice(roots: list[str]) -> ToolchainFile:
    searched: list[str] = []
    for r in roots:
        candidate = os.path.join(r, "nvvm", "libdevice", "libdevice.10.bc")
        searched.append(candidate)
        if os.path.isfile(candidate):
            return ToolchainFile("libdevice", candidate, tuple(searched))
    return ToolchainFile("libdevice", None, tuple(searched))


# --- the probe ---------------------------------------------------------------------------------


def probe_libraries() -> LibrariesFacts:
    stage("locate tensorflow")
    location, problem = locate_framework()
    notes: list[str] = [problem] if problem else []
    build_info: dict[str, Any] = {}
    source = None
    if location is not None:
        info_path = location / "python" / "platform" / "build_info.py"
        if info_path.is_file():
            try:
                build_info = read_build_info(info_path)
                source = str(info_path)
            except (OSError, SyntaxError, ValueError) as exc:
                notes.append(f"could not read {info_path}: {exc}")
        else:
            notes.append(f"{info_path} does not exist (not a TensorFlow wheel, or a shadowing module)")
    version, requirements = framework_distribution(location) if location is not None else (None, {})
    is_cuda = bool(build_info.get("is_cuda_build")) if build_info else None
    order = search_order(location)
    cache = ldconfig_cache()
    libraries: list[CudaLibrary] = []
    ptxas = libdevice = None
    cuda_version = str(build_info.get("cuda_version") or "")
    if is_cuda and cuda_version:
        for entry in knowledge.libraries_for(cuda_version, str(build_info.get("cudnn_version") or "") or None):
            libraries.append(probe_library(entry, requirements, order, cache))
        major = (knowledge.parse_version(cuda_version) or (None,))[0]
        roots = cuda_roots(location, major)
        ptxas = find_ptxas(roots)
        libdevice = find_libdevice(roots)
    return LibrariesFacts(
        framework_location=str(location) if location is not None else None,
        framework_version=version,
        build_info=build_info,
        build_info_source=source,
        is_cuda_build=is_cuda,
        requirements=requirements,
        search=tuple(order),
        libraries=tuple(libraries),
        ptxas=ptxas,
        libdevice=libdevice,
        xla_cuda_data_dir=xla_cuda_data_dir(),
        notes=tuple(notes),
    )
