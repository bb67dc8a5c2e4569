# cmake -DSOURCE_DIR=... -DOUTPUT=... -DCGEMM_VERSION=... -P write_build_info.cmake
# Runs at every build (the commit changes without a reconfigure); configure_file rewrites
# OUTPUT only when its text changes, so an unchanged commit recompiles nothing.
set(CGEMM_COMMIT unknown)
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
    OUTPUT_VARIABLE head RESULT_VARIABLE head_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(head_rc EQUAL 0 AND head)
    set(CGEMM_COMMIT ${head})
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} status --porcelain
      --untracked-files=no OUTPUT_VARIABLE changes RESULT_VARIABLE status_rc ERROR_QUIET)
    if(status_rc EQUAL 0 AND changes)
      string(APPEND CGEMM_COMMIT -dirty)
    endif()
  endif()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.cpp.in ${OUTPUT} @ONLY)
