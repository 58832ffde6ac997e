# Warnings applied to gpuenv's own targets (not to third-party code).
function(gpuenv_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
 -Wformat=2 -Werror=return-type)
endfunction()
