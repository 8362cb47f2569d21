# Finds llama.cpp's Jinja engine and chat layer as installed by scripts/build_jinja.sh (static
# libllama-jinja.a and libllama-chat.a plus include/llama-jinja under one prefix). Defines the
# imported targets LlamaJinja::jinja and LlamaJinja::chat, and LlamaJinja_FOUND,
# LlamaJinja_VERSION, LlamaJinja_INCLUDE_DIR, LlamaJinja_LIBRARY, LlamaJinja_CHAT_LIBRARY,
# LlamaJinja_CHAT_INCLUDE_DIRS (for the one source that includes "chat.h": the chat layer's
# headers have common names, so they are not put on every file's path) and
# LlamaJinja_TEMPLATES_DIR (llama.cpp's models/templates/*.jinja, installed alongside).
#
#   find_package(LlamaJinja REQUIRED)
#   target_link_libraries(x PRIVATE LlamaJinja::jinja)   # #include "llama-jinja/jinja/runtime.h"
#
# Prefix: the first of -DLLAMA_JINJA_ROOT=..., the LLAMA_JINJA_ROOT environment variable,
# /usr/local/llama-jinja. Only that one prefix is searched, so an explicit root never silently
# falls back to another copy.
include("${CMAKE_CURRENT_LIST_DIR}/ConveyorPrefix.cmake")
conveyor_install_prefix(LLAMA_JINJA_ROOT /usr/local/llama-jinja
  "Prefix of the llama.cpp Jinja install (scripts/build_jinja.sh)"
  LlamaJinja_INCLUDE_DIR LlamaJinja_LIBRARY LlamaJinja_CHAT_LIBRARY LlamaJinja_TEMPLATES_DIR)

find_path(LlamaJinja_INCLUDE_DIR NAMES llama-jinja/jinja/runtime.h
  HINTS "${LLAMA_JINJA_ROOT}" PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(LlamaJinja_LIBRARY NAMES libllama-jinja.a
  HINTS "${LLAMA_JINJA_ROOT}" PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
find_library(LlamaJinja_CHAT_LIBRARY NAMES libllama-chat.a
  HINTS "${LLAMA_JINJA_ROOT}" PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
find_path(LlamaJinja_TEMPLATES_DIR NAMES Qwen-Qwen3-0.6B.jinja
  HINTS "${LLAMA_JINJA_ROOT}" PATH_SUFFIXES share/llama-jinja/templates NO_DEFAULT_PATH)
mark_as_advanced(LlamaJinja_INCLUDE_DIR LlamaJinja_LIBRARY LlamaJinja_CHAT_LIBRARY LlamaJinja_TEMPLATES_DIR)

# The version comes from the stamp file the build script writes last ("<version> <sha256> <recipe>").
unset(LlamaJinja_VERSION)
if(LlamaJinja_INCLUDE_DIR)
  conveyor_stamp_version(LlamaJinja_VERSION "${LlamaJinja_INCLUDE_DIR}/../.llama-jinja-stamp")
endif()

if(LlamaJinja_FIND_REQUIRED AND NOT (LlamaJinja_INCLUDE_DIR AND LlamaJinja_LIBRARY AND LlamaJinja_CHAT_LIBRARY))
  message(FATAL_ERROR
    "llama.cpp's Jinja engine or chat layer not found in LLAMA_JINJA_ROOT=${LLAMA_JINJA_ROOT} "
    "(header='${LlamaJinja_INCLUDE_DIR}' lib='${LlamaJinja_LIBRARY}' chat='${LlamaJinja_CHAT_LIBRARY}'; "
    "an install older than recipe r2 lacks libllama-chat.a).\n"
    "Build and install it with:  scripts/build_jinja.sh ${LLAMA_JINJA_ROOT}\n"
    "(setup.sh runs it as root into /usr/local/llama-jinja), or point -DLLAMA_JINJA_ROOT=<prefix> "
    "at an existing install.")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LlamaJinja
  REQUIRED_VARS LlamaJinja_LIBRARY LlamaJinja_CHAT_LIBRARY LlamaJinja_INCLUDE_DIR
  VERSION_VAR LlamaJinja_VERSION)

if(LlamaJinja_FOUND AND NOT TARGET LlamaJinja::jinja)
  add_library(LlamaJinja::jinja STATIC IMPORTED)
  set_target_properties(LlamaJinja::jinja PROPERTIES
    IMPORTED_LOCATION "${LlamaJinja_LIBRARY}"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    # SYSTEM: the headers (static helpers in jinja/utils.h) must not trip -Wall -Wextra -Werror.
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${LlamaJinja_INCLUDE_DIR}"
    INTERFACE_INCLUDE_DIRECTORIES "${LlamaJinja_INCLUDE_DIR}"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
  set(LlamaJinja_INCLUDE_DIRS "${LlamaJinja_INCLUDE_DIR}")
  set(LlamaJinja_LIBRARIES LlamaJinja::jinja)
  add_library(LlamaJinja::chat STATIC IMPORTED)
  set_target_properties(LlamaJinja::chat PROPERTIES
    IMPORTED_LOCATION "${LlamaJinja_CHAT_LIBRARY}"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_LINK_LIBRARIES LlamaJinja::jinja)
  set(LlamaJinja_CHAT_INCLUDE_DIRS "${LlamaJinja_INCLUDE_DIR}/llama-jinja/common"
      "${LlamaJinja_INCLUDE_DIR}/llama-jinja/llama" "${LlamaJinja_INCLUDE_DIR}/llama-jinja")
endif()
