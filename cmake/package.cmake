# The Debian package: `cpack -G DEB --config build/CPackConfig.cmake` (or `ninja -C build package`)
# writes ckpt_<version>_<arch>.deb (the CLI, man pages, completions, docs) and
# ckpt-dev_<version>_<arch>.deb (libckpt, headers, CMake and pkg-config files), and with
# -DBUILD_SHARED_LIBS=ON libckpt0.<minor>_<version>_<arch>.deb (the shared library). Dependencies are
# computed by dpkg-shlibdeps. tests/package/deb_test.sh builds, lints and runs it.
set(CKPT_DEB_MAINTAINER "ckpt maintainers <ckpt@packages.example.org>" CACHE STRING "Maintainer field of the .deb")

# Debian wants man pages and changelogs compressed (gzip -n: reproducible), and docs beside them.
set(ckpt_gz_dir ${CMAKE_BINARY_DIR}/packaging)
set(ckpt_gz_files)
foreach(pair "docs/man/ckpt.1;man/ckpt.1.gz" "docs/man/ckpt-fetch.1;man/ckpt-fetch.1.gz" "docs/man/ckpt-smoke.1;man/ckpt-smoke.1.gz"
             "packaging/debian/changelog;doc/changelog.gz")
  list(GET pair 0 in)
  list(GET pair 1 out)
  add_custom_command(OUTPUT ${ckpt_gz_dir}/${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ckpt_gz_dir}/man ${ckpt_gz_dir}/doc
    COMMAND sh -c "gzip -9n < \"$0\" > \"$1\"" ${CMAKE_SOURCE_DIR}/${in} ${ckpt_gz_dir}/${out}
    DEPENDS ${CMAKE_SOURCE_DIR}/${in} VERBATIM)
  list(APPEND ckpt_gz_files ${ckpt_gz_dir}/${out})
endforeach()
add_custom_target(ckpt_compressed_docs ALL DEPENDS ${ckpt_gz_files})
if(CKPT_BUILD_FUZZ)
  set_target_properties(ckpt_compressed_docs PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
install(FILES ${ckpt_gz_dir}/man/ckpt.1.gz ${ckpt_gz_dir}/man/ckpt-fetch.1.gz ${ckpt_gz_dir}/man/ckpt-smoke.1.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT deb_only EXCLUDE_FROM_ALL)
# With -DBUILD_SHARED_LIBS=ON the library is a third package named after its soname, as Debian
# names shared-library packages (libckpt.so.0.1 -> libckpt0.1); ckpt-dev depends on it.
set(ckpt_lib_package libckpt${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(ckpt_doc_packages ckpt ckpt-dev)
if(BUILD_SHARED_LIBS)
  list(APPEND ckpt_doc_packages ${ckpt_lib_package})
endif()
foreach(pkg ${ckpt_doc_packages})  # every Debian package has its own copyright and changelog
  set(comp deb_only)
  if(pkg STREQUAL "ckpt-dev")
    set(comp dev_deb_only)
  elseif(pkg STREQUAL ckpt_lib_package)
    set(comp lib_deb_only)
  endif()
  install(FILES ${ckpt_gz_dir}/doc/changelog.gz ${CMAKE_SOURCE_DIR}/packaging/debian/copyright
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg} COMPONENT ${comp} EXCLUDE_FROM_ALL)
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/docs/checks.md ${CMAKE_SOURCE_DIR}/docs/report.schema.json
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ckpt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "ckpt")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CKPT_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # xz of the 170 MB static library takes minutes
# Two packages by component group: ckpt (runtime + the compressed man pages and doc files)
# and ckpt-dev (and libckpt0.MINOR in a shared build). The uncompressed man pages `cmake --install` puts (component man) stay out.
set(CPACK_COMPONENTS_ALL runtime deb_only dev dev_deb_only)
if(BUILD_SHARED_LIBS)
  list(APPEND CPACK_COMPONENTS_ALL lib lib_deb_only)
endif()
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_DEBIAN_CKPT_PACKAGE_NAME ckpt)
# libcrypto is loaded with dlopen on first use (src/hub/hash.cpp), which dpkg-shlibdeps cannot
# see: name the package that ships it on the build machine (libssl3 on Debian 12).
set(ckpt_crypto_package libssl3)
find_program(CKPT_DPKG_QUERY dpkg-query)
if(CKPT_DPKG_QUERY AND OPENSSL_CRYPTO_LIBRARY)
  get_filename_component(ckpt_crypto_real ${OPENSSL_CRYPTO_LIBRARY} REALPATH)
  execute_process(COMMAND ${CKPT_DPKG_QUERY} -S ${ckpt_crypto_real} OUTPUT_VARIABLE ckpt_owner
                  ERROR_QUIET RESULT_VARIABLE ckpt_rc)
  if(ckpt_rc EQUAL 0 AND ckpt_owner MATCHES "^([^:,]+)")
    set(ckpt_crypto_package ${CMAKE_MATCH_1})
  endif()
