# Install and embed: the CLI, one library libckpt (static by default, shared with
# -DBUILD_SHARED_LIBS=ON), the public headers, a CMake package (ckpt::ckpt), a pkg-config file,
# man pages and shell completions. Included at the end of the top-level CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# libckpt is the union of the module libraries' objects, so nothing is compiled twice and the
# CLI keeps linking the modules directly (its start-up budget does not pay for a shared library).
set(CKPT_LIBRARY_MODULES ckpt_base ckpt_jinja ckpt_arch ckpt_tokenizer ckpt_hub ckpt_fixture ckpt_inspect ckpt_lib)
set(ckpt_library_objects)
foreach(m ${CKPT_LIBRARY_MODULES})
  get_target_property(kind ${m} TYPE)
  if(NOT kind STREQUAL "INTERFACE_LIBRARY")
    list(APPEND ckpt_library_objects $<TARGET_OBJECTS:${m}>)
  endif()
endforeach()
add_library(ckpt_library ${ckpt_library_objects})
add_library(ckpt::ckpt ALIAS ckpt_library)
set_target_properties(ckpt_library PROPERTIES OUTPUT_NAME ckpt EXPORT_NAME ckpt VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
target_compile_features(ckpt_library INTERFACE cxx_std_20)
target_include_directories(ckpt_library INTERFACE
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The public headers include only the standard library: the dependencies are private (a static
# libckpt still needs them at link time, which CMake exports as $<LINK_ONLY:...>).
target_link_libraries(ckpt_library PRIVATE simdjson::simdjson fmt::fmt CURL::libcurl OpenSSL::Crypto Threads::Threads
                      ZLIB::ZLIB LibLZMA::LibLZMA)  # zip members and 7z archives of the pickle scan
if(BUILD_SHARED_LIBS)
  # A shared libckpt records its dependencies itself (DT_NEEDED), so ckptConfig.cmake looks none
  # of them up (the export still names simdjson::simdjson and fmt::fmt as link-dependent, which
  # CMake uses only to find them for -rpath-link and ignores when the consumer has no such
  # target). It exports only ckpt:: symbols (cmake/libckpt.map), and a symbol left undefined
  # fails its own link rather than a consumer's.
  set(ckpt_map ${CMAKE_SOURCE_DIR}/cmake/libckpt.map)
  target_link_options(ckpt_library PRIVATE -Wl,--version-script=${ckpt_map} -Wl,--no-undefined)
  set_target_properties(ckpt_library PROPERTIES LINK_DEPENDS ${ckpt_map})
endif()
if(CKPT_BUILD_FUZZ)
  set_target_properties(ckpt_library PROPERTIES EXCLUDE_FROM_ALL ON)
endif()

# The public API (docs/api.md). Everything else under include/ckpt/ and src/ stays internal.
set(CKPT_PUBLIC_HEADERS checkpoint.h checks.h engines.h finding.h fixture.h gguf.h jinja.h json.h name_index.h pytorch.h tensor.h
                        report.h safetensors.h)
configure_file(${CMAKE_SOURCE_DIR}/cmake/version.h.in ${CMAKE_BINARY_DIR}/include/ckpt/version.h @ONLY)
set(ckpt_header_files ${CMAKE_SOURCE_DIR}/include/ckpt/ckpt.h ${CMAKE_BINARY_DIR}/include/ckpt/version.h)
foreach(h ${CKPT_PUBLIC_HEADERS})
  list(APPEND ckpt_header_files ${CMAKE_SOURCE_DIR}/include/ckpt/${h})
endforeach()
install(FILES ${ckpt_header_files} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ckpt COMPONENT dev)

# A shared libckpt is its own component (lib): the .deb puts it in its own package, libckpt0.MINOR.
install(TARGETS ckpt_library EXPORT ckptTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(CKPT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ckpt)
install(EXPORT ckptTargets NAMESPACE ckpt:: DESTINATION ${CKPT_CMAKE_DIR} COMPONENT dev)
get_target_property(CKPT_LIBRARY_TYPE ckpt_library TYPE)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ckptConfig.cmake.in ${CMAKE_BINARY_DIR}/ckptConfig.cmake
                              INSTALL_DESTINATION ${CKPT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ckptConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ckptConfig.cmake ${CMAKE_BINARY_DIR}/ckptConfigVersion.cmake
        DESTINATION ${CKPT_CMAKE_DIR} COMPONENT dev)

# pkg-config: `pkg-config --cflags --libs ckpt` (add --static for the static library: its private
# libraries are named directly, the shared system ones, not their own static dependencies). The
# prefix is found from the .pc file's own place, so `cmake --install --prefix DIR` works anywhere.
file(RELATIVE_PATH CKPT_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" CKPT_PC_TO_PREFIX "${CKPT_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/ckpt.pc.in ${CMAKE_BINARY_DIR}/ckpt.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ckpt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Man pages and completions (the completions ask `ckpt --help` for commands and options, so
# they cannot fall behind the binary).
install(FILES ${CMAKE_SOURCE_DIR}/docs/man/ckpt.1 ${CMAKE_SOURCE_DIR}/docs/man/ckpt-fetch.1 ${CMAKE_SOURCE_DIR}/docs/man/ckpt-smoke.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT man)  # the .deb has them compressed
install(FILES ${CMAKE_SOURCE_DIR}/completions/ckpt.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME ckpt COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/completions/_ckpt DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions
        COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/completions/ckpt.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d
        COMPONENT runtime)

install(TARGETS ckpt ckpt-fetch ckpt-smoke RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
