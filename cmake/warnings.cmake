# Warnings applied to gpuenv's own targets (not to third-party code).
function(gpuenv_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
 -Wformat=2 -Werror=return-type)
  # In a unity build each source is #included into a batch file, and GCC then reports every class that uses a type
  # of its file's anonymous namespace (-Wsubobject-linkage: meant for headers, not for a source included once).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_UNITY_BUILD)
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  if(GPUENV_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # GCC 12 reports a false -Wrestrict inside libstdc++ for `"text" + std::string(...)` at -O2 (GCC bug 105651,
  # fixed in GCC 13); Debian 12's compiler is GCC 12, so a new user's first build would print 16 of them.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
endfunction()