endif()
set(CPACK_DEBIAN_CKPT_PACKAGE_DEPENDS ${ckpt_crypto_package})
set(CPACK_DEBIAN_CKPT_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_CKPT-DEV_PACKAGE_NAME ckpt-dev)
set(CPACK_DEBIAN_CKPT-DEV_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_CKPT-DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_CKPT-DEV_PACKAGE_DEPENDS "libsimdjson-dev, libfmt-dev, libcurl4-openssl-dev | libcurl-dev, libssl-dev, zlib1g-dev, liblzma-dev")
if(BUILD_SHARED_LIBS)
  # The library package: its shlibs file and ldconfig trigger generated, libcrypto (dlopen'ed) named.
  set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${ckpt_lib_package})
  set(CPACK_DEBIAN_LIB_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
  set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS ${ckpt_crypto_package})
  # Debian refreshes the ld.so cache by trigger; CPack's own postinst/postrm would call ldconfig.
  set(ckpt_lib_control ${CMAKE_SOURCE_DIR}/packaging/debian/lib)
  set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${ckpt_lib_control}/triggers ${ckpt_lib_control}/postinst ${ckpt_lib_control}/postrm)
  set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
  string(APPEND CPACK_DEBIAN_CKPT-DEV_PACKAGE_DEPENDS ", ${ckpt_lib_package} (= ${PROJECT_VERSION})")
endif()
# The DEB generator takes a package's description from these (first line: the synopsis).
# Line 1 is the synopsis; CPack indents the rest (lintian: at most 80 columns).
set(CKPT_DEB_DESCRIPTION "verify LLM checkpoints before an inference server loads them
ckpt reads safetensors headers, the shard index, config.json, the tokenizer
and the chat template of a checkpoint, compares every declaration with the
bytes on disk, and names the file, the tensor and the likely cause of each
defect. It also fetches checkpoints from a Hugging Face-compatible hub
without silent stalls or partial files, and explains every finding code.")
set(CKPT_DEB_DEV_DESCRIPTION "verify LLM checkpoints - embedding library (libckpt)
libckpt loads a checkpoint, runs ckpt's checks with an engine profile and
renders the findings. This package holds the library, its headers, a CMake
package (ckpt::ckpt) and a pkg-config file.")
set(CKPT_DEB_LIB_DESCRIPTION "verify LLM checkpoints - shared library (libckpt)
libckpt loads a checkpoint, runs ckpt's checks with an engine profile and
renders the findings. This package holds the shared library; ckpt-dev has
its headers, CMake package and pkg-config file.")
set(CPACK_DEBIAN_CKPT_DESCRIPTION "${CKPT_DEB_DESCRIPTION}")
set(CPACK_DEBIAN_LIB_DESCRIPTION "${CKPT_DEB_LIB_DESCRIPTION}")
set(CPACK_DEBIAN_CKPT-DEV_DESCRIPTION "${CKPT_DEB_DEV_DESCRIPTION}")
include(CPack)
cpack_add_component_group(ckpt DESCRIPTION "${CKPT_DEB_DESCRIPTION}")
cpack_add_component_group(ckpt-dev DESCRIPTION "${CKPT_DEB_DEV_DESCRIPTION}")
cpack_add_component(runtime GROUP ckpt)
cpack_add_component(deb_only GROUP ckpt)
cpack_add_component(dev GROUP ckpt-dev)
cpack_add_component(dev_deb_only GROUP ckpt-dev)
if(BUILD_SHARED_LIBS)
  cpack_add_component_group(lib DESCRIPTION "${CKPT_DEB_LIB_DESCRIPTION}")
  cpack_add_component(lib GROUP lib)
  cpack_add_component(lib_deb_only GROUP lib)
endif()

