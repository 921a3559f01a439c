# `ckpt explain CODE` prints docs/checks.md's entry for CODE: the document is compiled into the
# binary at build time, so the two cannot disagree (tests/cli/explain_test.cpp checks every code).
set(CKPT_CHECKS_MD_CPP ${CMAKE_BINARY_DIR}/generated/checks_md.cpp)
add_custom_command(OUTPUT ${CKPT_CHECKS_MD_CPP}
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/docs/checks.md -DOUT=${CKPT_CHECKS_MD_CPP} -DSYMBOL=kChecksMd
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_text.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/docs/checks.md ${CMAKE_SOURCE_DIR}/cmake/embed_text.cmake
  COMMENT "Embedding docs/checks.md for ckpt explain" VERBATIM)
target_sources(ckpt PRIVATE ${CKPT_CHECKS_MD_CPP})
