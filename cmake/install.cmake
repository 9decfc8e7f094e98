# SPDX-License-Identifier: GPL-2.0
#
# What `make install` puts on a machine (Documentation/install.md), besides
# sdp.ko, which the top-level Makefile installs: the tools, libsdp.so and
# sdp_run, the UAPI header with a pkg-config file and a CMake package, the
# man pages, an example /etc/libsdp.conf and the module and sysctl examples.
# The top-level Makefile configures a build without sanitizers for it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS sdp-decode sdp-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS sdpstat RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS sdp_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(PROGRAMS userlib/preload/sdp_run DESTINATION ${CMAKE_INSTALL_BINDIR})

# The header keeps its in-tree include line: #include "uapi/sdp.h".
install(FILES include/uapi/sdp.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sdp/uapi)

file(GLOB SDP_MAN_PAGES ${PROJECT_SOURCE_DIR}/man/*.[1-8])
foreach(page ${SDP_MAN_PAGES})
  string(REGEX REPLACE ".*\\.([1-8])$" "\\1" section ${page})
  install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()

# libsdp.so reads /etc/libsdp.conf whatever the prefix (as OFED libsdp
# did); an existing file is the administrator's and is left alone.
install(CODE "
  set(conf \"\$ENV{DESTDIR}/etc/libsdp.conf\")
  if(EXISTS \"\${conf}\")
    message(STATUS \"Kept: \${conf}\")
  else()
    # file(INSTALL) puts DESTDIR in front of the destination itself.
    file(INSTALL \"${PROJECT_SOURCE_DIR}/userlib/preload/libsdp.conf\" DESTINATION /etc)
  endif()")
install(FILES packaging/examples/sdp-modprobe.conf packaging/examples/sdp-sysctl.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# pkg-config and find_package(sdp): the header only (libsdp.so is a
# preload, not a library to link).
configure_file(packaging/sdp.pc.in ${PROJECT_BINARY_DIR}/sdp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sdp.pc DESTINATION ${CMAKE_INSTALL_DATADIR}/pkgconfig)
configure_package_config_file(packaging/sdpConfig.cmake.in
    ${PROJECT_BINARY_DIR}/sdpConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/sdp
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sdpConfigVersion.cmake
    COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/sdpConfig.cmake ${PROJECT_BINARY_DIR}/sdpConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/sdp)

# Every man page passes man --warnings.
add_test(NAME man_lint COMMAND ${PROJECT_SOURCE_DIR}/tests/scripts/man_lint.sh ${SDP_MAN_PAGES})
