#pragma once
// A model of glibc's dynamic linker (ld.so) searching for shared libraries inside an image tree, without
// running anything: which file each DT_NEEDED name resolves to, as `ld.so --list` would print it. The build
// uses it to refuse images whose programs or modules cannot load, and must agree with the real linker
// (tests/images/loader_model_test.cpp compares the two on trees of real libraries).
//
// What is modelled (glibc elf/dl-load.c, _dl_map_object and _dl_map_object_deps):
// - dependencies are loaded breadth first; a name already loaded (by the name it was asked for, or by its
//   DT_SONAME) is not searched again;
// - a name with a slash is opened as it is (relative names from the root directory, the working directory
//   of `gpuenv run`);
// - search order: the DT_RPATH of the object that needs the name, then of the object that loaded that one,
//   and on up to the root object, unless the needing object has DT_RUNPATH; then the needing object's own
//   DT_RUNPATH (not inherited); then the ld.so.cache; then the default directories. An object with DT_RUNPATH
//   has its DT_RPATH ignored. $ORIGIN (and ${ORIGIN}) is the directory of the path the object was found at;
// - a found file must be an ELF object of the root's class and machine, else the search goes on, as ld.so does
//   with a wrong-ELF-class file.
// Not modelled: LD_LIBRARY_PATH and LD_PRELOAD (gpuenv run sets neither), $LIB and $PLATFORM, glibc-hwcaps
// subdirectories, DF_1_NODEFLIB.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "images/elf/elf.hpp"

namespace gpuenv::images {

struct LoadedLibrary {
  std::string name;       ///< the DT_NEEDED name
  std::string path;       ///< absolute path inside the image where it was found; empty when not found
  std::string needed_by;  ///< absolute path of the object whose DT_NEEDED first asked for it
};

/// Names that cannot be loaded, each with the objects that need them.
struct Unresolved {
  /// In the trees of programs, of Python extension modules (`*.cpython-*.so`, `*.abi3.so`) and of the
  /// libraries those load: the image cannot run them.
  std::map<std::string, std::vector<std::string>> required;
  /// In the trees of other libraries that nothing needs: plugins a program may dlopen (NVSHMEM's transports,
  /// cuFile's RDMA support) when the host has what they need; they fail to load only then.
  std::map<std::string, std::vector<std::string>> optional;
};

class LoaderModel {
 public:
  /// `root`: the image tree on this host. `cache`: the image's ld.so.cache (SONAME -> absolute path in the
  /// image, first entry wins). `default_dirs`: the linker's built-in directories, in order.
  LoaderModel(std::string root, std::vector<std::pair<std::string, std::string>> cache, std::vector<std::string> default_dirs);

  /// The ELF facts of the file at absolute image path `abs` (links followed inside the image; cached), or
  /// nothing when it is not an ELF file.
  const ElfInfo* info(const std::string& abs);

  /// What `ld.so --list ABS` lists inside the image: every library of the object's tree once, in load order,
  /// with where it was found. The dynamic linker itself is not listed.
  std::vector<LoadedLibrary> list(const std::string& abs);

  /// Names that cannot be loaded, with the objects that need them: every object in `objects` (absolute image
  /// paths) that is a program (has an interpreter) or that no object in `objects` names in its DT_NEEDED is a
  /// root, loaded as ld.so would load it; a library that others need is judged in their trees, with their
  /// RPATHs, as it is at run time. A missing interpreter is reported under its own path.
  /// `accept(name)` true: the name is not reported (provided at run time, such as the driver's libcuda.so.1,
  /// or accepted by the user).
  Unresolved unresolved(const std::vector<std::string>& objects, const std::function<bool(const std::string&)>& accept);

 private:
  struct Object {
    std::string path;                 // as found (symlinks not resolved), absolute in the image
    const ElfInfo* elf = nullptr;
    const Object* loader = nullptr;   // the object that caused it to be loaded
  };
  std::optional<std::string> resolve_inside(const std::string& abs);  // follows links within the root (memoised)
  std::optional<std::string> resolve_uncached(const std::string& abs) const;
  bool compatible(const std::string& abs, const ElfInfo& root);
  std::optional<std::string> search(const std::string& name, const Object& needer, const ElfInfo& root);
  std::vector<std::string> expand(const std::string& list, const std::string& origin) const;

  std::string m_root;
  std::map<std::string, std::string> m_cache;
  std::vector<std::string> m_default;
  std::map<std::string, std::unique_ptr<ElfInfo>> m_info;  // by resolved path; null: not ELF
  std::map<std::string, std::optional<std::string>> m_searched;  // name and directories -> found path
  std::map<std::string, std::optional<std::string>> m_resolved;  // path -> the regular file it ends at
};

}  // namespace gpuenv::images
