# cmake -DIN=<file> -DOUT=<file.cpp> -DSYMBOL=<name> -P embed_text.cmake
# Writes a C++ source defining `const char SYMBOL[]` with IN's bytes, so the binary carries the
# document itself (ckpt explain prints docs/checks.md; there is no second copy to drift).
file(READ "${IN}" text HEX)
string(LENGTH "${text}" hex_len)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${text}")
math(EXPR len "${hex_len} / 2")
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#include <cstddef>\nnamespace ckpt::cli {\nextern const char ${SYMBOL}[];\nextern const size_t ${SYMBOL}_size;\nconst char ${SYMBOL}[] = {${bytes}'\\0'};\nconst size_t ${SYMBOL}_size = ${len};\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
