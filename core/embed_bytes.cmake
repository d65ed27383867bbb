# Writes OUTPUT, a C++ fragment holding the bytes of INPUT as the array VARIABLE. Run at build time, so that editing the input rebuilds the binary: the
# audit program (docker/audit.py and its checks, docker/audit_*.py) and the tool definitions
# (core/src/mcp/tools.json).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" length)
if(length EQUAL 0)
  message(FATAL_ERROR "${INPUT} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by core/embed_bytes.cmake; do not edit.\n"
  "constexpr unsigned char ${VARIABLE}[] = {\n${bytes}\n};\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
