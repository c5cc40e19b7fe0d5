# SPDX-License-Identifier: MIT
# bp_stage_headers(STAGE SOURCE_DIR ENTRY...): links each ENTRY (a header,
# or a folder of them, relative to SOURCE_DIR) into STAGE, the include
# directory of one library (CMakeLists.txt, bp_own_headers).
#
# A stage made by another checkout of the tree may hold a link where this
# one stages a folder's files one by one, or a folder where it now stages a
# link. Either is cleared first: a link made through an old folder link
# would land inside the source tree, replacing the header it should point
# at (tests/packaging/check_stage.cmake).
function(bp_stage_headers stage source_dir)
  foreach(entry ${ARGN})
    string(REPLACE "/" ";" parts "${entry}")
    list(POP_BACK parts)
    set(prefix "${stage}")
    foreach(part ${parts})
      set(prefix "${prefix}/${part}")
      if(IS_SYMLINK "${prefix}")
        file(REMOVE "${prefix}")
      endif()
    endforeach()
    set(link "${stage}/${entry}")
    if(IS_DIRECTORY "${link}" AND NOT IS_SYMLINK "${link}")
      file(REMOVE_RECURSE "${link}")
    endif()
    get_filename_component(parent "${link}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    file(CREATE_LINK "${source_dir}/${entry}" "${link}" SYMBOLIC)
  endforeach()
endfunction()
