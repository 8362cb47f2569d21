# Finds XGrammar's C++ core as installed by scripts/build_xgrammar.sh (static libxgrammar.a plus
# include/xgrammar and include/dlpack under one prefix). Defines the imported target
# XGrammar::xgrammar and XGrammar_FOUND, XGrammar_VERSION, XGrammar_INCLUDE_DIR, XGrammar_LIBRARY.
#
#   find_package(XGrammar REQUIRED)
#   target_link_libraries(x PRIVATE XGrammar::xgrammar)
#
# Prefix: the first of -DXGRAMMAR_ROOT=..., the XGRAMMAR_ROOT environment variable,
# /usr/local/xgrammar. Only that one prefix is searched, so an explicit root never silently falls
# back to another copy.
include("${CMAKE_CURRENT_LIST_DIR}/ConveyorPrefix.cmake")
conveyor_install_prefix(XGRAMMAR_ROOT /usr/local/xgrammar "Prefix of the XGrammar install (scripts/build_xgrammar.sh)"
  XGrammar_INCLUDE_DIR XGrammar_DLPACK_INCLUDE_DIR XGrammar_LIBRARY)
set(_xgrammar_hints "${XGRAMMAR_ROOT}")

find_path(XGrammar_INCLUDE_DIR NAMES xgrammar/xgrammar.h
  HINTS ${_xgrammar_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(XGrammar_DLPACK_INCLUDE_DIR NAMES dlpack/dlpack.h
  HINTS ${_xgrammar_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(XGrammar_LIBRARY NAMES libxgrammar.a
  HINTS ${_xgrammar_hints} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
mark_as_advanced(XGrammar_INCLUDE_DIR XGrammar_DLPACK_INCLUDE_DIR XGrammar_LIBRARY)

# The version comes from the stamp file the build script writes last ("<version> <sha256>").
unset(XGrammar_VERSION)
if(XGrammar_INCLUDE_DIR)
  conveyor_stamp_version(XGrammar_VERSION "${XGrammar_INCLUDE_DIR}/../.xgrammar-stamp")
endif()

if(XGrammar_FIND_REQUIRED AND NOT (XGrammar_INCLUDE_DIR AND XGrammar_DLPACK_INCLUDE_DIR AND XGrammar_LIBRARY))
  message(FATAL_ERROR
    "XGrammar not found in XGRAMMAR_ROOT=${XGRAMMAR_ROOT} (header='${XGrammar_INCLUDE_DIR}' "
    "dlpack='${XGrammar_DLPACK_INCLUDE_DIR}' lib='${XGrammar_LIBRARY}').\n"
    "Build and install it with:  scripts/build_xgrammar.sh ${XGRAMMAR_ROOT}\n"
    "(setup.sh runs it as root into /usr/local/xgrammar), or point -DXGRAMMAR_ROOT=<prefix> at an "
    "existing install.")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(XGrammar
  REQUIRED_VARS XGrammar_LIBRARY XGrammar_INCLUDE_DIR XGrammar_DLPACK_INCLUDE_DIR
  VERSION_VAR XGrammar_VERSION)

if(XGrammar_FOUND AND NOT TARGET XGrammar::xgrammar)
  find_package(Threads REQUIRED)
  add_library(XGrammar::xgrammar STATIC IMPORTED)
  set(_xgrammar_incs "${XGrammar_INCLUDE_DIR}")
  if(NOT XGrammar_DLPACK_INCLUDE_DIR STREQUAL XGrammar_INCLUDE_DIR)
    list(APPEND _xgrammar_incs "${XGrammar_DLPACK_INCLUDE_DIR}")
  endif()
  set_target_properties(XGrammar::xgrammar PROPERTIES
    IMPORTED_LOCATION "${XGrammar_LIBRARY}"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    # SYSTEM: the public headers must not trip the consumer's -Wall -Wextra (-Werror).
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_xgrammar_incs}"
    INTERFACE_INCLUDE_DIRECTORIES "${_xgrammar_incs}"
    # Mirrors the library's PUBLIC definitions, so headers see the same values the .a was built with.
    INTERFACE_COMPILE_DEFINITIONS "XGRAMMAR_ENABLE_CPPTRACE=0;XGRAMMAR_ENABLE_INTERNAL_CHECK=0"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  set(XGrammar_INCLUDE_DIRS ${_xgrammar_incs})
  set(XGrammar_LIBRARIES XGrammar::xgrammar)
endif()
