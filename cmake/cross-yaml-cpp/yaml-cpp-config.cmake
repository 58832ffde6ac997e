# yaml-cpp for a cross build (cmake/aarch64-linux-gnu.cmake) where the target architecture's libyaml-cpp-dev cannot be
# installed beside the host's (Debian 12's is not Multi-Arch: same): the target's shared library from its runtime
# package (libyaml-cpp0.7:arm64) and the host package's headers, which do not depend on the architecture. Defines the
# imported target `yaml-cpp`, as the package's own config does.
find_library(YAML_CPP_LIBRARY NAMES libyaml-cpp.so.0.7 libyaml-cpp.so NO_CMAKE_PATH NO_CMAKE_ENVIRONMENT_PATH)
find_path(YAML_CPP_INCLUDE_DIR yaml-cpp/yaml.h PATHS /usr/include NO_DEFAULT_PATH)
if(NOT YAML_CPP_LIBRARY OR NOT YAML_CPP_INCLUDE_DIR)
  set(yaml-cpp_FOUND FALSE)
  set(yaml-cpp_NOT_FOUND_MESSAGE "needs libyaml-cpp0.7:${CMAKE_LIBRARY_ARCHITECTURE} (found: '${YAML_CPP_LIBRARY}') and libyaml-cpp-dev's headers (found: '${YAML_CPP_INCLUDE_DIR}'); scripts/deps.sh installs both")
  return()
endif()
if(NOT TARGET yaml-cpp)
  add_library(yaml-cpp SHARED IMPORTED)
  set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION "${YAML_CPP_LIBRARY}" INTERFACE_INCLUDE_DIRECTORIES "${YAML_CPP_INCLUDE_DIR}")
endif()
set(YAML_CPP_LIBRARIES yaml-cpp)
