# SPDX-License-Identifier: MIT
# bp_stage_headers over a stage another checkout made: cmake -P this file.
# The folder link of an older layout is replaced by links to each header
# (and no header of the source tree becomes a link to itself); a folder of
# links is replaced by a folder link again.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/stage_headers.cmake)
string(RANDOM LENGTH 8 tag)
set(root "$ENV{TMPDIR}")
if(NOT root)
  set(root /tmp)
endif()
set(root "${root}/bp-stage-check-${tag}")
file(MAKE_DIRECTORY "${root}/src/lib")
file(WRITE "${root}/src/lib/a.hpp" "// a\n")
file(WRITE "${root}/src/lib/b.hpp" "// b\n")
set(stage "${root}/stage")

function(expect what)
  if(NOT (${ARGN}))
    file(REMOVE_RECURSE "${root}")
    message(FATAL_ERROR "stage: ${what}")
  endif()
endfunction()

# The older layout: the whole folder as one link.
bp_stage_headers("${stage}" "${root}/src" lib)
expect("a folder entry is one link" IS_SYMLINK "${stage}/lib")
# This layout: the headers one by one, over the older stage.
bp_stage_headers("${stage}" "${root}/src" lib/a.hpp lib/b.hpp)
expect("the folder link is gone" NOT IS_SYMLINK "${stage}/lib")
expect("each header is a link" IS_SYMLINK "${stage}/lib/a.hpp")
expect("the source header is still a file" NOT IS_SYMLINK "${root}/src/lib/a.hpp")
file(READ "${root}/src/lib/a.hpp" text)
expect("the source header keeps its text" text STREQUAL "// a\n")
file(READ "${stage}/lib/b.hpp" text)
expect("the staged header reads the source" text STREQUAL "// b\n")
# And back: the folder link again over the per-header stage.
bp_stage_headers("${stage}" "${root}/src" lib)
expect("a folder link replaces the folder" IS_SYMLINK "${stage}/lib")
expect("the source header is still a file after going back" NOT IS_SYMLINK "${root}/src/lib/b.hpp")
file(REMOVE_RECURSE "${root}")
message(STATUS "stage: a stage of either layout is rebuilt without touching the sources")
