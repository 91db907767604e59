# install.cmake — installs the compiler, libnccrt, its public headers and a
# CMake package, so that a program embedding generated code can say
#   find_package(ncc REQUIRED)  ...  target_link_libraries(app PRIVATE ncc::nccrt)
# and get the headers (include/ncc: ncc_rt.h, ncc_kernel.h, ncc_emu.h,
# ncc_cudart.h) and the library.  Included by the top CMakeLists.txt.
include(CMakePackageConfigHelpers)

set(NCC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ncc)

# the installed ncc finds the installed libnccrt beside it
set_target_properties(ncc PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS ncc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS nccrt EXPORT nccTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/runtime/ncc_rt.h ${CMAKE_CURRENT_SOURCE_DIR}/runtime/ncc_kernel.h
              ${CMAKE_CURRENT_SOURCE_DIR}/runtime/ncc_emu.h ${CMAKE_CURRENT_SOURCE_DIR}/runtime/ncc_cudart.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ncc)
install(EXPORT nccTargets NAMESPACE ncc:: FILE nccTargets.cmake DESTINATION ${NCC_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/runtime/nccConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/nccConfig.cmake
                              INSTALL_DESTINATION ${NCC_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/nccConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/nccConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/nccConfigVersion.cmake
        DESTINATION ${NCC_CMAKE_DIR})
