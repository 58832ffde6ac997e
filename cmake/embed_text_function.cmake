# gpuenv_embed_text(OUT_CPP NAME IN COMMENT): a C++ source defining gpuenv::recipes::NAME() with the bytes of the
# text file IN (cmake/embed_text.cmake), regenerated when IN changes; its path in OUT_CPP.
function(gpuenv_embed_text out_cpp name in comment)
  set(cpp ${CMAKE_CURRENT_BINARY_DIR}/embedded_${name}.cpp)
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${cpp} -DIN=${in} -DNAME=${name} -P ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS ${in} ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    COMMENT "${comment}"
    VERBATIM)
  set(${out_cpp} ${cpp} PARENT_SCOPE)
endfunction()
