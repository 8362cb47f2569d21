# What the Find modules of the libraries that scripts/build_*.sh install under one prefix share.

# conveyor_install_prefix(<ROOT_VAR> <default prefix> <doc> [<cached find result>...])
# Sets ROOT_VAR (cached) to the first of -D<ROOT_VAR>=..., the <ROOT_VAR> environment variable,
# the default. Only that one prefix is searched, so an explicit root never silently falls back to
# another copy. When the root changed since the last configure, the cached find results named
# are forgotten, so they are searched for again.
macro(conveyor_install_prefix root_var default_prefix doc)
  if(NOT ${root_var} AND DEFINED ENV{${root_var}} AND NOT "$ENV{${root_var}}" STREQUAL "")
    set(${root_var} "$ENV{${root_var}}")
  endif()
  if(NOT ${root_var})
    set(${root_var} "${default_prefix}")
  endif()
  set(${root_var} "${${root_var}}" CACHE PATH "${doc}")
  if(DEFINED _${root_var}_LAST AND NOT _${root_var}_LAST STREQUAL ${root_var})
    foreach(_conveyor_found_var ${ARGN})
      unset(${_conveyor_found_var} CACHE)
    endforeach()
  endif()
  set(_${root_var}_LAST "${${root_var}}" CACHE INTERNAL "")
endmacro()

# conveyor_stamp_version(<out var> <stamp file>)
# The version from the stamp file a build script writes last ("<version> <sha256> ..."); unset
# when there is no stamp or it names no version.
function(conveyor_stamp_version out_var stamp_file)
  unset(${out_var} PARENT_SCOPE)
  if(EXISTS "${stamp_file}")
    file(READ "${stamp_file}" _stamp)
    if(_stamp MATCHES "^([0-9][0-9A-Za-z.+-]*) ")
      set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
    endif()
  endif()
endfunction()
