# Turns a file into a C++ header holding its bytes, so the chat page stays a real HTML file in the
# source tree and still ships inside the `vela` binary. Run at build time by the top-level
# CMakeLists.txt:
#   cmake -DINPUT=chat.html -DOUTPUT=chat_html.h -DNAME=chat_html -P embed_file.cmake
# The header declares `vela::embedded::NAME` (the bytes plus a trailing NUL) and `NAME_size`.
foreach(v INPUT OUTPUT NAME)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "embed_file.cmake: -D${v}=... is required")
  endif()
endforeach()
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n" bytes "${bytes}")
get_filename_component(src_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${src_name} by src/server/web/embed_file.cmake at build time; do not edit.\n"
  "#pragma once\n#include <cstddef>\n\nnamespace vela::embedded {\n\n"
  "inline constexpr unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
  "inline constexpr size_t ${NAME}_size = sizeof(${NAME}) - 1;\n\n}  // namespace vela::embedded\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
